import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { SecretBox } from '../../secrets/cipher.js';
import { openStore } from '../../store/index.js';
import type { StoreTarget } from '../../store/index.js';
import type { Store } from '../../store/index.js';
import type { Config } from '../config.js';

/** Seals the stored secrets under DUNWALL_ENCRYPTION_KEY, opening older ones with the previous keys too. */
export function secretBoxFor(config: Config): SecretBox {
  return new SecretBox({ current: config.encryptionKey, previous: config.encryptionKeysOld });
}

export function storeTarget(config: Config): StoreTarget {
  return config.databaseUrl !== null
    ? {
        engine: 'postgres',
        url: config.databaseUrl,
        queryTimeoutMs: config.dbQueryTimeoutMs,
        connectTimeoutMs: config.dbConnectTimeoutMs,
      }
    : { engine: 'embedded', dataDir: join(config.dataDir, 'pgdata') };
}

/** The store DATABASE_URL or the data folder names, open, and the box its secrets are sealed with. */
export async function openConfiguredStore(config: Config, log: Logger): Promise<{ store: Store; secrets: SecretBox }> {
  if (config.databaseUrl === null) mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const target = storeTarget(config);
  const secrets = secretBoxFor(config);
  const store = await openStore(target, { secrets });
  log.info(
    { store: store.maintenance.engine, ...(target.engine === 'embedded' ? { dataDir: config.dataDir } : {}) },
    'store ready',
  );
  if (secrets.currentKeyId === null) {
    log.warn(
      'DUNWALL_ENCRYPTION_KEY is not set: HMAC, Stripe and webhook signing secrets are stored in clear; set it in production',
    );
  } else {
    log.info({ keyId: secrets.currentKeyId }, 'secrets encrypted at rest');
  }
  return { store, secrets };
}

/**
 * DUNWALL_DEFAULT_TIER names a tier of the store, or the service does not start: a tenant
 * created without a tier would otherwise fail (or get what the operator did not choose).
 */
export async function checkDefaultTier(store: Pick<Store, 'tenants'>, name: string): Promise<void> {
  const tiers = (await store.tenants.listTiers()).map((t) => t.name);
  if (tiers.includes(name)) return;
  throw new Error(
    `DUNWALL_DEFAULT_TIER names no tier of this store: '${name}' (its tiers: ${tiers.join(', ')}); name one of them, or start without it, create the tier (dunwall tier set ${name} ...) and restart`,
  );
}

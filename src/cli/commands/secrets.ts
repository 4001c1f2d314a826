import { mkdirSync } from 'node:fs';
import { CliError, ConfigurationError, EXIT_FAILURE, oneLine } from '../errors.js';
import type { Command } from '../io.js';
import { loadConfigOrThrow } from './service.js';

interface ReencryptAnswer {
  key_id: string;
  encrypted: number;
  reencrypted: number;
  unchanged: number;
}

const reencrypt: Command = {
  name: 'secrets reencrypt',
  usage: '',
  summary:
    'Encrypt every stored HMAC and Stripe signing secret under DUNWALL_ENCRYPTION_KEY (clear ones and those under DUNWALL_ENCRYPTION_KEYS_OLD), in one transaction; prints counts only. Stop an embedded service first.',
  options: {},
  positionals: [],
  async run(ctx) {
    const config = loadConfigOrThrow(ctx.io.env);
    if (config.encryptionKey === null)
      throw new ConfigurationError('secrets reencrypt needs DUNWALL_ENCRYPTION_KEY: the key to encrypt under');
    // Loaded on demand: the admin commands do not need a database driver.
    const { secretBoxFor, storeTarget } = await import('../../runtime/server.js');
    const { openDb, reencryptSecrets } = await import('../../store/index.js');

    // The messages name key ids, tenants and kinds, never a secret or a key.
    const failed = (what: string, err: unknown) =>
      new CliError(`${what}: ${oneLine(err instanceof Error ? err.message : String(err))}`, EXIT_FAILURE);
    let db: Awaited<ReturnType<typeof openDb>>;
    try {
      if (config.databaseUrl === null) mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
      db = await openDb(storeTarget(config));
    } catch (err) {
      throw failed('secrets reencrypt failed to open the store', err);
    }
    let answer: ReencryptAnswer;
    try {
      const counts = await reencryptSecrets(db, secretBoxFor(config));
      answer = {
        key_id: counts.keyId,
        encrypted: counts.encrypted,
        reencrypted: counts.reencrypted,
        unchanged: counts.unchanged,
      };
    } catch (err) {
      throw failed('secrets reencrypt failed, nothing was changed', err);
    } finally {
      await db.close();
    }
    ctx.output(answer, (a) =>
      [
        `all stored secrets are encrypted under key ${a.key_id}`,
        `  ${a.encrypted} encrypted (were in clear)`,
        `  ${a.reencrypted} re-encrypted (were under an older key)`,
        `  ${a.unchanged} already under this key`,
      ].join('\n'),
    );
  },
};

export const secretsCommands: Command[] = [reencrypt];

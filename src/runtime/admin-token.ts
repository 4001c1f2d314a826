import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { MIN_ADMIN_TOKEN_LENGTH } from './config.js';
import type { Config } from './config.js';
import { generateAdminToken, sha256 } from '../domain/keys.js';

export const ADMIN_TOKEN_FILE = 'admin-token';

export function adminTokenPath(dataDir: string): string {
  return join(dataDir, ADMIN_TOKEN_FILE);
}

export function readAdminTokenFile(dataDir: string): string | null {
  const path = adminTokenPath(dataDir);
  if (!existsSync(path)) return null;
  const token = readFileSync(path, 'utf8').trim();
  return token === '' ? null : token;
}

/**
 * The embedded store's admin token: read from the data folder, or generated there on first
 * start (an empty file counts as none). The file is made readable by its owner only (0600)
 * on every start, and a token too short to be safe is refused, as it is from the environment.
 */
export function ensureAdminTokenFile(dataDir: string): { token: string; path: string; created: boolean } {
  const path = adminTokenPath(dataDir);
  const existing = readAdminTokenFile(dataDir);
  if (existing !== null) {
    if (existing.length < MIN_ADMIN_TOKEN_LENGTH) {
      throw new Error(
        `${path} holds a token shorter than ${MIN_ADMIN_TOKEN_LENGTH} characters: delete the file to have a new one generated`,
      );
    }
    chmodSync(path, 0o600);
    return { token: existing, path, created: false };
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const token = generateAdminToken();
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return { token, path, created: true };
}

/** The admin token's SHA-256 digest (the app keeps only that); null: the admin API is off. */
export function resolveAdminTokenDigest(config: Config, log: Logger): Buffer | null {
  if (config.adminToken !== null) return sha256(config.adminToken);
  if (config.databaseUrl !== null) {
    log.warn('admin API disabled: DUNWALL_ADMIN_TOKEN is not set (required with DATABASE_URL)');
    return null;
  }
  const { token, path, created } = ensureAdminTokenFile(config.dataDir);
  log.info({ path }, created ? 'admin token generated; it is in this file' : 'admin token read from the data folder');
  return sha256(token);
}

import type { Mode } from '../domain/types.js';
import { resolve } from 'node:path';
import { adminTokenPath, readAdminTokenFile } from '../runtime/admin-token.js';
import { DEFAULT_DATA_DIR } from '../runtime/config.js';
import { AdminClient } from './client.js';
import { ConfigurationError } from './errors.js';

export type Env = Record<string, string | undefined>;

export const DEFAULT_URL = 'http://127.0.0.1:3000';

/** DUNWALL_URL (default http://127.0.0.1:3000), trailing slashes tolerated. */
export function baseUrlFrom(env: Env): string {
  const raw = env.DUNWALL_URL?.trim() || DEFAULT_URL;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigurationError('DUNWALL_URL must be an http:// or https:// URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigurationError('DUNWALL_URL must be an http:// or https:// URL');
  }
  if (url.search !== '' || url.hash !== '')
    throw new ConfigurationError('DUNWALL_URL must not have a query or a fragment');
  return url.toString().replace(/\/+$/, '');
}

/** Visible ASCII only: anything else could not travel in an Authorization header. */
const TOKEN_RE = /^[\x21-\x7e]+$/;

/**
 * DUNWALL_ADMIN_TOKEN, else the `admin-token` file of the embedded data folder
 * (DUNWALL_DATA_DIR, default ./.dunwall). The token itself never appears in a message.
 */
export function adminTokenFrom(env: Env): string {
  const fromEnv = env.DUNWALL_ADMIN_TOKEN?.trim();
  if (fromEnv) {
    if (!TOKEN_RE.test(fromEnv))
      throw new ConfigurationError('DUNWALL_ADMIN_TOKEN holds characters not allowed in an HTTP header');
    return fromEnv;
  }
  const dataDir = resolve(env.DUNWALL_DATA_DIR?.trim() || DEFAULT_DATA_DIR);
  let fromFile: string | null;
  try {
    fromFile = readAdminTokenFile(dataDir);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new ConfigurationError(
      `cannot read ${adminTokenPath(dataDir)} (${typeof code === 'string' ? code : 'unreadable'}); set DUNWALL_ADMIN_TOKEN`,
    );
  }
  if (fromFile === null) {
    throw new ConfigurationError(`no admin token: set DUNWALL_ADMIN_TOKEN (no ${adminTokenPath(dataDir)} file either)`);
  }
  if (!TOKEN_RE.test(fromFile))
    throw new ConfigurationError(`${adminTokenPath(dataDir)} holds characters not allowed in an HTTP header`);
  return fromFile;
}

export function clientFrom(env: Env, fetchImpl: typeof fetch, mode: Mode = 'live'): AdminClient {
  const baseUrl = baseUrlFrom(env);
  return new AdminClient({ baseUrl, token: adminTokenFrom(env), fetch: fetchImpl, mode });
}

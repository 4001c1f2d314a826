import { resolve } from 'node:path';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | null;
  dataDir: string;
  adminToken: string | null;
  logLevel: LogLevel;
  rotationOverlapS: number;
  demo: boolean;
  /** Optional read replica for lookups. */
  databaseReadUrl: string | null;
  /** Entries per lookup cache map (tenants, subscribers); 0 turns the cache off. */
  cacheEntries: number;
  cacheTtlMs: number;
  /** Log every lookup (two lines each); off by default, it is the hot path. */
  logLookups: boolean;
}

export const DEFAULT_PORT = 3000;
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_DATA_DIR = './.dunwall';
export const DEFAULT_ROTATION_OVERLAP_S = 86_400;
export const DEFAULT_CACHE_ENTRIES = 100_000;
export const DEFAULT_CACHE_TTL_MS = 60_000;
/** Shorter admin tokens are guessable; a generated one has 48 random base62 characters. */
export const MIN_ADMIN_TOKEN_LENGTH = 32;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number, problems: string[]): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    problems.push(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
    return fallback;
  }
  return value;
}

function postgresUrl(env: Env, name: string, problems: string[]): string | null {
  const value = env[name]?.trim() || null;
  if (value === null) return null;
  let ok: boolean;
  try {
    ok = ['postgres:', 'postgresql:'].includes(new URL(value).protocol);
  } catch {
    ok = false;
  }
  // Never echo the URL: it may hold a password.
  if (!ok) problems.push(`${name} must be a postgres:// or postgresql:// URL`);
  return value;
}

/** Reads and validates the environment once, at boot: every problem is reported, not just the first. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const port = integer(env, 'PORT', DEFAULT_PORT, 0, 65_535, problems);
  const rotationOverlapS = integer(env, 'DUNWALL_ROTATION_OVERLAP_S', DEFAULT_ROTATION_OVERLAP_S, 0, 31_536_000, problems);

  const host = env.HOST?.trim() || DEFAULT_HOST;

  const databaseUrl = postgresUrl(env, 'DATABASE_URL', problems);
  const databaseReadUrl = postgresUrl(env, 'DATABASE_READ_URL', problems);
  if (databaseReadUrl !== null && databaseUrl === null) problems.push('DATABASE_READ_URL needs DATABASE_URL (the embedded store has no replica)');
  const cacheEntries = integer(env, 'DUNWALL_CACHE_ENTRIES', DEFAULT_CACHE_ENTRIES, 0, 10_000_000, problems);
  const cacheTtlMs = integer(env, 'DUNWALL_CACHE_TTL_MS', DEFAULT_CACHE_TTL_MS, 1, 86_400_000, problems);
  const logLookupsRaw = env.DUNWALL_LOG_LOOKUPS?.trim() ?? '0';
  if (!['0', '1', ''].includes(logLookupsRaw)) problems.push(`DUNWALL_LOG_LOOKUPS must be 0 or 1 (got ${JSON.stringify(env.DUNWALL_LOG_LOOKUPS)})`);

  const adminToken = env.DUNWALL_ADMIN_TOKEN?.trim() || null;
  if (adminToken !== null && adminToken.length < MIN_ADMIN_TOKEN_LENGTH) {
    problems.push(`DUNWALL_ADMIN_TOKEN must be at least ${MIN_ADMIN_TOKEN_LENGTH} characters long`);
  }

  const logLevel = (env.LOG_LEVEL?.trim() || 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(env.LOG_LEVEL)})`);

  const demoRaw = env.DUNWALL_DEMO?.trim() ?? '1';
  if (!['0', '1', ''].includes(demoRaw)) problems.push(`DUNWALL_DEMO must be 0 or 1 (got ${JSON.stringify(env.DUNWALL_DEMO)})`);

  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    port,
    host,
    databaseUrl,
    dataDir: resolve(env.DUNWALL_DATA_DIR?.trim() || DEFAULT_DATA_DIR),
    adminToken,
    logLevel,
    rotationOverlapS,
    demo: demoRaw !== '0',
    databaseReadUrl,
    cacheEntries,
    cacheTtlMs,
    logLookups: logLookupsRaw === '1',
  });
}

/**
 * The store's one entry: nothing outside src/store/ imports any other of its files
 * (scripts/check-imports.mjs). The store is a composition of roles (store.ts), each a
 * folder that owns its interface, its records and its SQL, the same on PostgreSQL and PGlite.
 */
export { openDb, openReadStore, openStore } from './open.js';
export type { StoreOptions, StoreTarget } from './open.js';
export { storeOver } from './store.js';
export type { Store } from './store.js';

// The roles: their interfaces and records.
export type * from './tenants/types.js';
export type * from './keys/types.js';
export type * from './stripe-keys/types.js';
export type { NewSecretKey, SecretKeyRecord, SecretKeyStore } from './keys/secret-keys.js';
export { MAX_SECRET_KEYS_PER_TENANT } from './keys/secret-keys.js';
export type * from './subscribers/types.js';
export type * from './stripe/types.js';
export type * from './changes/types.js';
export { forgetForeignLookupChanges, parseSubscriberRows, positionCovers } from './changes/lookup-changes.js';
export type * from './feed/types.js';
export type * from './downstream/types.js';
export { UNREADABLE_SECRET_RETRY_MS } from './downstream/queue.js';
export type { ConsoleSessionRecord, ConsoleSessionStore, NewConsoleSession } from './sessions/console-sessions.js';
export type {
  Analytics,
  AnalyticsGranularity,
  AnalyticsQuery,
  Cohort,
  CurrencyAmount,
  PolicyImpact,
  RecoveredPeriod,
  RecoveryAnalytics,
} from './analytics/analytics.js';
export type * from './links/types.js';
export type * from './maintenance/types.js';
export { reencryptSecrets, secretCensus } from './maintenance/secrets-at-rest.js';
export type { ReencryptCounts, SecretCensus } from './maintenance/secrets-at-rest.js';

// The plumbing its callers see: the database, the bounds of a request's store calls, the errors, the migrations.
export type { Db, ListenHandlers, Queryable } from './db/db.js';
export {
  DEFAULT_STORE_REQUEST_TIMEOUT_MS,
  StoreBound,
  StoreTimeoutError,
  outsideRequestBounds,
  storeCallEnd,
  withStoreBound,
  holdStoreBound,
} from './db/deadline.js';
export type { StoreBoundMode } from './db/deadline.js';
export { CursorNotIssuedError, StoreUnavailableError, isStoreUnavailable, readingCursor } from './db/errors.js';
export { loadMigrations, migrate, migrationsDir } from './db/migrate.js';
export type { Migration } from './db/migrate.js';
export { DEFAULT_DB_CONNECT_TIMEOUT_MS, DEFAULT_DB_QUERY_TIMEOUT_MS } from './db/postgres.js';

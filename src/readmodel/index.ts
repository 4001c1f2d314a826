/**
 * The read model: what the lookup reads, held complete in each process and kept true by the
 * store's change log. The lookup asks it, never the database.
 */
export { ReadModel, DEFAULT_STALE_IF_ERROR_MS, CHANGE_LOG_RETENTION_MS, WRITE_WAIT_MS } from './read-model.js';
export { observeReadModel } from './metrics.js';
export type { ChangedTenants, ReadModelLog, ReadModelOptions, ReadModelStats, Siblings } from './read-model.js';

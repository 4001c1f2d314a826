/** The one seam between the SQL store and an engine: PostgreSQL through `pg`, or PGlite. */
export interface Queryable {
  /** One statement, `$n` parameters, rows as plain objects. */
  query<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** Several statements, no parameters (migrations). */
  exec(sql: string): Promise<void>;
  /**
   * The rows of `select` in COPY's text format (tab-separated, one row a line), handed
   * over in chunks of whole rows as they arrive: no object per row. On PostgreSQL a
   * stream, bounded by progress rather than duration (it fails when no data came for the
   * query timeout); on PGlite one buffer.
   */
  copyRows(select: string, onRows: (rows: Buffer) => void): Promise<void>;
}

export interface ListenHandlers {
  onNotify(payload: string): void;
  /** Listening (again): notifications flow from now on. */
  onReady(): void;
  /** The listener is gone: notifications may have been missed until the next onReady. */
  onLost(): void;
}

export interface Db extends Queryable {
  readonly engine: 'postgres' | 'embedded';
  /** Runs `fn` in one transaction on one connection: committed when it resolves, rolled back when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Delivers the channel's notifications until the returned function is called. */
  listen(channel: string, handlers: ListenHandlers): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/**
 * Takes, for the rest of the transaction, the lock one instance of this deployment holds
 * while it prunes (false when another instance holds it). Keyed by the schema too, so that
 * deployments sharing a database, each in its own schema, never skip each other's work.
 */
export async function tryDeploymentLock(tx: Queryable, key: number): Promise<boolean> {
  const [lock] = await tx.query<{ ok: boolean }>(
    'SELECT pg_try_advisory_xact_lock(($1::bigint << 32) | (hashtext(current_schema())::bigint & 4294967295)) AS ok',
    [key],
  );
  return lock?.ok === true;
}

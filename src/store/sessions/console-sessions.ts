import type { Db, Queryable } from '../db/db.js';

/**
 * Console sessions (migration 017): found by the digest of the id the browser holds, never
 * by the id itself. An operator's session has no tenant; a tenant's names the secret key it
 * was opened with, and is deleted with it.
 */
export interface ConsoleSessionRecord {
  /** Null: the operator's. */
  tenantId: number | null;
  secretKeyId: string | null;
  createdAt: Date;
  expiresAt: Date;
}

export interface NewConsoleSession extends ConsoleSessionRecord {
  /** SHA-256 of the session id (32 bytes). */
  digest: Buffer;
}

/** What the console's sign-in and its requests take of the store. */
export interface ConsoleSessionStore {
  /** Keeps the session, and forgets the sessions that have ended by its creation. */
  createConsoleSession(session: NewConsoleSession): Promise<void>;
  /** The session of this digest, unless it has ended by `now`. */
  findConsoleSession(digest: Buffer, now: Date): Promise<ConsoleSessionRecord | null>;
  /** Signing out: the session ends at once. False: there was none. */
  deleteConsoleSession(digest: Buffer): Promise<boolean>;
}

interface SessionRow {
  tenant_id: number | null;
  secret_key_id: string | null;
  created_at: Date;
  expires_at: Date;
}

/** Ended sessions are forgotten a batch at a time, at each sign-in: the table holds the live ones and few more. */
const PRUNE_BATCH = 100;

export async function createConsoleSession(db: Queryable, s: NewConsoleSession): Promise<void> {
  await db.query(
    `DELETE FROM console_sessions WHERE digest IN (SELECT digest FROM console_sessions WHERE expires_at <= $1 ORDER BY expires_at LIMIT ${PRUNE_BATCH})`,
    [s.createdAt],
  );
  await db.query(
    'INSERT INTO console_sessions (digest, tenant_id, secret_key_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5)',
    [s.digest, s.tenantId, s.secretKeyId, s.createdAt, s.expiresAt],
  );
}

export async function findConsoleSession(
  db: Queryable,
  digest: Buffer,
  now: Date,
): Promise<ConsoleSessionRecord | null> {
  const [row] = await db.query<SessionRow>(
    'SELECT tenant_id, secret_key_id, created_at, expires_at FROM console_sessions WHERE digest = $1 AND expires_at > $2',
    [digest, now],
  );
  if (row === undefined) return null;
  return {
    tenantId: row.tenant_id,
    secretKeyId: row.secret_key_id,
    createdAt: new Date(row.created_at),
    expiresAt: new Date(row.expires_at),
  };
}

export async function deleteConsoleSession(db: Queryable, digest: Buffer): Promise<boolean> {
  const gone = await db.query<{ digest: Buffer }>('DELETE FROM console_sessions WHERE digest = $1 RETURNING digest', [
    digest,
  ]);
  return gone.length > 0;
}

/** Console sessions in SQL. */
export class SqlSessions implements ConsoleSessionStore {
  constructor(private readonly db: Db) {}

  createConsoleSession(session: NewConsoleSession): Promise<void> {
    return createConsoleSession(this.db, session);
  }

  findConsoleSession(digest: Buffer, now: Date): Promise<ConsoleSessionRecord | null> {
    return findConsoleSession(this.db, digest, now);
  }

  deleteConsoleSession(digest: Buffer): Promise<boolean> {
    return deleteConsoleSession(this.db, digest);
  }
}

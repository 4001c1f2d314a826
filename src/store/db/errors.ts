import { StoreTimeoutError } from './deadline.js';

const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
]);

/**
 * A read not even tried: the store was found unreachable moments ago, and a request that
 * waited on it again (up to the connect timeout) would only pile up behind the others.
 */
export class StoreUnavailableError extends Error {
  readonly code = 'STORE_UNAVAILABLE';

  constructor() {
    super('store unavailable: not tried again yet');
    this.name = 'StoreUnavailableError';
  }
}

/**
 * A cursor that is well formed but was never handed out by this service: it names a position
 * ahead of anything this database has reached (or one PostgreSQL refuses to read). Answered
 * 400 `invalid_cursor`, never a 5xx.
 */
export class CursorNotIssuedError extends Error {
  readonly code = 'CURSOR_NOT_ISSUED';

  constructor() {
    super('the cursor names a position this database has not reached');
    this.name = 'CursorNotIssuedError';
  }
}

/** SQLSTATE 22P02: PostgreSQL refused a value's text (a snapshot it cannot read). */
const INVALID_TEXT_REPRESENTATION = '22P02';

/** Runs a read that takes a cursor's snapshot: PostgreSQL refusing the snapshot is the cursor's fault. */
export async function readingCursor<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if ((err as { code?: unknown } | null)?.code === INVALID_TEXT_REPRESENTATION) throw new CursorNotIssuedError();
    throw err;
  }
}

/**
 * True for failures of the store itself (unreachable, shutting down, connection lost, or
 * slower than the request's bound):
 * those answer 503, never a 500, and never with the driver's text.
 */
export function isStoreUnavailable(err: unknown): boolean {
  if (err instanceof StoreUnavailableError || err instanceof StoreTimeoutError) return true;
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    if (CONNECTION_ERROR_CODES.has(code)) return true;
    // SQLSTATE class 08 (connection exception), 57P0x (admin/crash shutdown), 53300 (too many connections).
    if (/^08...$/.test(code) || /^57P0[1-3]$/.test(code) || code === '53300' || code === '57014') return true;
  }
  return (
    typeof message === 'string' &&
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|PGlite is closed/i.test(
      message,
    )
  );
}

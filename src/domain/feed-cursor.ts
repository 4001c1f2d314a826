import { CUSTOMER_ID_RE } from './types.js';

/**
 * The cursors of the status feed (docs/feed.md): opaque base64url strings to the tenant,
 * positions in the database's own terms inside. Pure: no IO.
 *
 * A position is a snapshot as PostgreSQL writes one (`pg_snapshot` text, `xmin:xmax:xip,...`):
 * the transactions it saw. The feed hands out what the position had not seen, so a writer
 * that commits late is read late, never skipped (migration 014).
 *
 * - A feed cursor `{since}`: everything `since` had not seen comes next.
 * - A feed cursor `{since, within: {upto, afterSeq}}`: a page ended inside the set of
 *   changes `since` had not seen and `upto` had; the rest of that set (by `seq`) comes next,
 *   then what `upto` had not seen.
 * - A list cursor `{feed, after}`: the list's next page, after that customer id; `feed` is
 *   the position of the list's first page, where the feed continues.
 *
 * A cursor never names a tenant: the tenant is always the request's.
 *
 * Bytes: a tag, then unsigned LEB128 numbers. A snapshot is xmin, xmax - xmin, the count of
 * in-progress ids, then each as its distance from the one before (the first from xmin,
 * the others minus one: they are strictly ascending). Parsing is strict: canonical base64url
 * and numbers, nothing left over, every id where PostgreSQL would accept it.
 */

/** Longest cursor accepted (characters). Two snapshots of a thousand in-progress transactions each fit. */
export const MAX_CURSOR_LENGTH = 8192;

/** A `pg_snapshot` in its text form. */
export type SnapshotText = string;

export interface FeedCursor {
  since: SnapshotText;
  /** Set when a page ended inside the set between `since` and `upto`. */
  within: { upto: SnapshotText; afterSeq: string } | null;
}

export interface ListCursor {
  /** Where the feed continues once the list is read: the first page's snapshot. */
  feed: SnapshotText;
  /** The last customer id of the previous page. */
  after: string;
}

const TAG_FEED = 1;
const TAG_FEED_WITHIN = 2;
const TAG_LIST = 3;
/** Transaction ids and sequence values stay below 2^63 (PostgreSQL's bigint). */
const MAX_VALUE = (1n << 63n) - 1n;
const SNAPSHOT_RE = /^([0-9]{1,19}):([0-9]{1,19}):([0-9]{1,19}(?:,[0-9]{1,19})*)?$/;
const SEQ_RE = /^(?:0|[1-9][0-9]{0,18})$/;
const BASE64URL_RE = /^[A-Za-z0-9_-]+$/;

interface Snapshot {
  xmin: bigint;
  xmax: bigint;
  xip: bigint[];
}

/** A snapshot's text as PostgreSQL would accept it (xmin >= 1, xmin <= xmax, ids ascending in [xmin, xmax)); null otherwise. */
function parseSnapshot(text: string): Snapshot | null {
  const m = SNAPSHOT_RE.exec(text);
  if (m === null) return null;
  const xmin = BigInt(m[1] ?? '');
  const xmax = BigInt(m[2] ?? '');
  const xip = m[3] === undefined ? [] : m[3].split(',').map(BigInt);
  return validSnapshot({ xmin, xmax, xip }) ? { xmin, xmax, xip } : null;
}

function validSnapshot({ xmin, xmax, xip }: Snapshot): boolean {
  if (xmin < 1n || xmax < xmin || xmax > MAX_VALUE) return false;
  let last = xmin - 1n;
  for (const id of xip) {
    if (id <= last || id >= xmax) return false;
    last = id;
  }
  return true;
}

function snapshotText({ xmin, xmax, xip }: Snapshot): SnapshotText {
  return `${xmin}:${xmax}:${xip.join(',')}`;
}

/**
 * True when snapshot `text` has seen transactions `current` has not begun: a position ahead
 * of the database (a cursor it never handed out). Both are snapshots as parsed here.
 */
export function snapshotAhead(text: SnapshotText, current: SnapshotText): boolean {
  const xmax = (t: SnapshotText) => BigInt(t.split(':')[1] ?? '0');
  return xmax(text) > xmax(current);
}

/** A snapshot that sees less: only what committed before its xmin. What it had not seen is a superset. */
function coarser(text: SnapshotText): SnapshotText {
  const xmin = text.slice(0, text.indexOf(':'));
  return `${xmin}:${xmin}:`;
}

class Writer {
  private readonly bytes: number[] = [];

  byte(b: number): void {
    this.bytes.push(b);
  }

  uint(value: bigint): void {
    let v = value;
    for (;;) {
      const low = Number(v & 0x7fn);
      v >>= 7n;
      if (v === 0n) {
        this.bytes.push(low);
        return;
      }
      this.bytes.push(low | 0x80);
    }
  }

  snapshot(text: SnapshotText): void {
    const s = parseSnapshot(text);
    if (s === null) throw new Error('not a snapshot');
    this.uint(s.xmin);
    this.uint(s.xmax - s.xmin);
    this.uint(BigInt(s.xip.length));
    let previous = s.xmin;
    s.xip.forEach((id, i) => {
      this.uint(i === 0 ? id - s.xmin : id - previous - 1n);
      previous = id;
    });
  }

  ascii(text: string): void {
    for (let i = 0; i < text.length; i += 1) this.bytes.push(text.charCodeAt(i));
  }

  toString(): string {
    return Buffer.from(this.bytes).toString('base64url');
  }
}

class Reader {
  private at = 0;

  constructor(private readonly bytes: Buffer) {}

  get done(): boolean {
    return this.at >= this.bytes.length;
  }

  byte(): number | null {
    const b = this.bytes[this.at];
    if (b === undefined) return null;
    this.at += 1;
    return b;
  }

  /** A canonical LEB128 number below 2^63 (no padding byte: the last byte is not 0 unless it is the only one). */
  uint(): bigint | null {
    let value = 0n;
    for (let shift = 0n; shift < 63n; shift += 7n) {
      const b = this.byte();
      if (b === null) return null;
      value |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return b === 0 && shift > 0n ? null : value <= MAX_VALUE ? value : null;
    }
    return null;
  }

  snapshot(): SnapshotText | null {
    const xmin = this.uint();
    const span = this.uint();
    const count = this.uint();
    if (xmin === null || span === null || count === null || count > span) return null;
    const xip: bigint[] = [];
    let previous = xmin;
    for (let i = 0n; i < count; i += 1n) {
      const delta = this.uint();
      if (delta === null) return null;
      previous = i === 0n ? xmin + delta : previous + delta + 1n;
      xip.push(previous);
    }
    const s = { xmin, xmax: xmin + span, xip };
    return validSnapshot(s) ? snapshotText(s) : null;
  }

  rest(): string {
    const text = this.bytes.toString('latin1', this.at);
    this.at = this.bytes.length;
    return text;
  }
}

/** The cursor's bytes, when it is canonical base64url of a bounded length; else null. */
function bytesOf(cursor: string): Buffer | null {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !BASE64URL_RE.test(cursor)) return null;
  const bytes = Buffer.from(cursor, 'base64url');
  // Node's decoder forgives stray bits and odd lengths: only the one spelling of these bytes is taken.
  return bytes.toString('base64url') === cursor ? bytes : null;
}

function encodeFeed(c: FeedCursor): string {
  const w = new Writer();
  w.byte(c.within === null ? TAG_FEED : TAG_FEED_WITHIN);
  w.snapshot(c.since);
  if (c.within !== null) {
    w.snapshot(c.within.upto);
    if (!SEQ_RE.test(c.within.afterSeq)) throw new Error('not a sequence value');
    w.uint(BigInt(c.within.afterSeq));
  }
  return w.toString();
}

/**
 * A cursor's string within MAX_CURSOR_LENGTH: should the in-progress list of its snapshot
 * `since` make it longer, `since` is made coarser (it then sees less, so nothing it had not
 * seen is lost; a few changes may come twice, each in its order).
 */
function bounded(since: SnapshotText, encode: (since: SnapshotText) => string): string {
  const text = encode(since);
  if (text.length <= MAX_CURSOR_LENGTH) return text;
  const shorter = encode(coarser(since));
  if (shorter.length > MAX_CURSOR_LENGTH) throw new Error('a feed position too long to hand out');
  return shorter;
}

export function encodeFeedCursor(c: FeedCursor): string {
  return bounded(c.since, (since) => encodeFeed({ ...c, since }));
}

/** The feed cursor a string spells; null when it is not exactly one. */
export function decodeFeedCursor(cursor: string): FeedCursor | null {
  const bytes = bytesOf(cursor);
  if (bytes === null) return null;
  const r = new Reader(bytes);
  const tag = r.byte();
  if (tag !== TAG_FEED && tag !== TAG_FEED_WITHIN) return null;
  const since = r.snapshot();
  if (since === null) return null;
  let within: FeedCursor['within'] = null;
  if (tag === TAG_FEED_WITHIN) {
    const upto = r.snapshot();
    const afterSeq = r.uint();
    if (upto === null || afterSeq === null) return null;
    within = { upto, afterSeq: afterSeq.toString() };
  }
  return r.done ? { since, within } : null;
}

export function encodeListCursor(c: ListCursor): string {
  if (!CUSTOMER_ID_RE.test(c.after)) throw new Error('not a customer id');
  return bounded(c.feed, (feed) => {
    const w = new Writer();
    w.byte(TAG_LIST);
    w.snapshot(feed);
    w.ascii(c.after);
    return w.toString();
  });
}

/** The list cursor a string spells; null when it is not exactly one. */
export function decodeListCursor(cursor: string): ListCursor | null {
  const bytes = bytesOf(cursor);
  if (bytes === null) return null;
  const r = new Reader(bytes);
  if (r.byte() !== TAG_LIST) return null;
  const feed = r.snapshot();
  if (feed === null) return null;
  const after = r.rest();
  return CUSTOMER_ID_RE.test(after) ? { feed, after } : null;
}

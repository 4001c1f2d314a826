import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeFeedCursor,
  decodeListCursor,
  encodeFeedCursor,
  encodeListCursor,
  MAX_CURSOR_LENGTH,
} from '../../src/domain/feed-cursor.js';
import type { FeedCursor } from '../../src/domain/feed-cursor.js';

/** The status feed's cursors: what is handed out reads back as itself; nothing else reads at all. */

/** A snapshot PostgreSQL accepts: xmin >= 1, xmax >= xmin, in-progress ids ascending in [xmin, xmax). */
const snapshot = fc
  .tuple(
    fc.bigInt({ min: 1n, max: (1n << 62n) - 1n }),
    fc.bigInt({ min: 0n, max: 5000n }),
    fc.array(fc.bigInt({ min: 0n, max: 4999n }), { maxLength: 40 }),
  )
  .map(([xmin, span, offsets]) => {
    const xip = [...new Set(offsets.filter((o) => o < span))].sort((a, b) => (a < b ? -1 : 1)).map((o) => xmin + o);
    return `${xmin}:${xmin + span}:${xip.join(',')}`;
  });
const seq = fc.bigInt({ min: 0n, max: (1n << 63n) - 1n }).map(String);
const feedCursor: fc.Arbitrary<FeedCursor> = fc.oneof(
  snapshot.map((since) => ({ since, within: null })),
  fc.tuple(snapshot, snapshot, seq).map(([since, upto, afterSeq]) => ({ since, within: { upto, afterSeq } })),
);
const customerId = fc.stringMatching(/^cus_[A-Za-z0-9_]{1,251}$/);

describe('status feed cursors', () => {
  it('read back as what was encoded, as short base64url', () => {
    fc.assert(
      fc.property(feedCursor, (c) => {
        const text = encodeFeedCursor(c);
        expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
        expect(decodeFeedCursor(text)).toEqual(c);
        // A cursor of one kind is not one of the other.
        expect(decodeListCursor(text)).toBeNull();
      }),
    );
    fc.assert(
      fc.property(snapshot, customerId, (feed, after) => {
        const text = encodeListCursor({ feed, after });
        expect(decodeListCursor(text)).toEqual({ feed, after });
        expect(decodeFeedCursor(text)).toBeNull();
      }),
    );
    expect(encodeFeedCursor({ since: '1000:1003:1001', within: null }).length).toBeLessThan(12);
  });

  it('refuse anything else: other spellings, cut or padded bytes, and snapshots PostgreSQL would not take', () => {
    const good = encodeFeedCursor({ since: '1000:1005:1001,1003', within: { upto: '1004:1010:', afterSeq: '300' } });
    const bytes = Buffer.from(good, 'base64url');
    const spell = (b: Buffer | number[]) => Buffer.from(b).toString('base64url');
    // The same bytes spelled with a stray bit in the last character's unused bits.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    expect(good.length % 4).not.toBe(0);
    const stray = `${good.slice(0, -1)}${alphabet[alphabet.indexOf(good.at(-1) ?? 'A') ^ 1] ?? ''}`;
    expect(Buffer.from(stray, 'base64url')).toEqual(bytes);
    const refused = [
      '',
      'x'.repeat(MAX_CURSOR_LENGTH + 1),
      `${good}=`,
      `${good}!`,
      stray,
      spell(bytes.subarray(0, bytes.length - 1)),
      spell(Buffer.concat([bytes, Buffer.from([0])])),
      spell([9, ...bytes.subarray(1)]),
      // 1000 written with a padding byte (0xe8 0x87 0x00): not the one spelling of 1000.
      spell([1, 0xe8, 0x87, 0x00, 0, 0]),
      // xmin 0; xmax below xmin; an in-progress id at xmax; more ids than the span holds.
      spell([1, 0, 0, 0]),
      spell([1, 5, 0, 1, 0]),
      spell([1, 5, 2, 1, 2]),
      spell([1, 5, 2, 3, 0, 0, 0]),
      // A number of 64 bits.
      spell([1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0]),
    ];
    for (const text of refused) expect(decodeFeedCursor(text), text).toBeNull();
    // A list cursor's customer id must be one.
    const list = Buffer.from(encodeListCursor({ feed: '5:5:', after: 'cus_1' }), 'base64url');
    expect(decodeListCursor(spell(Buffer.concat([list, Buffer.from('é', 'latin1')])))).toBeNull();
    expect(decodeListCursor(spell(list.subarray(0, list.length - 5)))).toBeNull();
    expect(decodeFeedCursor(good)).not.toBeNull();
  });

  it('hand out a position too long for the bound with a coarser since, which loses nothing', () => {
    const xip = Array.from({ length: 7000 }, (_, i) => 1000 + 2 * i);
    const since = `1000:${1000 + 2 * 7000}:${xip.join(',')}`;
    const text = encodeFeedCursor({ since, within: { upto: '9000:9001:', afterSeq: '3' } });
    expect(text.length).toBeLessThanOrEqual(MAX_CURSOR_LENGTH);
    // Everything from its xmin on counts as unseen: a superset of what `since` had not seen.
    expect(decodeFeedCursor(text)).toEqual({ since: '1000:1000:', within: { upto: '9000:9001:', afterSeq: '3' } });
    expect(decodeListCursor(encodeListCursor({ feed: since, after: 'cus_9' }))).toEqual({
      feed: '1000:1000:',
      after: 'cus_9',
    });
  });
});

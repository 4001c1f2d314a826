import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { SubscriberStatus } from '../../src/domain/types.js';
import { SubscriberIndex, fingerprint, fingerprintBytes } from '../../src/readmodel/subscriber-index.js';
import { parseSubscriberRows } from '../../src/store/index.js';
import { SubscriberExtras } from '../../src/readmodel/subscriber-extras.js';

const STATUSES: SubscriberStatus[] = ['active', 'warning', 'lockout'];

describe('SubscriberIndex', () => {
  it('answers exactly as a map of (tenant, customer) -> status, through sets, deletes and growth', () => {
    const op = fc.record({
      kind: fc.constantFrom('set', 'set', 'delete', 'get'),
      tenant: fc.integer({ min: 1, max: 4 }),
      // A small key space, so that operations meet the same keys again; long ids cross the 16-byte blocks.
      customer: fc.oneof(
        fc.integer({ min: 0, max: 60 }).map((n) => `cus_${n}`),
        fc.stringMatching(/^cus_[A-Za-z0-9_]{10,40}$/),
      ),
      status: fc.constantFrom(...STATUSES),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
        const index = new SubscriberIndex();
        const model = new Map<string, SubscriberStatus>();
        for (const o of ops) {
          const key = `${o.tenant}/${o.customer}`;
          if (o.kind === 'set') {
            index.set(o.tenant, o.customer, o.status);
            model.set(key, o.status);
          } else if (o.kind === 'delete') {
            expect(index.delete(o.tenant, o.customer)).toBe(model.delete(key));
          }
          expect(index.get(o.tenant, o.customer)).toBe(model.get(key) ?? null);
          expect(index.size).toBe(model.size);
        }
        for (const [key, status] of model) {
          const [tenant, customer] = key.split('/') as [string, string];
          expect(index.get(Number(tenant), customer)).toBe(status);
        }
      }),
      { numRuns: 200, seed: 20261123 },
    );
  });

  it('keeps tenants apart: one customer id in two tenants is two subscribers', () => {
    const index = new SubscriberIndex();
    index.set(1, 'cus_same', 'lockout');
    expect(index.get(2, 'cus_same')).toBeNull();
    index.set(2, 'cus_same', 'active');
    expect(index.get(1, 'cus_same')).toBe('lockout');
    expect(index.get(2, 'cus_same')).toBe('active');
  });

  it('never answers known for an id that is not ASCII, nor stores one', () => {
    const index = new SubscriberIndex();
    index.set(1, 'cus_a', 'lockout');
    // U+0161 has 0x61 ('a') as its low byte: hashed by low bytes it would be cus_a.
    expect(index.get(1, 'cus_\u0161')).toBeNull();
    expect(index.set(1, 'cus_\u0161', 'warning')).toBe(false);
    expect(index.size).toBe(1);
    expect(index.delete(1, 'cus_\u0161')).toBe(false);
    expect(index.get(1, 'cus_a')).toBe('lockout');
  });

  it('gives 200,000 distinct keys 200,000 distinct fingerprints, spread over the slots', () => {
    const seen = new Set<string>();
    const out = new Uint32Array(4);
    const buckets = new Uint32Array(1024);
    for (let t = 1; t <= 4; t += 1) {
      for (let i = 0; i < 50_000; i += 1) {
        fingerprint(t, `cus_b${t}_${i}`, out);
        seen.add(`${out[0]},${out[1]},${out[2]},${out[3]}`);
        buckets[(out[0] ?? 0) & 1023] = (buckets[(out[0] ?? 0) & 1023] ?? 0) + 1;
      }
    }
    expect(seen.size).toBe(200_000);
    // About 195 a bucket when spread evenly; a bad mix would pile keys up.
    expect(Math.max(...buckets)).toBeLessThan(300);
    expect(Math.min(...buckets)).toBeGreaterThan(100);
  });

  it('holds a million subscribers in under 48 bytes each', () => {
    const index = new SubscriberIndex();
    for (let i = 0; i < 1_000_000; i += 1) index.set(1 + (i % 1000), `cus_b${i}`, STATUSES[i % 3] ?? 'active');
    expect(index.size).toBe(1_000_000);
    expect(index.byteLength / index.size).toBeLessThan(48);
    expect(index.get(1, 'cus_b0')).toBe('active');
    expect(index.get(1 + (999_999 % 1000), 'cus_b999999')).toBe(STATUSES[999_999 % 3]);
    expect(index.get(1, 'cus_b1')).toBeNull();
  });
});

describe('a streamed load', () => {
  it('stores ids given as bytes exactly as ids given as strings, and parses COPY text rows', () => {
    const rows = Buffer.from(
      '7\tcus_a\tactive\n7\tcus_b\twarning\n8\tcus_a\tlockout\n9\tcus_\u00e9\tlockout\n10\tcus_long_id_of_more_than_sixteen_bytes\twarning\n',
    );
    const index = new SubscriberIndex();
    parseSubscriberRows(rows, {
      subscriber: (tenantId, bytes, start, end, status) => index.setBytes(tenantId, bytes, start, end, status),
    });
    expect([index.get(7, 'cus_a'), index.get(7, 'cus_b'), index.get(8, 'cus_a'), index.get(8, 'cus_b')]).toEqual([
      'active',
      'warning',
      'lockout',
      null,
    ]);
    expect(index.get(10, 'cus_long_id_of_more_than_sixteen_bytes')).toBe('warning');
    // Not ASCII: never stored, whatever its bytes.
    expect(index.get(9, 'cus_\u00e9')).toBeNull();
    expect(index.size).toBe(4);
    const out = [new Uint32Array(4), new Uint32Array(4)] as const;
    for (const id of ['cus_1', `cus_${'x'.repeat(251)}`, 'cus_0123456789abcdef']) {
      const bytes = Buffer.from(`..${id}..`);
      expect(fingerprint(3, id, out[0])).toBe(true);
      expect(fingerprintBytes(3, bytes, 2, 2 + id.length, out[1])).toBe(true);
      expect([...out[1]]).toEqual([...out[0]]);
    }
  });
});

describe('the extras beside the index', () => {
  it('keeps, replaces and forgets a pay link and a lockout per subscriber, through growth and deletions', () => {
    const extras = new SubscriberExtras();
    for (let i = 0; i < 5_000; i += 1)
      extras.set(1 + (i % 7), `cus_x${i}`, {
        lockoutAtS: i % 2 === 0 ? 1_800_000_000 + i : null,
        payUrl: i % 3 === 0 ? null : `https://invoice.stripe.com/i/acct_1/test_${i}`,
      });
    // One with neither a lockout nor a link (odd multiples of 3) carries nothing: not kept.
    expect(extras.size).toBe(5_000 - 833);
    expect({ ...extras.get(1 + (10 % 7), 'cus_x10') }).toEqual({
      lockoutAtS: 1_800_000_010,
      payUrl: 'https://invoice.stripe.com/i/acct_1/test_10',
      cardUrl: null,
    });
    expect(extras.get(1 + (9 % 7), 'cus_x9')).toBeNull();
    expect({ ...extras.get(1 + (7 % 7), 'cus_x7') }).toEqual({
      lockoutAtS: 0,
      payUrl: 'https://invoice.stripe.com/i/acct_1/test_7',
      cardUrl: null,
    });
    // Another tenant's same id is another subscriber.
    expect(extras.get(1 + (11 % 7), 'cus_x10')).toBeNull();
    // Cleared (null, or nothing left to carry) is forgotten; set again, found again.
    for (let i = 0; i < 5_000; i += 2)
      extras.set(1 + (i % 7), `cus_x${i}`, i % 4 === 0 ? null : { lockoutAtS: null, payUrl: null });
    expect(extras.size).toBe(5_000 - 833 - 2_500);
    expect(extras.get(1 + (10 % 7), 'cus_x10')).toBeNull();
    extras.set(1 + (10 % 7), 'cus_x10', { lockoutAtS: 5, payUrl: null });
    expect({ ...extras.get(1 + (10 % 7), 'cus_x10') }).toEqual({ lockoutAtS: 5, payUrl: null, cardUrl: null });
    for (let i = 5_000; i < 20_000; i += 1) extras.set(1, `cus_x${i}`, { lockoutAtS: 7, payUrl: null });
    expect(extras.size).toBe(5_000 - 833 - 2_500 + 1 + 15_000);
    expect({ ...extras.get(1 + (13 % 7), 'cus_x13') }).toMatchObject({
      payUrl: 'https://invoice.stripe.com/i/acct_1/test_13',
    });
  });
});

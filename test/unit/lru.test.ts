import { describe, expect, it } from 'vitest';
import { Lru } from '../../src/http/lru.js';

const FOREVER = Number.MAX_SAFE_INTEGER;

describe('Lru (second chance)', () => {
  it('keeps at most its size, evicting an entry not read since it was added first', () => {
    const lru = new Lru<string, number>(3);
    lru.set('a', 1, FOREVER);
    lru.set('b', 2, FOREVER);
    lru.set('c', 3, FOREVER);
    expect(lru.get('a', 0)).toBe(1);
    lru.set('d', 4, FOREVER);
    expect(lru.size).toBe(3);
    // b was the oldest not read: it goes; a, read, stays.
    expect(lru.peek('b')).toBeUndefined();
    expect(lru.get('a', 0)).toBe(1);
    expect(lru.get('c', 0)).toBe(3);
    expect(lru.get('d', 0)).toBe(4);
  });

  it('keeps a key read over and over through any number of insertions of others', () => {
    const lru = new Lru<string, number>(100);
    lru.set('hot', 0, FOREVER);
    for (let i = 0; i < 10_000; i += 1) {
      expect(lru.get('hot', 0)).toBe(0);
      lru.set(`cold${i}`, i, FOREVER);
    }
    expect(lru.size).toBe(100);
    expect(lru.get('hot', 0)).toBe(0);
  });

  it('evicts even when every entry was read: a bounded number of second chances', () => {
    const lru = new Lru<string, number>(20);
    for (let i = 0; i < 20; i += 1) lru.set(`k${i}`, i, FOREVER);
    for (let i = 0; i < 20; i += 1) lru.get(`k${i}`, 0);
    lru.set('new', 20, FOREVER);
    expect(lru.size).toBe(20);
    expect(lru.get('new', 0)).toBe(20);
    // The first eight read entries got their second chance; the ninth went.
    expect(lru.peek('k8')).toBeUndefined();
    expect(lru.peek('k0')).toBeDefined();
  });

  it('replaces a value in place, and an expired entry is no hit but still peeked', () => {
    const lru = new Lru<string, number>(2);
    lru.set('a', 1, 1_000);
    lru.set('a', 2, 2_000);
    expect(lru.size).toBe(1);
    expect(lru.get('a', 1_500)).toBe(2);
    expect(lru.get('a', 2_000)).toBeUndefined();
    expect(lru.peek('a')).toEqual(expect.objectContaining({ value: 2, expiresAtMs: 2_000 }));
    lru.delete('a');
    expect(lru.peek('a')).toBeUndefined();
  });

  it('keeps nothing when its size is 0', () => {
    const lru = new Lru<string, number>(0);
    lru.set('a', 1, FOREVER);
    expect(lru.size).toBe(0);
  });
});

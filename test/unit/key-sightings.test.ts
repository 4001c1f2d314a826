import { describe, expect, it } from 'vitest';
import { BROWSER_SIGHTING_INTERVAL_MS, SecretKeySightings } from '../../src/http/key-usage.js';

/**
 * Secret keys seen from a browser, on a clock the test moves: every refusal counted, one log
 * line and one write per key per interval however many come, each key on its own, and a
 * write that fails said in the log without failing anything else.
 */
function recorder(fail = false) {
  const lines: { obj: Record<string, unknown>; msg: string }[] = [];
  const writes: [string, number][] = [];
  const sightings = new SecretKeySightings({
    log: { warn: (obj, msg) => lines.push({ obj: obj as Record<string, unknown>, msg }) },
    write: async (seen) => {
      if (fail) throw new Error('store down');
      for (const [id, at] of seen) writes.push([id, at.getTime()]);
    },
  });
  return { sightings, lines, writes };
}

const sighting = (keyId: string, origin = 'https://shop.example') => ({
  tenant: 'acme',
  keyId,
  prefix: 'sk_test_AbCd',
  origin,
});

describe('SecretKeySightings', () => {
  it('logs and writes once per key per interval, and counts every refusal', async () => {
    const { sightings, lines, writes } = recorder();
    const t0 = 1_800_000_000_000;
    for (let i = 0; i < 1000; i += 1) sightings.seen(sighting('key_a'), t0 + i);
    sightings.seen(sighting('key_b'), t0 + 5);
    await sightings.settled();
    expect(sightings.refused).toBe(1001);
    expect(lines.map((l) => l.obj.keyId)).toEqual(['key_a', 'key_b']);
    expect(writes).toEqual([
      ['key_a', t0],
      ['key_b', t0 + 5],
    ]);
    // Within the interval: counted only. Once it has passed: logged and written again.
    sightings.seen(sighting('key_a'), t0 + BROWSER_SIGHTING_INTERVAL_MS - 1);
    sightings.seen(sighting('key_a'), t0 + BROWSER_SIGHTING_INTERVAL_MS);
    await sightings.settled();
    expect(lines).toHaveLength(3);
    expect(writes.at(-1)).toEqual(['key_a', t0 + BROWSER_SIGHTING_INTERVAL_MS]);
    expect(sightings.refused).toBe(1003);
  });

  it('logs what the sender wrote as Origin no longer than 200 characters', () => {
    const { sightings, lines } = recorder();
    sightings.seen(sighting('key_a', `https://${'a'.repeat(5000)}.example`), 0);
    expect(String(lines[0]?.obj.origin)).toHaveLength(200);
  });

  it('says so when the mark cannot be written', async () => {
    const { sightings, lines } = recorder(true);
    sightings.seen(sighting('key_a'), 0);
    await sightings.settled();
    expect(lines.map((l) => l.msg)).toEqual([
      'a secret key was sent from a browser and refused: treat it as leaked, rotate it and keep it on servers',
      'secret key seen in a browser: the mark was not written',
    ]);
  });
});

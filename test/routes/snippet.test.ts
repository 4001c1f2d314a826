import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { snippetAsset } from '../../src/http/snippet-asset.js';

const engines = await availableEngines();
const BODY = Buffer.from(`(()=>{${'window.x=1;'.repeat(200)}})();`);

describe.each(engines.slice(0, 1))('GET /snippet.js and /demo ($name)', (engine) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(engine, {
      snippet: snippetAsset(BODY),
      demo: { publishableKey: 'pk_demo', hmacs: { cus_demo_active: 'ab' } },
    });
  });
  afterAll(() => h.close());

  it('serves the file as JavaScript with a long cache, an ETag, and gzip to those who accept it', async () => {
    const plain = await h.app.inject({ method: 'GET', url: '/snippet.js' });
    expect(plain.statusCode).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=86400, stale-while-revalidate=604800');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.rawPayload.equals(BODY)).toBe(true);
    const gz = await h.app.inject({ method: 'GET', url: '/snippet.js', headers: { 'accept-encoding': 'gzip, br' } });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gz.headers.vary).toBe('Accept-Encoding');
    expect(gunzipSync(gz.rawPayload).equals(BODY)).toBe(true);
    expect(gz.headers.etag).not.toBe(plain.headers.etag);
    const again = await h.app.inject({
      method: 'GET',
      url: '/snippet.js',
      headers: { 'if-none-match': String(plain.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    // RFC 9110's weak comparison: W/, a list, and * (any current representation).
    for (const presented of [`W/${String(plain.headers.etag)}`, `"a", W/${String(plain.headers.etag)}`, '*']) {
      expect(
        (await h.app.inject({ method: 'GET', url: '/snippet.js', headers: { 'if-none-match': presented } })).statusCode,
        presented,
      ).toBe(304);
    }
    expect(
      (await h.app.inject({ method: 'GET', url: '/snippet.js', headers: { 'if-none-match': String(gz.headers.etag) } }))
        .statusCode,
    ).toBe(200);
  });

  it('404s for demo pages that do not exist, prototype names included', async () => {
    for (const customer of ['toString', '__proto__', 'constructor', 'cus_nobody']) {
      const res = await h.app.inject({ method: 'GET', url: `/demo/frame?customer=${customer}` });
      expect(res.statusCode).toBe(404);
    }
    // No demo tenant in this store: the page itself is absent too.
    expect((await h.app.inject({ method: 'GET', url: '/demo' })).statusCode).toBe(404);
  });
});

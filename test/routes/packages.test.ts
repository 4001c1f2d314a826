import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPackageTarballs } from '../../src/http/package-tarballs.js';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';

const engines = await availableEngines();
const CLIENT = Buffer.from('\x1f\x8b client tarball bytes');
const NODE = Buffer.from('\x1f\x8b node tarball bytes, a little longer');

describe.each(engines.slice(0, 1))('GET /packages/:file ($name)', (engine) => {
  let dir = '';
  let h: Harness;
  let bare: Harness;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'dunwall-packages-'));
    writeFileSync(join(dir, 'client.tgz'), CLIENT);
    writeFileSync(join(dir, 'react-native.tgz'), NODE);
    // What the build also leaves there, and what must never be served: the compiled sources'
    // folder, another file, a link to a file outside, a name no build writes.
    mkdirSync(join(dir, 'client'));
    writeFileSync(join(dir, 'notes.txt'), 'not a package');
    writeFileSync(join(dir, 'Upper.tgz'), 'not a package');
    writeFileSync(join(dir, 'secret'), 'outside');
    symlinkSync(join(dir, 'secret'), join(dir, 'linked.tgz'));
    const packages = loadPackageTarballs(dir);
    expect([...(packages?.keys() ?? [])].sort()).toEqual(['client.tgz', 'react-native.tgz']);
    h = await harness(engine, { packages });
    bare = await harness(engine);
  });
  afterAll(async () => {
    await h?.close();
    await bare?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves a tarball as its bytes, cacheable for 5 minutes, with the SHA-256 of the bytes as its ETag', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/packages/client.tgz' });
    expect(res.statusCode).toBe(200);
    expect(res.rawPayload.equals(CLIENT)).toBe(true);
    expect(res.headers['content-type']).toBe('application/gzip');
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.headers['content-length']).toBe(String(CLIENT.length));
    expect(res.headers.etag).toBe(`"${createHash('sha256').update(CLIENT).digest('base64url')}"`);
    const other = await h.app.inject({ method: 'GET', url: '/packages/react-native.tgz' });
    expect(other.rawPayload.equals(NODE)).toBe(true);
    expect(other.headers.etag).not.toBe(res.headers.etag);

    const head = await h.app.inject({ method: 'HEAD', url: '/packages/client.tgz' });
    expect(head.statusCode).toBe(200);
    expect(head.rawPayload.length).toBe(0);
    expect([head.headers['content-type'], head.headers['content-length'], head.headers.etag]).toEqual([
      'application/gzip',
      String(CLIENT.length),
      res.headers.etag,
    ]);
  });

  it('answers 304 to the ETag it gave (weak, in a list, or *), and the bytes to another', async () => {
    const etag = String((await h.app.inject({ method: 'GET', url: '/packages/client.tgz' })).headers.etag);
    for (const presented of [etag, `W/${etag}`, `"x", ${etag}`, '*']) {
      const res = await h.app.inject({
        method: 'GET',
        url: '/packages/client.tgz',
        headers: { 'if-none-match': presented },
      });
      expect(res.statusCode, presented).toBe(304);
      expect(res.rawPayload.length).toBe(0);
      expect([res.headers.etag, res.headers['cache-control'], res.headers['content-length']]).toEqual([
        etag,
        'public, max-age=300',
        String(CLIENT.length),
      ]);
    }
    const head = await h.app.inject({
      method: 'HEAD',
      url: '/packages/client.tgz',
      headers: { 'if-none-match': etag },
    });
    expect(head.statusCode).toBe(304);
    const stale = await h.app.inject({
      method: 'GET',
      url: '/packages/client.tgz',
      headers: { 'if-none-match': '"an-older-build"' },
    });
    expect(stale.statusCode).toBe(200);
    expect(stale.rawPayload.equals(CLIENT)).toBe(true);
  });

  it('404s, as a problem, for any name that is not one of the tarballs, however the path is written', async () => {
    const paths = [
      '/packages/../package.json',
      '/packages/..%2Fpackage.json',
      '/packages/%2e%2e%2fpackage.json',
      '/packages/..%2f..%2fpackage.json',
      '/packages/%2e%2e',
      '/packages/client',
      '/packages/CLIENT.tgz',
      '/packages/client.tgz%00',
      '/packages/client.tgz%2f',
      '/packages/client.tgz.',
      '/packages/notes.txt',
      '/packages/Upper.tgz',
      '/packages/linked.tgz',
      '/packages/secret',
      '/packages/nope.tgz',
      '/packages/__proto__',
      '/packages/constructor',
      '/packages/hasOwnProperty',
      '/packages/',
      '/packages',
    ];
    for (const path of paths) {
      const res = await socketRequest(h.app, 'GET', path);
      expect(res.statusCode, path).toBe(404);
      expect(res.headers['content-type'], path).toMatch(/^application\/problem\+json/);
      expect(res.json().code, path).toBe('not_found');
      expect(res.body, path).not.toContain('outside');
    }
    const unknown = (await socketRequest(h.app, 'GET', '/packages/nope.tgz')).json() as { detail: string };
    expect(unknown.detail).toContain('/packages/client.tgz, /packages/react-native.tgz');
  });

  it('404s with a detail that says why when no tarball was built (the service runs from sources)', async () => {
    expect(loadPackageTarballs(join(dir, 'absent'))).toBeNull();
    const res = await socketRequest(bare.app, 'GET', '/packages/client.tgz');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found', detail: expect.stringContaining('npm run build') });
  });
});

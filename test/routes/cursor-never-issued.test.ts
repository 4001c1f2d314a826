import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReadModel } from '../../src/readmodel/index.js';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import { encodeFeedCursor, encodeListCursor } from '../../src/domain/feed-cursor.js';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, adminRequest } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';

/**
 * A cursor that is well formed but was never handed out (its position ahead of anything the
 * database has seen) is refused 400 invalid_cursor, never a 5xx, on the feed and on every
 * list that takes a cursor, on both engines.
 */
const engines = await availableEngines();

describe.each(engines)('Cursors never issued ($name)', (engine) => {
  let app: App;
  let model: ReadModel;
  let cleanup: () => Promise<void>;
  let key = '';
  const errors: string[] = [];

  beforeAll(async () => {
    const opened = await engine.open();
    const clock = new FakeClock();
    model = await ReadModel.open(opened.store.changes, { now: clock.now });
    app = await buildApp({ store: opened.store, model, adminToken: ADMIN_TOKEN, now: clock.now });
    app.addHook('onResponse', async (req, reply) => {
      if (reply.statusCode >= 500) errors.push(`${req.url} ${reply.statusCode}`);
    });
    await app.ready();
    expect((await adminRequest(app, 'POST', '/tenants', { slug: 'cursors', tier: 'scale' })).statusCode).toBe(201);
    const res = await adminRequest(app, 'POST', '/tenants/cursors/keys', {
      name: 'reader',
      scopes: ['status:read', 'subscribers:read', 'webhooks:write'],
    });
    expect(res.statusCode, res.body).toBe(201);
    key = (res.json() as { secret_key: string }).secret_key;
    await model.catchUp();
    cleanup = async () => {
      await app.close();
      await model.close();
      await opened.cleanup();
    };
  });
  afterAll(() => cleanup());

  const get = (path: string, headers: Record<string, string> = {}) =>
    socketRequest(app, 'GET', path, { authorization: `Bearer ${key}`, ...headers });
  // Far ahead of any transaction this database has run: 2^33, and just below PostgreSQL's bound.
  const far = ['8589934592:8589934592:', '9223372036854775000:9223372036854775000:'];
  const feedCursors = [
    'AYCAgICAIAAA',
    ...far.map((since) => encodeFeedCursor({ since, within: null })),
    encodeFeedCursor({ since: '3:3:', within: { upto: far[0] as string, afterSeq: '5' } }),
  ];
  const listCursors = far.map((feed) => encodeListCursor({ feed, after: 'cus_a' }));

  it.each(feedCursors)('the feed refuses %s with 400 invalid_cursor', async (cursor) => {
    for (const path of [`/v1/status-changes?after=${cursor}`, `/v1/status-changes?after=${cursor}&wait=0`]) {
      const res = await get(path);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_cursor' });
    }
    // The event stream refuses it before it begins.
    const stream = await get(`/v1/status-changes?after=${cursor}`, { accept: 'text/event-stream' });
    expect(stream.statusCode, stream.body).toBe(400);
    expect(stream.json()).toMatchObject({ code: 'invalid_cursor' });
  });

  it.each(listCursors)('the status list refuses %s with 400 invalid_cursor', async (cursor) => {
    const res = await get(`/v1/statuses?cursor=${cursor}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_cursor' });
  });

  it('the other lists refuse a cursor they never handed out with 400 invalid_cursor', async () => {
    for (const path of [
      '/v1/subscribers?cursor=AYCAgICAIAAA',
      '/v1/subscribers?status=lockout&cursor=AYCAgICAIAAA',
      '/v1/webhook-endpoints?cursor=AYCAgICAIAAA',
    ]) {
      const res = await get(path);
      expect(res.statusCode, `${path} ${res.body}`).toBeLessThan(500);
      if (res.statusCode === 400)
        expect(res.json()).toMatchObject({ code: expect.stringMatching(/invalid_cursor|invalid_request/) });
    }
    expect(errors).toEqual([]);
  });
});

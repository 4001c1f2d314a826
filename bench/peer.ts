/**
 * The peer: the same lookup done the ordinary way. A node:http server, and for every request
 * one SQL query joining tenants, tiers, credentials and subscribers; then the key hash and
 * the HMAC are checked in Node, in the contract's order. No cache of any kind. Given a
 * named prepared statement and the same pool size as the service (10), so that it is an
 * ordinary implementation, not a careless one.
 *
 * Env: PORT, HOST (127.0.0.1), and PEER_DATABASE_URL (PostgreSQL) or PEER_PGLITE_DIR
 * (an embedded folder that no other process holds).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { ServerResponse } from 'node:http';
import pg from 'pg';

interface Row {
  suspended: boolean;
  hmac_required: boolean;
  card_update_url: string | null;
  entitlements: Record<string, boolean>;
  key_hashes: string[];
  secrets: string[];
  status: string | null;
}

const SQL = `
  SELECT t.suspended, t.hmac_required, t.card_update_url, tr.entitlements,
         ARRAY(SELECT c.key_hash FROM tenant_credentials c
               WHERE c.tenant_id = t.id AND c.kind = 'publishable_key' AND (c.expires_at IS NULL OR c.expires_at > now())) AS key_hashes,
         ARRAY(SELECT c.secret FROM tenant_credentials c
               WHERE c.tenant_id = t.id AND c.kind = 'hmac_secret' AND (c.expires_at IS NULL OR c.expires_at > now())) AS secrets,
         s.status
  FROM tenants t
  JOIN tiers tr ON tr.name = t.tier
  LEFT JOIN subscribers s ON s.tenant_id = t.id AND s.processor_customer_id = $2
  WHERE t.slug = $1`;

type Query = (slug: string, customerId: string) => Promise<Row | undefined>;

async function connect(): Promise<{ query: Query; ping(): Promise<void>; close(): Promise<void> }> {
  const url = process.env.PEER_DATABASE_URL;
  if (url) {
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    pool.on('error', () => {});
    return {
      query: async (slug, customerId) =>
        (await pool.query<Row>({ name: 'peer_lookup', text: SQL, values: [slug, customerId] })).rows[0],
      ping: async () => void (await pool.query('SELECT 1')),
      close: () => pool.end(),
    };
  }
  const dir = process.env.PEER_PGLITE_DIR;
  if (!dir) throw new Error('set PEER_DATABASE_URL or PEER_PGLITE_DIR');
  const { PGlite } = await import('@electric-sql/pglite');
  const db = new PGlite(dir);
  await db.waitReady;
  return {
    query: async (slug, customerId) => (await db.query<Row>(SQL, [slug, customerId])).rows[0],
    ping: async () => void (await db.query('SELECT 1')),
    close: () => db.close(),
  };
}

const BEARER_RE = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const SLUG_RE = /^[a-z0-9][a-z0-9-]{1,62}$/;
const CUSTOMER_ID_RE = /^cus_[A-Za-z0-9_]{1,251}$/;
const HMAC_RE = /^[0-9a-fA-F]{64}$/;
const PATH_PREFIX = '/api/subscriber-status/';

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  402: 'Payment Required',
  403: 'Forbidden',
  404: 'Not Found',
  503: 'Service Unavailable',
};

function send(res: ServerResponse, status: number, body: string, type = 'application/json; charset=utf-8'): void {
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'access-control-allow-origin': '*',
  });
  res.end(body);
}

function problem(res: ServerResponse, status: number, code: string): void {
  const body = JSON.stringify({ type: 'about:blank', title: TITLES[status] ?? 'Error', status, code, detail: code });
  if (status === 401) res.setHeader('www-authenticate', 'Bearer');
  send(res, status, body, 'application/problem+json');
}

const db = await connect();

const server = createServer((req, res) => {
  void (async () => {
    const url = new URL(req.url ?? '/', 'http://peer');
    if (url.pathname === '/readyz') {
      await db.ping();
      return send(res, 200, '{"status":"ok"}');
    }
    if (req.method !== 'GET' || !url.pathname.startsWith(PATH_PREFIX)) return problem(res, 404, 'not_found');
    const slug = decodeURIComponent(url.pathname.slice(PATH_PREFIX.length));

    const bearer = BEARER_RE.exec(req.headers.authorization ?? '');
    if (!req.headers.authorization) return problem(res, 401, 'missing_publishable_key');
    if (!bearer?.[1]) return problem(res, 401, 'invalid_publishable_key');
    const customerId = url.searchParams.get('processor_customer_id') ?? '';
    const row = SLUG_RE.test(slug) ? await db.query(slug, customerId) : undefined;
    if (!row) return problem(res, 404, 'tenant_not_found');

    const presented = createHash('sha256').update(bearer[1], 'utf8').digest();
    let keyOk = false;
    for (const hash of row.key_hashes) if (timingSafeEqual(presented, Buffer.from(hash, 'hex'))) keyOk = true;
    if (!keyOk) return problem(res, 401, 'invalid_publishable_key');
    if (row.suspended) return problem(res, 402, 'tenant_suspended');

    const ids = url.searchParams.getAll('processor_customer_id');
    if (ids.length === 0) return problem(res, 400, 'missing_processor_customer_id');
    if (ids.length > 1 || !CUSTOMER_ID_RE.test(customerId)) return problem(res, 400, 'invalid_processor_customer_id');

    const hmacs = url.searchParams.getAll('hmac');
    if (hmacs.length === 0) {
      if (row.hmac_required) return problem(res, 403, 'hmac_required');
    } else {
      const hmac = hmacs[0] ?? '';
      let hmacOk = false;
      if (hmacs.length === 1 && HMAC_RE.test(hmac)) {
        const given = Buffer.from(hmac, 'hex');
        for (const secret of row.secrets) {
          if (timingSafeEqual(createHmac('sha256', secret).update(customerId, 'utf8').digest(), given)) hmacOk = true;
        }
      }
      if (!hmacOk) return problem(res, 403, 'hmac_mismatch');
    }

    if (row.status === null) return send(res, 200, '{"status":"active"}');
    return send(
      res,
      200,
      JSON.stringify({
        status: row.status,
        card_update_url: row.status === 'warning' ? row.card_update_url : null,
        entitlements: row.entitlements,
      }),
    );
  })().catch(() => {
    if (!res.headersSent) problem(res, 503, 'store_unavailable');
  });
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');

const stop = () => {
  server.close();
  void db.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

/**
 * The baseline: a bare node:http server answering every request with one fixed JSON body,
 * the size of a hot known-subscriber answer, with the headers the lookup sends to the
 * bench's load (content type, cache control, a request id made per request as the
 * service makes it, CORS, the RateLimit fields at the bench's quotas, the length) and the
 * service's connection settings (keep-alive timeout, requests per connection). Nothing is
 * parsed, looked up or logged: the ceiling of what Node answers on this machine with the
 * same bytes on the wire.
 *
 * Env: PORT, HOST (127.0.0.1), BENCH_BODY (the body).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

const body = Buffer.from(process.env.BENCH_BODY ?? '{"status":"active"}', 'utf8');
const length = String(body.length);
// The bench runs the service with every lookup quota at MAX_RATE_LIMIT (src/runtime/config.ts).
const POLICY = '"ip";q=1000000000;w=60, "tenant";q=1000000000;w=60';
const LIMIT = '"ip";r=999999999;t=60';
// As src/http/request.ts makes them: a random prefix and a counter.
const prefix = `${randomBytes(4).toString('hex')}-`;
let counter = 0;

const server = createServer((_req, res) => {
  counter += 1;
  res.writeHead(200, [
    'content-type',
    'application/json; charset=utf-8',
    'cache-control',
    'no-store',
    'x-request-id',
    prefix + counter.toString(36),
    'access-control-allow-origin',
    '*',
    'ratelimit-policy',
    POLICY,
    'ratelimit',
    LIMIT,
    'content-length',
    length,
  ]);
  res.end(body);
});
// The service's (src/http/app.ts, DEFAULT_HTTP_LIMITS): the same Keep-Alive header, and a
// new connection after as many requests.
server.keepAliveTimeout = 5_000;
server.maxRequestsPerSocket = 10_000;
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

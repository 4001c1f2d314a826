/**
 * The baseline: a bare node:http server answering every request with one fixed JSON body,
 * the size of a hot known-subscriber answer, with the lookup's headers. Nothing is parsed,
 * looked up or logged: the ceiling of what Node answers on this machine.
 *
 * Env: PORT, HOST (127.0.0.1), BENCH_BODY (the body).
 */
import { createServer } from 'node:http';

const body = Buffer.from(process.env.BENCH_BODY ?? '{"status":"active"}', 'utf8');
const headers = {
  'content-type': 'application/json; charset=utf-8',
  'content-length': String(body.length),
  'cache-control': 'no-store',
  'access-control-allow-origin': '*',
};

const server = createServer((_req, res) => {
  res.writeHead(200, headers);
  res.end(body);
});
server.keepAliveTimeout = 72_000;
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

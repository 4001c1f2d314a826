import type { FastifyError, FastifyReply } from 'fastify';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERRORS, PROBLEM_CONTENT_TYPE, problem, STORE_UNAVAILABLE_RETRY_AFTER_S } from './errors.js';
import type { ErrorCode } from './errors.js';

/**
 * Answers with an RFC 9457 problem; every 401 names the scheme it expects, and every 503
 * `store_unavailable` (lookup, webhook, admin, /readyz) when to try again.
 */
export function sendProblem(reply: FastifyReply, code: ErrorCode, detail?: string): FastifyReply {
  const body = problem(code, detail);
  reply.code(body.status).header('content-type', PROBLEM_CONTENT_TYPE);
  if (body.status === 401) reply.header('www-authenticate', 'Bearer');
  if (code === 'store_unavailable') reply.header('retry-after', String(STORE_UNAVAILABLE_RETRY_AFTER_S));
  return reply.send(JSON.stringify(body));
}

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

/** `/allowed_origins/0` -> `allowed_origins[0]`, `/entitlements/x` -> `entitlements.x`. */
function fieldName(instancePath: string): string {
  return instancePath
    .split('/')
    .filter(Boolean)
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('');
}

/** One sentence naming the field at fault, from the first schema validation error. */
export function describeValidationError(err: FastifyError): string {
  const first = err.validation?.[0] as AjvError | undefined;
  const where = err.validationContext ?? 'request';
  if (!first) return `${where}: ${err.message}`;
  const base = fieldName(first.instancePath);
  const join = (name: string) => (base ? `${base}.${name}` : name);
  if (first.keyword === 'required') return `${join(String(first.params.missingProperty))}: is required`;
  if (first.keyword === 'additionalProperties') return `${join(String(first.params.additionalProperty))}: is not a known field`;
  if (first.keyword === 'minProperties') return `${base || where}: must name at least one field`;
  if (first.keyword === 'type' && base === '') return `${where}: must be a JSON ${String(first.params.type)}`;
  return `${base || where}: ${first.message ?? 'is not valid'}`;
}

/**
 * Errors the HTTP parser meets before any route (a malformed request line, oversized
 * headers, a sender too slow): a problem on the socket, then the connection is closed.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW' ? 'headers_too_large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : 'bad_request';
  const body = JSON.stringify(problem(code));
  socket.end(
    `HTTP/1.1 ${ERRORS[code].status} ${STATUS_CODES[ERRORS[code].status] ?? ''}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
  // end() only half-closes: a peer that keeps its side open and drips bytes (slow loris)
  // would hold the descriptor for ever. It gets a moment to read the answer, then the
  // socket is destroyed.
  const linger = setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}

/** How long a connection answered with a client error may stay open for its peer to read the answer. */
export const CLIENT_ERROR_LINGER_MS = 1_000;

/**
 * The request's Authorization header; every value when there are several. Node keeps the
 * first of repeated Authorization headers and drops the rest, so they are counted here.
 */
export function authorizationOf(req: { rawHeaders: readonly string[]; headers: { authorization?: string | undefined } }): string | string[] | undefined {
  let values: string[] | undefined;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    if (name !== undefined && name.length === 13 && name.toLowerCase() === 'authorization') (values ??= []).push(req.rawHeaders[i + 1] ?? '');
  }
  return values !== undefined && values.length > 1 ? values : req.headers.authorization;
}

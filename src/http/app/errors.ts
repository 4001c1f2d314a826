import type { FastifyError } from 'fastify';
import { CursorNotIssuedError, isStoreUnavailable, StoreUnavailableError } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError, describeValidationError, sendProblem } from '../problems.js';

/** Every failure answers as a problem document: ours, validation, body parsing, the store's, not found. */
export function problemAnswers(app: App): void {
  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof AppError) {
      if (err.headers) reply.headers(err.headers);
      return sendProblem(reply, err.code, err.detail);
    }
    if (err.validation) return sendProblem(reply, 'invalid_request', describeValidationError(err));
    if (err instanceof CursorNotIssuedError)
      return sendProblem(
        reply,
        'invalid_cursor',
        'The cursor names a position this service never handed out: list again.',
      );
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendProblem(reply, 'payload_too_large');
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return sendProblem(reply, 'unsupported_media_type');
    if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY')
      return sendProblem(reply, 'invalid_request', 'body: must not be empty');
    if (isStoreUnavailable(err)) {
      // A lookup refused without trying the store follows a failure that was logged: in an
      // outage the lookups log the one read a second that tries again, not every request.
      if (!(err instanceof StoreUnavailableError))
        req.log.warn({ err: { message: err.message, code: err.code } }, 'store unavailable');
      return sendProblem(reply, 'store_unavailable');
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      if (status === 404) return sendProblem(reply, 'not_found');
      if (status === 405) return sendProblem(reply, 'method_not_allowed');
      if (status === 413) return sendProblem(reply, 'payload_too_large');
      if (status === 415) return sendProblem(reply, 'unsupported_media_type');
      // Body parser errors (malformed JSON...) carry no secret; their text helps the caller.
      return sendProblem(reply, 'invalid_request', `body: ${err.message}`);
    }
    req.log.error({ err }, 'request failed');
    return sendProblem(reply, 'internal_error');
  });
  app.setNotFoundHandler((_req, reply) => sendProblem(reply, 'not_found'));
}

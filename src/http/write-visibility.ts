import type { FastifyRequest } from 'fastify';
import type { App } from './app-instance.js';
import type { ReadModel } from '../readmodel/index.js';

const marks = new WeakMap<FastifyRequest, number>();
/** The methods that write; a lookup (GET) and a preflight (OPTIONS) never wait here. */
const WRITES = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * Read-your-writes on one instance: a write's answer leaves once this process's read model
 * shows what the request committed, and every sibling worker's too (`serve --workers N`),
 * so that the writer's next lookup reads it whichever worker takes it. Bounded (1 s, then
 * it answers anyway and is counted): a slow copy delays an answer, never loses it. A
 * request that committed nothing (a GET, a refusal, a store that is down) does not wait.
 * Set on the root, so that every route that writes has it, the ones added later included.
 */
export function awaitWritesApplied(app: App, model: ReadModel): void {
  app.addHook('onRequest', (req, _reply, done) => {
    if (WRITES.has(req.method)) marks.set(req, model.writeMark());
    done();
  });
  app.addHook('onSend', async (req, _reply, payload) => {
    const mark = marks.get(req);
    if (mark !== undefined) await model.writesApplied(mark);
    return payload;
  });
}

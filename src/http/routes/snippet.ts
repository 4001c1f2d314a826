import type { App } from '../app-instance.js';
import { ifNoneMatchHits } from '../conditional.js';
import { sendProblem } from '../problems.js';
import type { SnippetAsset } from '../snippet-asset.js';

/**
 * The file is not versioned in its URL, so a day's cache (then a revalidation that the
 * ETag makes a 304) balances fewer requests against how soon a fix reaches every page.
 */
export const SNIPPET_CACHE_CONTROL = 'public, max-age=86400, stale-while-revalidate=604800';

export async function snippetRoutes(app: App, opts: { snippet: SnippetAsset | null }): Promise<void> {
  const { snippet } = opts;
  app.get('/snippet.js', { schema: { hide: true } }, async (req, reply) => {
    if (snippet === null) return sendProblem(reply, 'not_found', 'The snippet is not built: run npm run build.');
    const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    const etag = gzip ? snippet.gzippedEtag : snippet.etag;
    reply
      .header('content-type', 'text/javascript; charset=utf-8')
      .header('cache-control', SNIPPET_CACHE_CONTROL)
      .header('etag', etag)
      .header('vary', 'Accept-Encoding')
      .header('access-control-allow-origin', '*')
      .header('cross-origin-resource-policy', 'cross-origin')
      .header('x-content-type-options', 'nosniff');
    if (ifNoneMatchHits(req.headers['if-none-match'], etag)) return reply.code(304).send();
    if (gzip) reply.header('content-encoding', 'gzip');
    return reply.send(gzip ? snippet.gzipped : snippet.body);
  });
}

/** One HTTP request on a given agent (a keep-alive connection of the bench's choosing), answered in full. */
import { request } from 'node:http';
import type { Agent } from 'node:http';

export interface Answer {
  status: number;
  body: string;
}

export function call(
  agent: Agent,
  base: URL,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
  timeoutMs = 5_000,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: base.hostname,
        port: base.port,
        method,
        path,
        headers:
          body === undefined
            ? headers
            : { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        res.on('error', reject);
      },
    );
    req.setTimeout(timeoutMs, () =>
      req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs / 1000} s`)),
    );
    req.on('error', reject);
    req.end(body);
  });
}

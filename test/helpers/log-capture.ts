import { Writable } from 'node:stream';

/** Everything the service writes to its log, as the process would write it to stdout. */
export class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.text += chunk.toString('utf8');
    done();
  }
  entries(): Record<string, unknown>[] {
    return this.text
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }
}

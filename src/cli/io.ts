import type { AdminClient } from './client.js';
import type { OptionSpecs, OptionValues } from './args.js';

export interface TextOutput {
  write(chunk: string): unknown;
  /** A terminal: progress is drawn as a bar in place rather than printed as lines. */
  isTTY?: boolean;
}

/** Everything the command line touches of its process; tests pass their own. */
export interface CliIo {
  stdout: TextOutput;
  stderr: TextOutput;
  stdin: AsyncIterable<string | Uint8Array>;
  env: Record<string, string | undefined>;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Waits (a Stripe Retry-After); defaults to a timer. Tests pass a fake clock's. */
  sleep?: (ms: number) => Promise<void>;
}

export interface CommandContext {
  io: CliIo;
  json: boolean;
  values: OptionValues;
  positionals: string[];
  /** The admin API client; resolving it reads DUNWALL_URL and the admin token. */
  client(): AdminClient;
  /** Prints `answer` as JSON with --json, else `human(answer)`. */
  output<T>(answer: T, human: (answer: T) => string): void;
  print(text: string): void;
}

export interface Command {
  /** The command words, e.g. `tenant create`. */
  name: string;
  /** What follows the command words in the help, e.g. `SLUG [--tier T]`. */
  usage: string;
  summary: string;
  options: OptionSpecs;
  /** Required positional arguments, in order. */
  positionals: string[];
  /** Name of further positional arguments, when the command takes any (at least one then). */
  variadic?: string;
  run(ctx: CommandContext): Promise<void>;
}

export async function readAll(stream: AsyncIterable<string | Uint8Array>): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream)
    chunks.push(typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}

/** The first line of `stream` (without its newline), or all of it when it ends first. */
export async function readLine(stream: AsyncIterable<string | Uint8Array>): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    const end = text.indexOf('\n');
    if (end >= 0) return text.slice(0, end);
    if (text.length > 4096) break;
  }
  return text;
}

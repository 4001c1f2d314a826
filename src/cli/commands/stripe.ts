import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { stringOption } from '../args.js';
import type { ReplayAnswerView } from '../client.js';
import { CliError, EXIT_FAILURE, UsageError } from '../errors.js';
import type { Command, CommandContext } from '../io.js';

/** What one request carries at most: within the server's batch limits (500 events, 8 MiB). */
export const REPLAY_BATCH_EVENTS = 500;
export const REPLAY_BATCH_BYTES = 4 * 1024 * 1024;

type Outcomes = ReplayAnswerView['outcomes'];

interface ReplaySummary {
  tenant: string;
  file: string;
  received: number;
  outcomes: Outcomes;
  invalid: { line: number; detail: string }[];
}

function lines(ctx: CommandContext, file: string): AsyncIterable<string> {
  const input = file === '-' ? Readable.from(ctx.io.stdin) : createReadStream(file, { encoding: 'utf8' });
  return createInterface({ input, crlfDelay: Infinity });
}

function formatSummary(s: ReplaySummary): string {
  const rows: [string, string | number][] = [
    ['tenant', s.tenant],
    ['file', s.file],
    ['events', s.received + s.invalid.length],
    ['applied', s.outcomes.applied],
    ['stale', s.outcomes.stale],
    ['ignored', s.outcomes.ignored],
    ['duplicate', s.outcomes.duplicate],
    ['irrelevant', s.outcomes.irrelevant],
    ['invalid', s.invalid.length],
  ];
  const width = Math.max(...rows.map(([k]) => k.length)) + 2;
  const out = rows.map(([k, v]) => `${`${k}:`.padEnd(width)}${v}`);
  for (const { line, detail } of s.invalid.slice(0, 20)) out.push(`  line ${line}: ${detail}`);
  if (s.invalid.length > 20) out.push(`  ... and ${s.invalid.length - 20} more`);
  return out.join('\n');
}

const replay: Command = {
  name: 'stripe replay',
  usage: '--tenant SLUG FILE.jsonl',
  summary: "Feed exported Stripe events (one JSON object a line; - for stdin) through the webhook's derivation, to backfill statuses.",
  options: { tenant: { type: 'string' } },
  positionals: ['FILE'],
  async run(ctx) {
    const tenant = stringOption(ctx.values, 'tenant');
    if (tenant === undefined || tenant === '') throw new UsageError('stripe replay: missing --tenant SLUG');
    const file = ctx.positionals[0] ?? '';
    const client = ctx.client();
    const summary: ReplaySummary = {
      tenant,
      file,
      received: 0,
      outcomes: { applied: 0, stale: 0, ignored: 0, pending: 0, duplicate: 0, irrelevant: 0 },
      invalid: [],
    };

    let batch: unknown[] = [];
    let batchLines: number[] = [];
    let batchBytes = 0;
    const flush = async () => {
      if (batch.length === 0) return;
      let answer: ReplayAnswerView;
      try {
        answer = await client.replayStripeEvents(tenant, batch);
      } catch (err) {
        // What was sent before stays applied: say where the file stopped, with the counts so far.
        if (!(err instanceof CliError)) throw err;
        ctx.output(summary, formatSummary);
        throw new CliError(`${err.message} (stopped at line ${batchLines[0] ?? 0}: that line and the ones after it were not replayed)`, err.exitCode);
      }
      summary.received += answer.received - answer.invalid.length;
      for (const key of Object.keys(summary.outcomes) as (keyof Outcomes)[]) summary.outcomes[key] += answer.outcomes[key];
      for (const { index, detail } of answer.invalid) summary.invalid.push({ line: batchLines[index] ?? 0, detail });
      batch = [];
      batchLines = [];
      batchBytes = 0;
    };

    let lineNumber = 0;
    try {
      for await (const line of lines(ctx, file)) {
        lineNumber += 1;
        if (line.trim() === '') continue;
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          summary.invalid.push({ line: lineNumber, detail: 'not JSON' });
          continue;
        }
        const bytes = Buffer.byteLength(line, 'utf8');
        if (batch.length >= REPLAY_BATCH_EVENTS || batchBytes + bytes > REPLAY_BATCH_BYTES) await flush();
        batch.push(parsed);
        batchLines.push(lineNumber);
        batchBytes += bytes;
      }
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') throw new CliError(`cannot read ${file} (${String(code)})`, EXIT_FAILURE);
      throw err;
    }
    await flush();
    summary.invalid.sort((a, b) => a.line - b.line);

    ctx.output(summary, formatSummary);
    if (summary.invalid.length > 0) {
      throw new CliError(`${summary.invalid.length} line(s) of ${file} were not replayed (listed above)`, EXIT_FAILURE);
    }
  },
};

export const stripeCommands: Command[] = [replay];

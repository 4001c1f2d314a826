import { createReadStream, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import pkg from '../../../package.json' with { type: 'json' };
import { booleanOption, stringOption, tenantOption } from '../args.js';
import { CliError, ConfigurationError, EXIT_FAILURE } from '../errors.js';
import type { Command, CommandContext } from '../io.js';
import { createProgress } from '../progress.js';
import type { SyncResult } from '../stripe-sync.js';
import { ImportTally, formatTally } from '../stripe-tally.js';
import type { TallySummary } from '../stripe-tally.js';
import { sendSample } from './stripe-send-sample.js';

/** What one request carries at most: within the server's batch limits (500 events, 8 MiB). */
export const REPLAY_BATCH_EVENTS = 500;
export const REPLAY_BATCH_BYTES = 4 * 1024 * 1024;

interface ReplaySummary extends TallySummary {
  tenant: string;
  file: string;
  received: number;
  invalid: { line: number; detail: string }[];
}

function lines(ctx: CommandContext, file: string): AsyncIterable<string> {
  const input = file === '-' ? Readable.from(ctx.io.stdin) : createReadStream(file, { encoding: 'utf8' });
  return createInterface({ input, crlfDelay: Infinity });
}

/** The file's size, for a bar that knows where it is; null for stdin or what cannot be sized. */
function sizeOf(file: string): number | null {
  if (file === '-') return null;
  try {
    const stat = statSync(file);
    return stat.isFile() && stat.size > 0 ? stat.size : null;
  } catch {
    return null;
  }
}

function formatReplay(s: ReplaySummary): string {
  const out = [
    `tenant:            ${s.tenant}`,
    `file:              ${s.file}`,
    `events:            ${s.received + s.invalid.length}`,
    ...formatTally(s, false),
  ];
  out.push(`invalid:           ${s.invalid.length}`);
  for (const { line, detail } of s.invalid.slice(0, 20)) out.push(`  line ${line}: ${detail}`);
  if (s.invalid.length > 20) out.push(`  ... and ${s.invalid.length - 20} more`);
  return out.join('\n');
}

const replay: Command = {
  name: 'stripe replay',
  usage: '--tenant SLUG FILE.jsonl',
  summary:
    "Pass exported Stripe events (one JSON object a line; - for stdin) through the Stripe intake's derivation, to backfill statuses.",
  options: { tenant: { type: 'string' } },
  positionals: ['FILE'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'stripe replay');
    const file = ctx.positionals[0] ?? '';
    const client = ctx.client();
    const tally = new ImportTally();
    const progress = createProgress(ctx.io.stderr, 'stripe replay');
    const total = sizeOf(file);
    let received = 0;
    const invalid: { line: number; detail: string }[] = [];

    let batch: unknown[] = [];
    let batchLines: number[] = [];
    let batchBytes = 0;
    let bytesRead = 0;
    const summary = (): ReplaySummary => ({
      tenant,
      file,
      received,
      invalid: [...invalid].sort((a, b) => a.line - b.line),
      ...tally.summary(),
    });
    const flush = async () => {
      if (batch.length === 0) return;
      let answer;
      try {
        answer = await client.replayStripeEvents(tenant, batch);
      } catch (err) {
        // What was sent before stays applied: say where the file stopped, with the counts so far.
        if (!(err instanceof CliError)) throw err;
        progress.done();
        ctx.output(summary(), formatReplay);
        throw new CliError(
          `${err.message} (stopped at line ${batchLines[0] ?? 0}: that line and the ones after it were not replayed)`,
          err.exitCode,
        );
      }
      tally.add(batch, answer);
      received += answer.received - answer.invalid.length;
      for (const { index, detail } of answer.invalid) invalid.push({ line: batchLines[index] ?? 0, detail });
      batch = [];
      batchLines = [];
      batchBytes = 0;
      progress.report(
        total === null ? null : bytesRead / total,
        `${received} events · ${tally.customersSeen} customers`,
        true,
      );
    };

    let lineNumber = 0;
    try {
      for await (const line of lines(ctx, file)) {
        lineNumber += 1;
        const bytes = Buffer.byteLength(line, 'utf8');
        bytesRead += bytes + 1;
        if (line.trim() === '') continue;
        let parsed: unknown;
        try {
          parsed = JSON.parse(line);
        } catch {
          invalid.push({ line: lineNumber, detail: 'not JSON' });
          continue;
        }
        if (batch.length >= REPLAY_BATCH_EVENTS || batchBytes + bytes > REPLAY_BATCH_BYTES) await flush();
        batch.push(parsed);
        batchLines.push(lineNumber);
        batchBytes += bytes;
        progress.report(
          total === null ? null : bytesRead / total,
          `${received + batch.length} events · ${tally.customersSeen} customers`,
        );
      }
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') {
        progress.done();
        throw new CliError(`cannot read ${file} (${String(code)})`, EXIT_FAILURE);
      }
      throw err;
    }
    await flush();
    progress.done();

    const result = summary();
    ctx.output(result, formatReplay);
    if (result.invalid.length > 0) {
      throw new CliError(`${result.invalid.length} line(s) of ${file} were not replayed (listed above)`, EXIT_FAILURE);
    }
  },
};

/** The key from --api-key-file or STRIPE_API_KEY: never a command-line value that lands in shell history. */
async function stripeKeyOf(ctx: CommandContext): Promise<string> {
  const file = stringOption(ctx.values, 'api-key-file');
  let key: string | undefined;
  if (file !== undefined) {
    try {
      key = (await readFile(file, 'utf8')).trim();
    } catch (err) {
      throw new ConfigurationError(
        `cannot read --api-key-file ${file} (${String((err as { code?: unknown }).code ?? 'unreadable')})`,
      );
    }
  } else {
    key = ctx.io.env.STRIPE_API_KEY?.trim();
  }
  if (key === undefined || key === '')
    throw new ConfigurationError('stripe sync needs a Stripe API key: --api-key-file PATH, or STRIPE_API_KEY');
  // Loaded only here: the official client costs every `dunwall serve` process about 19 MB.
  const { checkStripeKey } = await import('../stripe-sync.js');
  if (checkStripeKey(key) === 'secret') {
    ctx.io.stderr.write(
      'dunwall: note: a restricted key (rk_...) with read access to Subscriptions, Invoices and PaymentIntents is all stripe sync needs\n',
    );
  }
  return key;
}

function formatSync(r: SyncResult): string {
  return [
    `tenant:            ${r.tenant}${r.dry_run ? ' (dry run: nothing was written)' : ''}`,
    `objects read:      ${r.objects}${r.resumed ? ' (resumed)' : ''}`,
    `events sent:       ${r.events_sent}`,
    ...formatTally(r, r.dry_run),
    ...(r.rate_limit_waits > 0 ? [`rate limited:      ${r.rate_limit_waits} wait(s) as Stripe asked`] : []),
  ].join('\n');
}

const sync: Command = {
  name: 'stripe sync',
  usage: '--tenant SLUG [--api-key-file PATH] [--dry-run] [--state-file PATH] [--restart]',
  summary:
    "Import who is in dunning today from the tenant's Stripe account (past_due, unpaid and incomplete subscriptions, attempted open invoices). Key: --api-key-file or STRIPE_API_KEY. Resumable; --dry-run prints what would change.",
  options: {
    tenant: { type: 'string' },
    'api-key-file': { type: 'string' },
    'dry-run': { type: 'boolean' },
    'state-file': { type: 'string' },
    restart: { type: 'boolean' },
  },
  positionals: [],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'stripe sync');
    const dryRun = booleanOption(ctx.values, 'dry-run');
    const key = await stripeKeyOf(ctx);
    const client = ctx.client();
    const { runStripeSync, stripeClient } = await import('../stripe-sync.js');
    const stripe = stripeClient(key, ctx.io.env.DUNWALL_STRIPE_API_URL, pkg.version);
    const stateFile = dryRun ? null : (stringOption(ctx.values, 'state-file') ?? `.dunwall-stripe-sync-${tenant}.json`);
    const result = await runStripeSync(
      {
        stripe,
        client,
        progress: createProgress(ctx.io.stderr, 'stripe sync'),
        sleep: ctx.io.sleep ?? ((ms) => delay(ms)),
        note: (line) => ctx.io.stderr.write(`dunwall: ${line}\n`),
      },
      { tenant, dryRun, stateFile, restart: booleanOption(ctx.values, 'restart') },
    );
    ctx.output(result, formatSync);
  },
};

export const stripeCommands: Command[] = [replay, sync, sendSample];

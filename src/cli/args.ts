import { parseArgs } from 'node:util';
import { UsageError } from './errors.js';

export interface OptionSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
}
export type OptionSpecs = Record<string, OptionSpec>;
export type OptionValues = Record<string, string | boolean | (string | boolean)[] | undefined>;

export interface GlobalFlags {
  json: boolean;
  /** `--test`: the commands address the tenant's test mode (docs/test-mode.md); live otherwise. */
  test: boolean;
  help: boolean;
  version: boolean;
  /** argv without the global flags. */
  rest: string[];
}

/** `--json`, `--test`, `--help`/`-h` and `--version` are accepted anywhere before a `--`. */
export function extractGlobalFlags(argv: readonly string[]): GlobalFlags {
  const flags: GlobalFlags = { json: false, test: false, help: false, version: false, rest: [] };
  let i = 0;
  for (; i < argv.length; i += 1) {
    const arg = argv[i] ?? '';
    if (arg === '--') break;
    if (arg === '--json') flags.json = true;
    else if (arg === '--test') flags.test = true;
    else if (arg === '--help' || arg === '-h') flags.help = true;
    else if (arg === '--version') flags.version = true;
    else flags.rest.push(arg);
  }
  flags.rest.push(...argv.slice(i));
  return flags;
}

export interface ParsedArgs {
  values: OptionValues;
  positionals: string[];
}

function isParseArgsError(err: unknown): err is Error & { code: string } {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}

/** `Unknown option '--x'. To specify...` -> `unknown option '--x'`. */
function firstSentence(message: string): string {
  const first = message.split(/\.(?:\s|$)/)[0] ?? message;
  return first.charAt(0).toLowerCase() + first.slice(1);
}

/** node:util parseArgs, strict; its errors become usage errors (first line of the message only). */
export function parseCommandArgs(command: string, args: readonly string[], options: OptionSpecs): ParsedArgs {
  try {
    const { values, positionals } = parseArgs({ args: [...args], options, allowPositionals: true, strict: true });
    return { values: values as OptionValues, positionals };
  } catch (err) {
    if (isParseArgsError(err)) throw new UsageError(`${command}: ${firstSentence(err.message)}`);
    throw err;
  }
}

export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

/** `--tenant SLUG` of the commands that act on one tenant's subscribers or events; required, never empty. */
export function tenantOption(values: OptionValues, command: string): string {
  const tenant = stringOption(values, 'tenant');
  if (tenant === undefined || tenant === '') throw new UsageError(`${command}: missing --tenant SLUG`);
  return tenant;
}

/** A whole number option from `min` to `max`; undefined when not given. */
export function wholeNumberOption(values: OptionValues, name: string, min: number, max: number): number | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\d{1,15}$/.test(raw) || value < min || value > max)
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max} (got '${raw}')`);
  return value;
}

export function stringsOption(values: OptionValues, name: string): string[] {
  const value = values[name];
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

export function booleanOption(values: OptionValues, name: string): boolean {
  return values[name] === true;
}

/** `true` or `false`, nothing else. */
export function parseBoolean(value: string, what: string): boolean {
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw new UsageError(`${what} must be true or false (got '${value}')`);
}

/** A date and time (`2026-11-20T00:00:00Z`), as an RFC 3339 UTC instant; undefined when not given. */
export function instantOption(values: OptionValues, name: string): string | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const ms = Date.parse(raw);
  if (Number.isNaN(ms))
    throw new UsageError(`--${name} must be a date and time such as 2026-11-20T00:00:00Z (got '${raw}')`);
  return new Date(ms).toISOString();
}

/** `a,b, c` -> `['a', 'b', 'c']`: items trimmed, empty ones dropped. */
export function listOption(values: OptionValues, name: string): string[] | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  return raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

import { FLAG_NAME_RULE, isFlagName } from '../../domain/types.js';
import { parseBoolean } from '../args.js';
import { UsageError } from '../errors.js';
import { formatTier, formatTierList } from '../format.js';
import type { Command } from '../io.js';

/** `flag=true flag2=false` -> `{flag: true, flag2: false}`; each flag once. */
export function parseFlagAssignments(args: readonly string[]): Record<string, boolean> {
  const flags: Record<string, boolean> = {};
  for (const arg of args) {
    const eq = arg.indexOf('=');
    if (eq < 0) throw new UsageError(`expected FLAG=true or FLAG=false (got '${arg}')`);
    const name = arg.slice(0, eq);
    if (!isFlagName(name)) throw new UsageError(`'${name}' is not a valid flag name (${FLAG_NAME_RULE})`);
    if (Object.hasOwn(flags, name)) throw new UsageError(`flag '${name}' is given twice`);
    flags[name] = parseBoolean(arg.slice(eq + 1), name);
  }
  return flags;
}

const list: Command = {
  name: 'tier list',
  usage: '',
  summary: 'List the tiers and their flags.',
  options: {},
  positionals: [],
  async run(ctx) {
    ctx.output(await ctx.client().listTiers(), (answer) => formatTierList(answer.data));
  },
};

const set: Command = {
  name: 'tier set',
  usage: 'NAME FLAG=true|false...',
  summary: "Create or replace a tier's flags (the three named flags are required).",
  options: {},
  positionals: ['NAME'],
  variadic: 'FLAG=true|false',
  async run(ctx) {
    const [name = '', ...assignments] = ctx.positionals;
    const entitlements = parseFlagAssignments(assignments);
    ctx.output(await ctx.client().putTier(name, entitlements), formatTier);
  },
};

const remove: Command = {
  name: 'tier delete',
  usage: 'NAME',
  summary: 'Delete a tier no tenant is on (move its tenants to another tier first).',
  options: {},
  positionals: ['NAME'],
  async run(ctx) {
    const name = ctx.positionals[0] ?? '';
    await ctx.client().deleteTier(name);
    if (!ctx.json) ctx.print(`tier ${name} deleted`);
  },
};

export const tierCommands: Command[] = [list, set, remove];

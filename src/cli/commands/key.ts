import { SCOPES } from '../../domain/keys.js';
import type { Scope } from '../../domain/keys.js';
import { parseScopes } from '../../domain/secret-keys.js';
import { booleanOption, instantOption, listOption, stringOption, wholeNumberOption } from '../args.js';
import type { SecretKeyWithSecretView } from '../client.js';
import { UsageError } from '../errors.js';
import { formatKeyList, formatKeyWithSecret } from '../format.js';
import type { Command, CommandContext } from '../io.js';

/**
 * A tenant's secret keys (docs/tenant-api.md): what its backend calls the tenant API and the
 * lookup with. The secret is printed once, when the key is created or rotated; `--quiet`
 * prints it alone on stdout, so that it goes straight into a secret store through a pipe.
 */

/** The longest overlap a rotation may name (the API's bound): 30 days. */
const MAX_OVERLAP_S = 30 * 86_400;

function slugOf(ctx: CommandContext): string {
  return ctx.positionals[0] ?? '';
}

function keyIdOf(ctx: CommandContext): string {
  return ctx.positionals[1] ?? '';
}

/** `--scopes a,b`, each checked against the domain's list before anything is sent. */
function scopesOption(ctx: CommandContext, command: string): Scope[] {
  const given = listOption(ctx.values, 'scopes');
  if (given === undefined) throw new UsageError(`${command}: missing --scopes SCOPE,SCOPE (of ${SCOPES.join(', ')})`);
  if (given.length === 0) throw new UsageError(`--scopes: name at least one scope (of ${SCOPES.join(', ')})`);
  const parsed = parseScopes(given);
  if (!parsed.ok) throw new UsageError(`--scopes: unknown scope '${parsed.bad}' (known: ${SCOPES.join(', ')})`);
  return parsed.scopes;
}

/** `--quiet` and `--json` each decide the whole output: one at a time. */
function quietOption(ctx: CommandContext, command: string): boolean {
  const quiet = booleanOption(ctx.values, 'quiet');
  if (quiet && ctx.json) throw new UsageError(`${command}: give only one of --quiet, --json`);
  return quiet;
}

/** The answer of a creation or rotation: the secret alone with --quiet, else the key and its secret under the banner. */
function printWithSecret(ctx: CommandContext, answer: SecretKeyWithSecretView, quiet: boolean, rotated: boolean): void {
  if (quiet) ctx.print(answer.secret_key);
  else ctx.output(answer, (k) => formatKeyWithSecret(k, rotated));
}

const create: Command = {
  name: 'key create',
  usage: `SLUG --name NAME --scopes SCOPE[,SCOPE...] [--expires-at TIME] [--quiet]`,
  summary: `Create a secret key for the tenant's backend; prints its secret this once only (--quiet: the secret alone on stdout). Scopes: ${SCOPES.join(', ')}.`,
  options: {
    name: { type: 'string' },
    scopes: { type: 'string' },
    'expires-at': { type: 'string' },
    quiet: { type: 'boolean' },
  },
  positionals: ['SLUG'],
  async run(ctx) {
    const quiet = quietOption(ctx, 'key create');
    const name = stringOption(ctx.values, 'name');
    if (name === undefined || name.trim() === '')
      throw new UsageError('key create: missing --name NAME (what the key is for)');
    const scopes = scopesOption(ctx, 'key create');
    const expiresAt = instantOption(ctx.values, 'expires-at');
    const created = await ctx
      .client()
      .createSecretKey(slugOf(ctx), { name, scopes, ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}) });
    printWithSecret(ctx, created, quiet, false);
  },
};

const list: Command = {
  name: 'key list',
  usage: 'SLUG',
  summary:
    "List a tenant's secret keys: id, name, scopes, prefix, when created, expiring and last used; never a secret.",
  options: {},
  positionals: ['SLUG'],
  async run(ctx) {
    ctx.output(await ctx.client().listSecretKeys(slugOf(ctx)), (answer) => formatKeyList(answer.data));
  },
};

const revoke: Command = {
  name: 'key revoke',
  usage: 'SLUG KEY_ID',
  summary: 'Revoke a secret key: every instance refuses it within a second. It cannot be undone.',
  options: {},
  positionals: ['SLUG', 'KEY_ID'],
  async run(ctx) {
    await ctx.client().revokeSecretKey(slugOf(ctx), keyIdOf(ctx));
    // The API answers 204 with no body: --json prints nothing.
    if (!ctx.json)
      ctx.print(`secret key ${keyIdOf(ctx)} of ${slugOf(ctx)} revoked: every instance refuses it within a second`);
  },
};

const rotate: Command = {
  name: 'key rotate',
  usage: 'SLUG KEY_ID [--overlap-seconds N] [--quiet]',
  summary: `A new secret for the key, printed once; the replaced one keeps working for the overlap (default DUNWALL_ROTATION_OVERLAP_S, at most ${MAX_OVERLAP_S}).`,
  options: { 'overlap-seconds': { type: 'string' }, quiet: { type: 'boolean' } },
  positionals: ['SLUG', 'KEY_ID'],
  async run(ctx) {
    const quiet = quietOption(ctx, 'key rotate');
    const overlap = wholeNumberOption(ctx.values, 'overlap-seconds', 0, MAX_OVERLAP_S);
    printWithSecret(ctx, await ctx.client().rotateSecretKey(slugOf(ctx), keyIdOf(ctx), overlap), quiet, true);
  },
};

export const keyCommands: Command[] = [create, list, revoke, rotate];

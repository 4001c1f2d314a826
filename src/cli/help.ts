import { COMMANDS, GROUPS, groupCommands } from './commands/index.js';
import type { Command } from './io.js';

const SECTIONS: ReadonlyArray<[string, (c: Command) => boolean]> = [
  ['Service', (c) => !c.name.includes(' ')],
  ['Tenants', (c) => c.name.startsWith('tenant ')],
  ['Tenant secret keys (the tenant API)', (c) => c.name.startsWith('key ')],
  ['Subscribers', (c) => c.name.startsWith('subscriber ')],
  ['Tiers', (c) => c.name.startsWith('tier ')],
  ['Downstream webhooks', (c) => c.name.startsWith('webhook ')],
  ['Stripe', (c) => c.name.startsWith('stripe ')],
  ['Secrets at rest', (c) => c.name.startsWith('secrets ')],
];

function describe(commands: readonly Command[]): string[] {
  return commands.flatMap((c) => [`  dunwall ${c.name}${c.usage ? ` ${c.usage}` : ''}`, `      ${c.summary}`]);
}

const FOOTER = `Options (anywhere on the line)
  --json         print the API's JSON answer as is, for scripts
  --test         address the tenant's test mode (live otherwise)
  -h, --help     show this help
  --version      print the version

Environment
  DUNWALL_URL          the service's base URL (default http://127.0.0.1:3000)
  DUNWALL_ADMIN_TOKEN  the admin token; when unset, read from DUNWALL_DATA_DIR/admin-token
  DUNWALL_DATA_DIR     the embedded data folder (default ./.dunwall)
  STRIPE_API_KEY       stripe sync: a restricted key with read access (or --api-key-file)
  DUNWALL_STRIPE_API_URL  stripe sync: another base URL for Stripe's API (a proxy)
  serve, migrate and secrets reencrypt read the service's own settings (DATABASE_URL,
  DUNWALL_ENCRYPTION_KEY, PORT, HOST, ...).

Exit status: 0 done, 1 API or network error, 2 usage or configuration error.`;

/** One command's help: its usage, what it does, and its options. */
export function commandHelp(command: Command): string {
  const options = Object.entries(command.options).map(
    ([name, spec]) => `  --${name}${spec.type === 'string' ? ' VALUE' : ''}`,
  );
  return [
    `Usage: dunwall ${command.name}${command.usage ? ` ${command.usage}` : ''}`,
    '',
    command.summary,
    ...(options.length > 0 ? ['', 'Options', ...options] : []),
    '',
    FOOTER,
    '',
  ].join('\n');
}

/** The whole help, or one group's (`tenant`, `key`, `subscriber`, ...). */
export function helpText(group?: string): string {
  const commands = group === undefined ? [] : groupCommands(group);
  if (commands.length > 0) {
    return [`Usage: dunwall ${group ?? ''} <command> [options]`, '', ...describe(commands), '', FOOTER, ''].join('\n');
  }
  const sections = SECTIONS.flatMap(([title, match]) => ['', title, ...describe(COMMANDS.filter(match))]);
  return [
    'dunwall: billing enforcement status lookup for Stripe-billed SaaS.',
    '',
    'Usage: dunwall <command> [options]',
    ...sections,
    `  dunwall help [${GROUPS.join('|')}]`,
    "  dunwall COMMAND --help     one command's usage and options",
    '  dunwall completion bash|zsh  prints a completion script (e.g. source <(dunwall completion bash))',
    '',
    FOOTER,
    '',
  ].join('\n');
}

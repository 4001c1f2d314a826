import type { Command } from '../io.js';
import { keyCommands } from './key.js';
import { secretsCommands } from './secrets.js';
import { serviceCommands } from './service.js';
import { stripeCommands } from './stripe.js';
import { subscriberCommands } from './subscriber.js';
import { tenantCommands } from './tenant.js';
import { tierCommands } from './tier.js';
import { webhookCommands } from './webhook.js';

export const COMMANDS: readonly Command[] = [
  ...serviceCommands,
  ...tenantCommands,
  ...keyCommands,
  ...subscriberCommands,
  ...tierCommands,
  ...webhookCommands,
  ...stripeCommands,
  ...secretsCommands,
];

/** Commands of two words (`tenant create`) belong to a group (`tenant`). */
export const GROUPS: readonly string[] = [
  ...new Set(COMMANDS.filter((c) => c.name.includes(' ')).map((c) => c.name.split(' ')[0] ?? '')),
];

export function findCommand(name: string): Command | undefined {
  return COMMANDS.find((c) => c.name === name);
}

export function groupCommands(group: string): Command[] {
  return COMMANDS.filter((c) => c.name.startsWith(`${group} `));
}

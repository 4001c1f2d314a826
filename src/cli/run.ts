import pkg from '../../package.json' with { type: 'json' };
import { extractGlobalFlags, parseCommandArgs } from './args.js';
import type { AdminClient } from './client.js';
import { GROUPS, findCommand, groupCommands } from './commands/index.js';
import { clientFrom } from './env.js';
import { ApiError, CliError, EXIT_FAILURE, EXIT_OK, EXIT_USAGE, NetworkError, UsageError, oneLine } from './errors.js';
import { commandHelp, helpText } from './help.js';
import { completionScript } from './completion.js';
import { terminalJson, terminalSafe, terminalText } from './terminal.js';
import type { CliIo, Command, CommandContext } from './io.js';

export type { CliIo } from './io.js';

export const VERSION: string = pkg.version;

/**
 * The `dunwall` command line: runs `argv` (without the node and script paths) and returns
 * the exit code. Errors end up as exactly one `dunwall: ...` line on stderr.
 */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    return await dispatch(argv, io);
  } catch (err) {
    // With --json, the error is one JSON line too (on stderr, like every error), for scripts.
    const json = argv.includes('--json');
    // An error may carry the service's words (a problem's detail): escaped like any answer.
    if (err instanceof CliError) {
      if (json) io.stderr.write(`${terminalJson({ error: errorJson(err) })}\n`);
      else io.stderr.write(`dunwall: ${terminalText(oneLine(err.message))}\n`);
      return err.exitCode;
    }
    const message = oneLine(err instanceof Error ? err.message : String(err));
    io.stderr.write(
      json
        ? `${terminalJson({ error: { kind: 'unexpected', message, exit: EXIT_FAILURE } })}\n`
        : `dunwall: unexpected error: ${terminalText(message)}\n`,
    );
    return EXIT_FAILURE;
  }
}

/** An error as `--json` prints it: its kind, the API's status and code when it came from there, the exit code. */
function errorJson(err: CliError): Record<string, unknown> {
  if (err instanceof ApiError) {
    return {
      kind: 'api',
      status: err.status,
      code: err.code,
      message: err.status === 429 ? err.message : err.detail,
      ...(err.retryAfterS === null ? {} : { retry_after_s: err.retryAfterS }),
      exit: err.exitCode,
    };
  }
  const kind =
    err instanceof UsageError
      ? 'usage'
      : err instanceof NetworkError
        ? 'network'
        : err.exitCode === EXIT_USAGE
          ? 'configuration'
          : 'failure';
  return { kind, message: oneLine(err.message), exit: err.exitCode };
}

function resolveCommand(words: readonly string[]): { command: Command; args: string[] } | { group: string } {
  const [first = '', second, ...rest] = words;
  const single = findCommand(first);
  if (single) return { command: single, args: words.slice(1) };
  if (GROUPS.includes(first)) {
    if (second === undefined) return { group: first };
    const command = findCommand(`${first} ${second}`);
    if (!command) {
      const known = groupCommands(first).map((c) => c.name.split(' ')[1] ?? '');
      throw new UsageError(`unknown command '${first} ${second}' (${first} commands: ${known.join(', ')})`);
    }
    return { command, args: rest };
  }
  if (first.startsWith('-')) throw new UsageError(`unknown option '${first}'`);
  throw new UsageError(`unknown command '${first}'`);
}

async function dispatch(argv: readonly string[], io: CliIo): Promise<number> {
  const flags = extractGlobalFlags(argv);
  const print = (text: string) => {
    io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  };
  if (flags.version) {
    print(flags.json ? JSON.stringify({ version: VERSION }, null, 2) : `dunwall ${VERSION}`);
    return EXIT_OK;
  }
  const [first, ...rest] = flags.rest;
  if (first === undefined) {
    // `dunwall --help` asks for the help; bare `dunwall` is a usage error (a script that
    // forgot its command must not succeed).
    if (flags.help) {
      print(helpText());
      return EXIT_OK;
    }
    io.stderr.write(helpText());
    throw new UsageError('missing command');
  }
  if (first === 'completion') {
    const shell = rest[0];
    if (shell !== 'bash' && shell !== 'zsh') throw new UsageError("completion: give 'bash' or 'zsh'");
    print(completionScript(shell));
    return EXIT_OK;
  }
  if (first === 'help') {
    const topic = rest[0];
    if (topic !== undefined && !GROUPS.includes(topic) && !findCommand(topic))
      throw new UsageError(`no help on '${topic}'`);
    print(helpText(topic));
    return EXIT_OK;
  }

  const resolved = resolveCommand(flags.rest);
  if ('group' in resolved) {
    if (flags.help) {
      print(helpText(resolved.group));
      return EXIT_OK;
    }
    const known = groupCommands(resolved.group).map((c) => c.name.split(' ')[1] ?? '');
    throw new UsageError(`missing ${resolved.group} command (one of: ${known.join(', ')})`);
  }
  const { command, args } = resolved;
  if (flags.help) {
    print(commandHelp(command));
    return EXIT_OK;
  }

  const { values, positionals } = parseCommandArgs(command.name, args, command.options);
  const missing = command.positionals[positionals.length];
  if (missing !== undefined) throw new UsageError(`${command.name}: missing ${missing}`);
  if (command.variadic !== undefined) {
    if (positionals.length === command.positionals.length)
      throw new UsageError(`${command.name}: missing ${command.variadic}`);
  } else if (positionals.length > command.positionals.length) {
    throw new UsageError(`${command.name}: unexpected argument '${positionals[command.positionals.length] ?? ''}'`);
  }

  let client: AdminClient | undefined;
  const ctx: CommandContext = {
    io,
    json: flags.json,
    values,
    positionals,
    client() {
      client ??= clientFrom(io.env, io.fetch ?? globalThis.fetch, flags.test ? 'test' : 'live');
      return client;
    },
    output(answer, human) {
      // Every string of the answer is escaped before a formatter sees it (src/cli/terminal.ts).
      print(flags.json ? terminalJson(answer, 2) : human(terminalSafe(answer)));
    },
    print,
  };
  await command.run(ctx);
  return EXIT_OK;
}

import { mkdirSync } from 'node:fs';
import { wholeNumberOption } from '../args.js';
import { CliError, ConfigurationError, EXIT_FAILURE, oneLine } from '../errors.js';
import { ConfigError, loadConfig } from '../../runtime/config.js';
import type { Config } from '../../runtime/config.js';
import type { Env } from '../env.js';
import type { Command } from '../io.js';

export function loadConfigOrThrow(env: Env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigurationError(`invalid configuration: ${err.problems.join('; ')}`);
    throw err;
  }
}

const serve: Command = {
  name: 'serve',
  usage: '[--workers N]',
  summary:
    'Run the service, configured by the environment (PORT, HOST, DATABASE_URL, DUNWALL_DATA_DIR, ...); --workers N processes (default: one per core on PostgreSQL, one with the embedded store).',
  options: { workers: { type: 'string' } },
  positionals: [],
  async run(ctx) {
    // Checked here first so that a bad setting is one line, as every other CLI error.
    const config = loadConfigOrThrow(ctx.io.env);
    const workers = wholeNumberOption(ctx.values, 'workers', 1, 256);
    if (workers !== undefined && workers > 1 && config.databaseUrl === null) {
      throw new ConfigurationError('--workers above 1 needs DATABASE_URL: one process owns the embedded store');
    }
    // Loaded on demand: the admin commands do not need Fastify or a database driver.
    const { main } = await import('../../runtime/server.js');
    await main(ctx.io.env, workers === undefined ? {} : { workers });
  },
};

const migrate: Command = {
  name: 'migrate',
  usage: '',
  summary:
    'Bring the database schema up to date, then exit (stop an embedded service first: one process owns its folder).',
  options: {},
  positionals: [],
  async run(ctx) {
    const config = loadConfigOrThrow(ctx.io.env);
    const { storeTarget } = await import('../../runtime/server.js');
    const { migrate: applyMigrations, openDb } = await import('../../store/index.js');

    let applied: string[];
    try {
      if (config.databaseUrl === null) mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
      const db = await openDb(storeTarget(config));
      try {
        applied = await applyMigrations(db);
      } finally {
        await db.close();
      }
    } catch (err) {
      throw new CliError(`migrate failed: ${oneLine(err instanceof Error ? err.message : String(err))}`, EXIT_FAILURE);
    }
    ctx.output({ applied }, ({ applied: names }) =>
      names.length === 0 ? 'schema up to date' : names.map((name) => `applied ${name}`).join('\n'),
    );
  },
};

export const serviceCommands: Command[] = [serve, migrate];

import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './socket.js';

const run = promisify(execFile);
/** Bounds every pg_ctl and initdb call: a test never waits on a cluster for ever. */
const COMMAND_TIMEOUT_MS = 60_000;

/**
 * A PostgreSQL cluster of the test's own, in a temporary folder on a free port: a test may
 * restart or stop it, which it must never do to the server other test files share.
 */
export interface PrivatePostgres {
  readonly url: string;
  readonly port: number;
  restart(): Promise<void>;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the cluster and removes its folder. */
  destroy(): Promise<void>;
}

/** initdb and the server refuse to run as root: as root, they run as the `postgres` user. */
function asOwner(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

async function pg(command: string, args: string[]): Promise<void> {
  const [file, argv] = asOwner(command, args);
  await run(file, argv, { timeout: COMMAND_TIMEOUT_MS });
}

/** A temporary folder the server's user owns. */
async function ownedDir(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'dunwall-pg-'));
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  return dir;
}

/**
 * A cluster of the test's own. `from`: a hot standby of that cluster instead (a base
 * backup streaming from it, as a read replica is made).
 */
export async function privatePostgres(from?: PrivatePostgres): Promise<PrivatePostgres> {
  const dir = await ownedDir();
  const data = join(dir, 'data');
  const port = await freePort();
  if (from === undefined) await pg('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync']);
  else
    await pg('pg_basebackup', [
      '-D',
      data,
      '-h',
      '127.0.0.1',
      '-p',
      String(from.port),
      '-U',
      'postgres',
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ]);
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  const start = () => pg('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-w', 'start']);
  const stop = () => pg('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
  await start();
  let running = true;
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async restart() {
      await pg('pg_ctl', ['-D', data, '-o', options, '-l', join(dir, 'log'), '-m', 'fast', '-w', 'restart']);
    },
    async stop() {
      await stop();
      running = false;
    },
    async start() {
      await start();
      running = true;
    },
    async destroy() {
      if (running) await pg('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

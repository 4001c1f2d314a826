import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

/**
 * A tenant's own server as a process of its own (`node <args>` in its project folder), ready
 * once a line of its output matches `listening`, whose first group is the address it serves.
 * Its output is kept, for the assertions and for the error when it never listens.
 */
export interface AppProcess {
  child: ChildProcess;
  /** The address the matched line gave (`http://127.0.0.1:PORT`). */
  url: string;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
}

const STARTUP_TIMEOUT_MS = 60_000;

export function startAppProcess(
  args: string[],
  cwd: string,
  env: Record<string, string>,
  listening: RegExp,
): Promise<AppProcess> {
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const app: Omit<AppProcess, 'url'> = {
    child,
    output: () => out,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
  return new Promise<AppProcess>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the app did not listen within ${STARTUP_TIMEOUT_MS} ms:\n${out}`));
    }, STARTUP_TIMEOUT_MS);
    const read = (d: Buffer) => {
      out += d.toString();
      const url = listening.exec(out)?.[1];
      if (url !== undefined) {
        clearTimeout(timer);
        resolve({ ...app, url });
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`the app exited (code ${code}, signal ${signal}) before it listened:\n${out}`));
    });
  });
}

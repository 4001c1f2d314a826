import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { LEGACY_API, event, hostedInvoiceUrl, invoice, paymentIds, signed } from './stripe-fixtures.js';

/**
 * `dunwall serve` as its own process (one worker: the pid killed is the one that answers),
 * on a database URL, for tests that kill it outright; or the built service on the embedded
 * store. Ready once `/readyz` answers 200.
 */

export const REQUEST_TIMEOUT_MS = 15_000;
const STARTUP_TIMEOUT_MS = 30_000;
/** A new embedded store starts with an initdb, which a loaded 2-core machine takes a while over. */
const EMBEDDED_STARTUP_TIMEOUT_MS = 60_000;
const READY_POLL_MS = 50;

export interface ServiceProcess {
  child: ChildProcess;
  base: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const running = new Set<ServiceProcess>();

/** Kills every service process still running (SIGKILL: quicker, and no graceful stop is tested). */
export async function killAllServices(): Promise<void> {
  for (const service of running) service.child.kill('SIGKILL');
  await Promise.all([...running].map((s) => s.exited));
}

export async function startServiceProcess(
  databaseUrl: string,
  adminToken: string,
  env: Record<string, string> = {},
): Promise<ServiceProcess> {
  return launch(['--import', 'tsx', 'src/cli/main.ts', 'serve', '--workers', '1'], {
    DATABASE_URL: databaseUrl,
    DATABASE_READ_URL: '',
    DUNWALL_ADMIN_TOKEN: adminToken,
    ...env,
  });
}

/**
 * The built service as `npm start` runs it (`dist/src/runtime/server.js`: what `npm run build`
 * wrote, its tarballs included), on the embedded store in `dataDir`.
 */
export async function startBuiltServiceProcess(
  dataDir: string,
  adminToken: string,
  env: Record<string, string> = {},
): Promise<ServiceProcess> {
  return launch(
    ['dist/src/runtime/server.js'],
    { DATABASE_URL: '', DATABASE_READ_URL: '', DUNWALL_DATA_DIR: dataDir, DUNWALL_ADMIN_TOKEN: adminToken, ...env },
    EMBEDDED_STARTUP_TIMEOUT_MS,
  );
}

async function launch(
  args: string[],
  env: Record<string, string>,
  startupTimeoutMs = STARTUP_TIMEOUT_MS,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, args, {
    env: {
      ...process.env,
      DUNWALL_DEMO: '0',
      DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '0',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const service: ServiceProcess = {
    child,
    base: '',
    exited: new Promise((resolve) =>
      child.on('exit', (code, signal) => {
        running.delete(service);
        resolve({ code, signal });
      }),
    ),
  };
  running.add(service);
  const deadline = Date.now() + startupTimeoutMs;
  for (;;) {
    service.base ||= /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1] ?? '';
    if (service.base !== '') {
      const ready = await fetch(`${service.base}/readyz`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) return service;
    }
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`the service exited before it was ready:\n${out}`);
    if (Date.now() > deadline) throw new Error(`the service was not ready within ${startupTimeoutMs} ms:\n${out}`);
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
}

/** One call to the service's admin API with `token`, bounded in time. */
export function adminCall(
  base: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<Response> {
  return fetch(`${base}/admin/v1${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
}

/**
 * A signed `invoice.payment_failed` with no retry left (a lockout), posted to a service's Stripe
 * webhook as Stripe sends it. Answers the service's status and the invoice's pay link.
 */
export async function postPaymentFailed(
  base: string,
  slug: string,
  customer: string,
  secret: string,
  created = Math.floor(Date.now() / 1000),
): Promise<{ status: number; payUrl: string }> {
  const ids = paymentIds();
  const { payload, signature } = signed(
    event('invoice.payment_failed', invoice(customer, { api: LEGACY_API, ids, next_payment_attempt: null }), {
      created,
      api: LEGACY_API,
    }),
    secret,
    created,
  );
  const res = await fetch(`${base}/webhooks/stripe/${slug}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'stripe-signature': signature },
    body: payload,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  await res.arrayBuffer();
  return { status: res.status, payUrl: hostedInvoiceUrl(ids.invoice) };
}

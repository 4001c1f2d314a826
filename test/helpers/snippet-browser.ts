/**
 * What the snippet's browser suites share: the system's Chromium (never a downloaded one),
 * a running service with its admin API, and the snippet's tag for a tenant and a customer.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';
import { computeHmac } from '../../src/domain/hmac.js';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';

export const CHROMIUM = '/usr/bin/chromium';
export const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);
if (!haveBrowser) process.stderr.write(`\n*** ${CHROMIUM} not found: the browser suite is SKIPPED. ***\n\n`);

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

export interface Tenant {
  slug: string;
  publishable_key: string;
  hmac_secret: string;
}

export interface Service {
  running: Running;
  dataDir: string;
  admin(method: string, path: string, body?: unknown): Promise<unknown>;
  close(): Promise<void>;
}

/** The service on a free port, with an embedded store in a folder of its own; `env`: more settings. */
export async function startService(env: Record<string, string> = {}): Promise<Service> {
  const dataDir = mkdtempSync(join(tmpdir(), 'dunwall-browser-'));
  const running = await start(
    loadConfig({ ...env, DUNWALL_DATA_DIR: dataDir, PORT: '0', DUNWALL_DEMO: '0' }),
    createLogger('silent'),
  );
  return {
    running,
    dataDir,
    async admin(method, path, body) {
      const res = await fetch(`${running.url}/admin/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${readAdminTokenFile(dataDir)}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return res.json();
    },
    async close() {
      await running.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The snippet's tag: `async` unless `sync` (a synchronous script, as `data-hide-page` wants). */
export function snippetTag(
  src: string,
  t: Tenant,
  customer: string,
  extra: Record<string, string> = {},
  sync = false,
): string {
  const attrs: Record<string, string> = {
    'data-tenant': t.slug,
    'data-key': t.publishable_key,
    'data-customer': customer,
    'data-hmac': computeHmac(t.hmac_secret, customer),
    ...extra,
  };
  const rendered = Object.entries(attrs)
    .map(([k, v]) => `${k}="${v}"`)
    .join(' ');
  return `<script src="${src}" ${rendered}${sync ? '' : ' async'}></script>`;
}

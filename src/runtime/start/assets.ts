import type { Logger } from 'pino';
import { loadConsoleAssets } from '../../console/assets.js';
import type { ConsoleAssets } from '../../console/assets.js';
import { demoCurlCommands, readDemoPage, seedDemo, writeDemoPage } from '../../demo/index.js';
import type { DemoPage } from '../../demo/index.js';
import { loadPackageTarballs } from '../../http/package-tarballs.js';
import type { PackageTarballs } from '../../http/package-tarballs.js';
import { loadSnippet } from '../../http/snippet-asset.js';
import type { SnippetAsset } from '../../http/snippet-asset.js';
import type { Store } from '../../store/index.js';
import type { Config } from '../config.js';

/** What the app serves besides its API: the built files, and the demo's page when there is one. */
export interface Assets {
  snippet: SnippetAsset | null;
  console: ConsoleAssets | null;
  packages: PackageTarballs | null;
  demo: DemoPage | null;
  /** The demo, when this start seeded it. */
  seeded: DemoPage | null;
}

/**
 * The built snippet, console and packages (each said missing when not built), and the
 * demo: seeded before listening on a fresh embedded store, so that it answers from the
 * first request on.
 */
export async function loadAssets(config: Config, store: Store, log: Logger): Promise<Assets> {
  const seeded =
    store.maintenance.engine === 'embedded' && config.demo && (await store.tenants.countTenants()) === 0
      ? await seedDemo(store, new Date())
      : null;
  if (seeded) writeDemoPage(config.dataDir, seeded);
  const demo = seeded ?? (store.maintenance.engine === 'embedded' ? readDemoPage(config.dataDir) : null);
  const snippet = loadSnippet();
  if (snippet === null) log.warn('the browser snippet is not built: /snippet.js answers 404 until npm run build');
  const consoleAssets = loadConsoleAssets();
  if (consoleAssets === null) log.warn('the console is not built: /console answers 404 until npm run build');
  const packages = loadPackageTarballs();
  if (packages === null || packages.size === 0)
    log.warn('no package tarball is built: /packages/*.tgz answers 404 until npm run build');
  return { snippet, console: consoleAssets, packages, demo, seeded };
}

/** Where the demo is, once the server listens at `url`. */
export function announceDemo(url: string, assets: Assets, log: Logger): void {
  if (assets.seeded)
    for (const { customer, curl } of demoCurlCommands(url, assets.seeded)) log.info({ customer, curl }, 'demo lookup');
  if (assets.demo) log.info({ url: `${url}/demo` }, 'demo page');
}

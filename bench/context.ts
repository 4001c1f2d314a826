/**
 * What the bench's rows are given: the options, the store and its seed, the request lists,
 * the means to start a service and measure it, and where a row leaves what it found.
 */
import type { StoreTarget } from '../src/store/index.js';
import type { AnalyticsResult } from './analytics.js';
import type { BenchRequest, Entitlements, RequestFactory, Sizes } from './data.js';
import type { FeedResult } from './feed.js';
import type { InvalidationResult } from './invalidation.js';
import type { Generator } from './load.js';
import type { BenchOptions } from './options.js';
import type { Child } from './procs.js';
import type { MemoryResult, RowName, RowResult, SdkResult } from './report.js';
import type { StripeFeedResult } from './stripe-feed.js';

export type Server = { child: Child; url: string };
export type Skipped = { skipped: string };

export interface ExtrasResult {
  count: number;
  payUrlLength: number;
  bytesPerCustomer: number;
}

export interface PolicyResult {
  subscribers: number;
  gated: number;
  seconds: number;
  during: RowResult['load'];
}

/** What the rows that are not a load's found; null: not run. */
export interface Findings {
  memory: MemoryResult | null;
  extras: ExtrasResult | null;
  sdk: SdkResult | null;
  policy: PolicyResult | Skipped | null;
  analytics: AnalyticsResult | Skipped | null;
  invalidation: InvalidationResult | Skipped | null;
  feed: FeedResult | Skipped | null;
  sdkfeed: FeedResult | Skipped | null;
  stripefeed: StripeFeedResult[] | Skipped | null;
}

/** The bench's store: where it is, how a service and the peer reach it, and its database's backends. */
export interface BenchStore {
  target: StoreTarget;
  /** The PostgreSQL server of DATABASE_URL; null: the embedded store (or none). */
  serverUrl: string | null;
  env: Record<string, string>;
  peerEnv: Record<string, string>;
  label: string;
  /** PostgreSQL: the bench database's backends, whose CPU is the database's share of a row. */
  dbPids: () => Promise<number[]>;
}

/** The lookups the load rows ask, and the files the load generator reads them from. */
export interface Questions {
  factory: RequestFactory;
  sizes: Sizes;
  tiers: Entitlements;
  total: number;
  hot: BenchRequest[];
  unknown: BenchRequest[];
  zipf: { requests: BenchRequest[]; distinct: number };
  hotkey: BenchRequest[];
  files: { hot: string; unknown: string; zipf: string; hotkey: string };
  /** The baseline's answer: a hot answer of the hot set's mean size. */
  baselineBody: string;
}

export interface BenchContext {
  opts: BenchOptions;
  startedAt: Date;
  workDir: string;
  generator: Generator;
  store: BenchStore;
  questions: Questions;
  adminToken: string;
  /** `dunwall serve` on the bench store, ready; `workers` overrides --workers. */
  startService(name: string, overrides?: { env?: Record<string, string>; workers?: number }): Promise<Server>;
  /** A script of bench/ as a server, ready. */
  startScript(name: string, script: string, env: Record<string, string>): Promise<Server>;
  /** One load row against `server`: checked, warmed, measured, added to `results`. */
  measure(
    row: RowName,
    what: string,
    server: Server,
    requests: readonly BenchRequest[],
    linesFile: string,
  ): Promise<void>;
  results: RowResult[];
  findings: Findings;
  /** Workers the main service ran (0: one process), and whether --workers was passed, rejected or not given. */
  service: { observedWorkers: number; workersFlag: 'not given' | 'passed' | 'rejected' };
}

export const fmtN = (n: number) => n.toLocaleString('en-US');

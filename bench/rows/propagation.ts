/**
 * How fast a change reaches another instance on the same PostgreSQL database: a lookup
 * polled there, a long poll of the status feed, @dunwall/node following it, and Stripe
 * events through to @dunwall/node.
 */
import { Agent } from 'node:http';
import type { BenchContext } from '../context.js';
import { customerId, seededStatus, slugOf } from '../data.js';
import { measureFeed } from '../feed.js';
import { call } from '../http.js';
import { measureInvalidation } from '../invalidation.js';
import { cleanups, log, note } from '../lifecycle.js';
import { serverProcesses, stopChild } from '../procs.js';
import { feedLine, sdkFeedLine, stripeFeedLines } from '../report.js';
import { measureSdkFeed } from '../sdk-feed.js';
import { createDatabase, dropDatabase } from '../seed.js';
import { measureStripeFeed } from '../stripe-feed.js';
import type { StripeFeedResult } from '../stripe-feed.js';

const INVALIDATION_TRIALS = 100;
const FEED_TRIALS = 100;
/** The stripefeed row: rounds, each of this many customers (a failure, then its payment). */
const STRIPE_FEED_ROUNDS = 3;
const STRIPE_FEED_CUSTOMERS = 20;

export async function invalidationRow(ctx: BenchContext): Promise<void> {
  const { startService, adminToken } = ctx;
  const { factory } = ctx.questions;
  const a = await startService('instance-a');
  try {
    const b = await startService('instance-b');
    try {
      log(`invalidation: ${INVALIDATION_TRIALS} changes through ${a.url}, polled on ${b.url}`);
      const invalidation = await measureInvalidation({
        a: a.url,
        b: b.url,
        adminToken,
        subjects: factory.hot(INVALIDATION_TRIALS, 7),
        slugOf,
        trials: INVALIDATION_TRIALS,
        connections: Math.max(1, 2 * serverProcesses(b.child).workers),
        log,
      });
      ctx.findings.invalidation = invalidation;
      for (const e of invalidation.errors.slice(0, 3)) note(`invalidation: ${e}`);
    } finally {
      await stopChild(b.child);
    }
  } finally {
    await stopChild(a.child);
  }
}

export async function feedRow(ctx: BenchContext): Promise<void> {
  const { startService, adminToken } = ctx;
  const { factory } = ctx.questions;
  // A: the service, written through its admin API. B: a second service on the same
  // database, a tenant's long poll held on it with the tenant's secret key.
  const a = await startService('feed-a');
  try {
    const b = await startService('feed-b');
    try {
      log(`feed: ${FEED_TRIALS} changes through ${a.url}, each awaited by a long poll on ${b.url}`);
      const feed = await measureFeed({
        a: a.url,
        b: b.url,
        adminToken,
        subjects: factory.hot(FEED_TRIALS, 11),
        slugOf,
        trials: FEED_TRIALS,
        log,
      });
      ctx.findings.feed = feed;
      for (const e of feed.errors.slice(0, 3)) note(`feed: ${e}`);
      log(feedLine(feed));
    } finally {
      await stopChild(b.child);
    }
  } finally {
    await stopChild(a.child);
  }
}

export async function sdkFeedRow(ctx: BenchContext): Promise<void> {
  const { startService, adminToken } = ctx;
  const { sizes } = ctx.questions;
  // A and B: the service twice on one database; @dunwall/node in this process follows B
  // with a secret key of the first tenant, whose subscribers are changed through A.
  const a = await startService('sdkfeed-a');
  try {
    const b = await startService('sdkfeed-b');
    try {
      const subjects = Array.from({ length: Math.min(FEED_TRIALS, sizes.perTenant) }, (_, i) => ({
        customerId: customerId(1, i + 1),
        status: seededStatus(i + 1),
      }));
      log(`sdkfeed: ${FEED_TRIALS} changes through ${a.url}, each awaited in a copy following ${b.url}`);
      const sdkfeed = await measureSdkFeed({
        a: a.url,
        b: b.url,
        adminToken,
        slug: slugOf(1),
        subjects,
        trials: FEED_TRIALS,
        log,
      });
      ctx.findings.sdkfeed = sdkfeed;
      for (const e of sdkfeed.errors.slice(0, 3)) note(`sdkfeed: ${e}`);
      log(sdkFeedLine(sdkfeed));
    } finally {
      await stopChild(b.child);
    }
  } finally {
    await stopChild(a.child);
  }
}

export async function stripeFeedRow(ctx: BenchContext): Promise<void> {
  const { startService, adminToken, startedAt } = ctx;
  const { serverUrl } = ctx.store;
  if (serverUrl === null) throw new Error('stripefeed needs PostgreSQL (DATABASE_URL)');
  // A database of its own, as a new deployment has it: migrated by the service's first
  // start, never analyzed (the main store is VACUUM ANALYZEd after its seed, which hid
  // the cost of the feed's read on a fresh database).
  const name = `dunwall_bench_stripe_${startedAt.toISOString().replace(/\D/g, '').slice(0, 17)}`;
  const env = { DATABASE_URL: await createDatabase(serverUrl, name) };
  cleanups.push(() => dropDatabase(serverUrl, name));
  const a = await startService('stripefeed-a', { env });
  try {
    const b = await startService('stripefeed-b', { env });
    try {
      const slug = 'bench-stripe';
      const made = await call(
        new Agent(),
        new URL(a.url),
        'POST',
        '/admin/v1/tenants',
        { authorization: `Bearer ${adminToken}` },
        JSON.stringify({ slug }),
      );
      if (made.status !== 201)
        throw new Error(`stripefeed: tenant not created: ${made.status} ${made.body.slice(0, 200)}`);
      const rounds: StripeFeedResult[] = [];
      for (let r = 0; r < STRIPE_FEED_ROUNDS; r += 1) {
        log(
          `stripefeed: round ${r + 1}/${STRIPE_FEED_ROUNDS}, ${STRIPE_FEED_CUSTOMERS} customers through ${a.url}, each awaited in a copy following ${b.url}`,
        );
        const round = await measureStripeFeed({
          a: a.url,
          b: b.url,
          adminToken,
          slug,
          trials: STRIPE_FEED_CUSTOMERS,
          log,
        });
        for (const e of round.errors.slice(0, 3)) note(`stripefeed: ${e}`);
        rounds.push(round);
      }
      ctx.findings.stripefeed = rounds;
      for (const line of stripeFeedLines(rounds)) log(line);
    } finally {
      await stopChild(b.child);
    }
  } finally {
    await stopChild(a.child);
  }
}

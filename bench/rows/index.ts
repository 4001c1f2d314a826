/**
 * Every row of the bench, in the order they run: a row (or a group of rows sharing one
 * service) names the rows of `--rows` it answers, whether it needs the service built, and
 * the function that sets it up, runs it and reports it. A new row is a line here and a
 * function in a module of this folder.
 */
import type { BenchContext, Findings } from '../context.js';
import type { Row } from '../options.js';
import {
  baselineRow,
  dunningRow,
  middlewareRows,
  oneProcessRows,
  peerRow,
  serviceRows,
  zipfColdRow,
} from './lookup.js';
import { extrasRow, memoryRow, sdkRow } from './memory.js';
import { feedRow, invalidationRow, sdkFeedRow, stripeFeedRow } from './propagation.js';
import { analyticsRow, policyRow } from './tenant-scale.js';

export interface BenchRow {
  /** Its name in the notes when it fails. */
  name: string;
  /** The rows of `--rows` it answers: it runs when one of them is asked for. */
  rows: readonly Row[];
  /** It starts `dunwall serve`: dist/ is built first when older than src/. */
  service: boolean;
  /** On the embedded store: not run, and its finding says why; absent: it runs on both. */
  postgresOnly?: { finding: keyof Findings; why: string };
  run(ctx: BenchContext): Promise<void>;
}

const SECOND_INSTANCE = 'embedded store: one process owns it, so there is no second instance';

export const BENCH_ROWS: readonly BenchRow[] = [
  { name: 'baseline', rows: ['baseline'], service: false, run: baselineRow },
  { name: 'middleware', rows: ['middleware'], service: false, run: middlewareRows },
  { name: 'hot1', rows: ['hot1', 'writes', 'hooks'], service: true, run: oneProcessRows },
  {
    name: 'service',
    rows: ['hot', 'secretkey', 'unknown', 'zipf', 'hotkey', 'drip'],
    service: true,
    run: serviceRows,
  },
  { name: 'dunning', rows: ['dunning', 'dunninglinks'], service: true, run: dunningRow },
  { name: 'zipfcold', rows: ['zipfcold'], service: true, run: zipfColdRow },
  { name: 'peer', rows: ['peer'], service: false, run: peerRow },
  { name: 'memory', rows: ['memory'], service: true, run: memoryRow },
  { name: 'extras', rows: ['extras'], service: false, run: extrasRow },
  { name: 'sdk', rows: ['sdk'], service: false, run: sdkRow },
  {
    name: 'policy',
    rows: ['policy'],
    service: true,
    postgresOnly: {
      finding: 'policy',
      why: 'embedded store: the million-subscriber policy change is measured on PostgreSQL (DATABASE_URL)',
    },
    run: policyRow,
  },
  {
    name: 'analytics',
    rows: ['analytics'],
    service: true,
    postgresOnly: {
      finding: 'analytics',
      why: 'embedded store: the million-subscriber analytics are measured on PostgreSQL (DATABASE_URL)',
    },
    run: analyticsRow,
  },
  {
    name: 'invalidation',
    rows: ['invalidation'],
    service: true,
    postgresOnly: { finding: 'invalidation', why: SECOND_INSTANCE },
    run: invalidationRow,
  },
  {
    name: 'feed',
    rows: ['feed'],
    service: true,
    postgresOnly: { finding: 'feed', why: SECOND_INSTANCE },
    run: feedRow,
  },
  {
    name: 'sdkfeed',
    rows: ['sdkfeed'],
    service: true,
    postgresOnly: { finding: 'sdkfeed', why: SECOND_INSTANCE },
    run: sdkFeedRow,
  },
  {
    name: 'stripefeed',
    rows: ['stripefeed'],
    service: true,
    postgresOnly: { finding: 'stripefeed', why: SECOND_INSTANCE },
    run: stripeFeedRow,
  },
];

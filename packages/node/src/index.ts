/**
 * `@dunwall/node`: a tenant's server holds its non-active subscribers in memory, following
 * Dunwall's status feed, and answers `status()` synchronously; the middleware gates requests
 * with it.
 */
export { createDunwall } from './dunwall.js';
export { DunwallReadyError } from './follower.js';
export type {
  AnswerSource,
  BillingStatus,
  BootstrapAnswer,
  BootstrapEntitlements,
  Dunwall,
  DunwallCopy,
  DunwallOptions,
  GuardOptions,
  Identity,
  LockoutProblem,
  PageBootstrap,
  ReadyFailure,
  StatusAnswer,
} from './types.js';

// The middleware, one module per framework (Express, Fastify, Hono, the Fetch API), none imported:
export * from './middleware/index.js';

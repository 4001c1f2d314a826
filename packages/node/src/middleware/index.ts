/**
 * Server-side enforcement: the same check for Express, Fastify, Hono and the Fetch API,
 * answering from a `Dunwall` copy (`createDunwall`), never from a request to Dunwall.
 */
export { DEFAULT_ALLOW, DEFAULT_EXEMPT } from './guard.js';
export type { MiddlewareOptions } from './guard.js';
export { dunwallExpress } from './express.js';
export type { NodeLikeRequest, NodeLikeResponse, NodeMiddleware } from './express.js';
export { dunwallFastify } from './fastify.js';
export type {
  DunwallFastifyOptions,
  DunwallFastifyPlugin,
  FastifyLikeInstance,
  FastifyLikeReply,
  FastifyLikeRequest,
} from './fastify.js';
export { dunwallHono } from './hono.js';
export type { HonoLikeContext, HonoMiddleware } from './hono.js';
export { checkRequest, withDunwall } from './fetch.js';

import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { App } from '../app-instance.js';
import { eventShapeProblem, MAX_AHEAD_S } from '../../domain/stripe/event.js';
import { checkStripeDelivery, STRIPE_SIGNATURE_TOLERANCE_S } from '../../domain/stripe/signature.js';
import type { SignatureFailure } from '../../domain/stripe/signature.js';
import { RELEVANT_EVENT_TYPES } from '../../domain/stripe/derive.js';
import { NOTICE_EVENT_TYPES } from '../../domain/notices.js';
import type { StripeEventLike } from '../../domain/stripe/derive.js';
import { isValidSlug } from '../../domain/lookup.js';
import { isCurrent } from '../../domain/types.js';
import type { Mode } from '../../domain/types.js';
import { sendProblem } from '../problems.js';
import { ProblemRef, StripeEventOutcome } from '../schemas.js';
import { takeInStripeEventWithNotices } from '../../services/stripe-events.js';
import type { NoticeIntake } from '../../services/stripe-events.js';
import type { StripeEventStore } from '../../store/index.js';
import type { ReadModel } from '../../readmodel/index.js';
import { countFailures, guardAddress } from '../rate-limit.js';
import type { RateLimiter } from '../rate-limit.js';
import type { StripeEventMetrics } from '../stripe-event-metrics.js';
import type { StripeIntake } from '../stripe-intake.js';

export const STRIPE_EVENT_BODY_LIMIT_BYTES = 1024 * 1024;

export interface StripeIntakeOptions {
  stripe: StripeEventStore;
  /** Tells an unknown slug without a query: a flood of made-up slugs costs the database nothing. */
  model: ReadModel;
  now: () => number;
  /** Rate limits; null: none. */
  limiter: RateLimiter | null;
  /** Each Stripe event's type and outcome, and the time to record it; absent: not counted. */
  metrics?: StripeEventMetrics;
  /** The tenant's intake counters (received, refused); absent: not counted. */
  intake?: StripeIntake | null;
  /** The notices the events tell of (docs/notices.md); absent: not learned. */
  notices?: NoticeIntake | null;
}

/** The event types Dunwall reads (statuses and notices): each is a label value of its own. */
const LABELLED_TYPES: ReadonlySet<string> = new Set<string>([...RELEVANT_EVENT_TYPES, ...NOTICE_EVENT_TYPES]);

const STRIPE_INTAKE_ROUTE = '/webhooks/stripe/:tenantSlug';
const slugOf = (req: FastifyRequest): string => (req.params as { tenantSlug?: string } | undefined)?.tenantSlug ?? '';
/** A tenant's webhook failures from one address are counted apart from the address's others. */
const tenantFailureKey = (address: string, slug: string): string => `${address}|${slug}`;

const WebhookAnswer = Type.Object({
  received: Type.Literal(true),
  outcome: StripeEventOutcome,
});

type Refusal = SignatureFailure | 'no_secret_configured' | 'missing_header';

const REFUSALS: Readonly<Record<Refusal, string>> = {
  no_secret_configured: 'the tenant has no Stripe signing secret configured',
  missing_header: 'the Stripe-Signature header is missing',
  malformed_header: 'the Stripe-Signature header has no t= timestamp or no v1= signature',
  timestamp_outside_tolerance: `the signature's timestamp is more than ${STRIPE_SIGNATURE_TOLERANCE_S} s old`,
  timestamp_ahead: `the signature's timestamp is more than ${MAX_AHEAD_S} s ahead of this clock`,
  no_matching_secret: "the signature did not match any of the tenant's signing secrets",
  not_json: 'the signed body is not JSON',
};

/**
 * Says in the service log why a delivery got 400 invalid_signature, naming the tenant, so
 * that an operator can tell a wrong signing secret from a replay. Never the header's value
 * nor a secret: only the reason and how many secrets were tried.
 */
function refused(req: FastifyRequest, slug: string, why: Refusal, secrets: number): void {
  req.log.warn(
    { tenant: slug, reason: why, signingSecrets: secrets },
    `stripe webhook refused for tenant ${slug}: ${REFUSALS[why]}`,
  );
}

/**
 * `POST /webhooks/stripe/:tenantSlug` (docs/stripe.md, the webhook). The body is kept raw, as
 * the signature covers its exact bytes. The 2xx is sent only after the event and its
 * change have committed, so that Stripe retries anything not stored.
 */
/** The mode an event says it is of (`livemode`); null: it does not say (then the secret that verified it decides). */
function modeOfEvent(event: unknown): Mode | null {
  const livemode = typeof event === 'object' && event !== null ? (event as { livemode?: unknown }).livemode : undefined;
  return livemode === true ? 'live' : livemode === false ? 'test' : null;
}

export async function stripeIntakeRoutes(app: App, opts: StripeIntakeOptions): Promise<void> {
  const { stripe, now } = opts;
  const intake = opts.intake ?? null;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: STRIPE_EVENT_BODY_LIMIT_BYTES }, (_req, body, done) =>
    done(null, body),
  );

  const { limiter, model } = opts;
  // An unknown slug (404) is a guess, counted against the address as the lookup counts it:
  // the webhook tells no more about which slugs exist than the lookup does. A signature
  // that does not verify (400) is counted against the address for that tenant only, so
  // that one tenant's wrong signing secret cannot get Stripe's addresses refused for all.
  const limited = limiter
    ? {
        onRequest: guardAddress(limiter, null, (req, address) => tenantFailureKey(address, slugOf(req))),
        onSend: countFailures(limiter, [400, 404], (req, reply, address) =>
          reply.statusCode === 404 ? address : tenantFailureKey(address, slugOf(req)),
        ),
      }
    : {};

  app.post(
    STRIPE_INTAKE_ROUTE,
    {
      ...limited,
      bodyLimit: STRIPE_EVENT_BODY_LIMIT_BYTES,
      schema: {
        operationId: 'receiveStripeEvent',
        summary: "Receives the tenant's Stripe events",
        description: `Verified with the tenant's signing secret(s), ${STRIPE_SIGNATURE_TOLERANCE_S} s tolerance.`,
        tags: ['webhooks'],
        // Authenticated by the signature of its body, not by a bearer token.
        security: [],
        params: Type.Object({ tenantSlug: Type.String() }),
        headers: Type.Object({
          'stripe-signature': Type.String({
            description: 't=<unix time>,v1=<hex HMAC-SHA256>: the signature Stripe sends',
          }),
        }),
        response: {
          200: WebhookAnswer,
          400: ProblemRef,
          404: ProblemRef,
          413: ProblemRef,
          429: ProblemRef,
          503: ProblemRef,
        },
      },
      validatorCompiler: () => () => true,
    },
    async (req, reply) => {
      const slug = (req.params as { tenantSlug: string }).tenantSlug;
      const nowMs = now();
      let signing: Awaited<ReturnType<StripeEventStore['getStripeSigningSecrets']>>;
      try {
        // The read model knows every tenant (it may lag a new one by milliseconds: Stripe retries).
        // One whose lookup secrets cannot be read still receives its events: its signing
        // secrets are read on their own, and its statuses must not fall behind meanwhile.
        const known = isValidSlug(slug) && (model.tenant(slug) !== null || model.unreadable(slug) !== null);
        signing = known ? await stripe.getStripeSigningSecrets(slug) : null;
      } catch (err) {
        req.log.warn({ err: { message: (err as Error).message } }, 'stripe webhook: store unavailable');
        return sendProblem(reply, 'store_unavailable');
      }
      if (signing === null) return sendProblem(reply, 'tenant_not_found');
      // From here on the tenant exists: what comes of the delivery is counted for it.
      const tenantId = signing.tenantId;
      const refuse = (why: Refusal, secrets: number): void => {
        intake?.count(tenantId, 'refused_signature', nowMs);
        refused(req, slug, why, secrets);
      };

      const header = req.headers['stripe-signature'];
      const raw = req.body;
      // Each mode has its signing secret (docs/test-mode.md): an event goes to the space of
      // its mode, verified with that mode's secret.
      const current = (mode: Mode) =>
        signing.spaces[mode].secrets.filter((s) => isCurrent(s, nowMs)).map((s) => s.value);
      const bySpace = { live: current('live'), test: current('test') };
      const secretCount = bySpace.live.length + bySpace.test.length;
      if (secretCount === 0) {
        refuse('no_secret_configured', 0);
        return sendProblem(reply, 'invalid_signature', 'This tenant has no Stripe signing secret configured.');
      }
      if (typeof header !== 'string' || !Buffer.isBuffer(raw)) {
        refuse('missing_header', secretCount);
        return sendProblem(reply, 'invalid_signature', 'The Stripe-Signature header is missing.');
      }
      let mode: Mode = 'live';
      let checked = checkStripeDelivery(raw, header, bySpace.live, nowMs);
      if (!checked.ok && checked.why === 'no_matching_secret' && bySpace.test.length > 0) {
        mode = 'test';
        checked = checkStripeDelivery(raw, header, bySpace.test, nowMs);
      }
      // Signed with one mode's secret, it must be of that mode: a live event never lands in test, nor the reverse.
      if (checked.ok && modeOfEvent(checked.event) !== null && modeOfEvent(checked.event) !== mode)
        checked = { ok: false, why: 'no_matching_secret' };
      if (!checked.ok) {
        refuse(checked.why, secretCount);
        return sendProblem(reply, 'invalid_signature');
      }
      const spaceId = signing.spaces[mode].spaceId;
      intake?.count(spaceId, 'received', nowMs);
      const event = checked.event;
      // An event dated more than MAX_AHEAD_S ahead is refused, as by the replay.
      const problem = eventShapeProblem(event, nowMs);
      if (problem !== null) return sendProblem(reply, 'invalid_request', problem);

      const e = event as StripeEventLike;
      // Any type Stripe may send is a label value only if Dunwall reads it: the set stays small.
      const typeLabel = LABELLED_TYPES.has(e.type) ? e.type : 'other';
      const start = process.hrtime.bigint();
      try {
        const { outcome } = await takeInStripeEventWithNotices(
          stripe,
          opts.notices ?? null,
          { id: spaceId, livemode: mode === 'live' },
          e,
          new Date(nowMs),
        );
        opts.metrics?.recordSeconds(Number(process.hrtime.bigint() - start) / 1e9);
        opts.metrics?.stripeEvent(typeLabel, outcome);
        req.log.info({ tenant: slug, mode, eventId: e.id, eventType: e.type, outcome }, 'stripe event');
        return { received: true as const, outcome };
      } catch (err) {
        opts.metrics?.stripeEvent(typeLabel, 'failed');
        // Whatever failed, nothing was committed: a non-2xx makes Stripe deliver it again.
        req.log.error(
          { err: { message: (err as Error).message, code: (err as { code?: unknown }).code }, eventId: e.id },
          'stripe event not stored',
        );
        return sendProblem(reply, 'store_unavailable');
      }
    },
  );
}

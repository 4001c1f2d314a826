import { SecretBox } from '../secrets/cipher.js';
import { SqlAnalytics } from './analytics/analytics.js';
import type { Analytics } from './analytics/analytics.js';
import { SqlChangeLog } from './changes/change-log.js';
import { Commits } from './changes/commits.js';
import type { ChangeLog } from './changes/types.js';
import type { Db } from './db/db.js';
import { SqlEndpoints } from './downstream/endpoints.js';
import { SqlOutbox } from './downstream/outbox.js';
import { SqlDeliveryQueue } from './downstream/queue.js';
import type { DownstreamStore } from './downstream/types.js';
import { SqlStatusFeed } from './feed/status-feed.js';
import type { StatusFeed } from './feed/types.js';
import { SqlKeys } from './keys/keys.js';
import type { KeyStore } from './keys/types.js';
import { SqlLinks } from './links/links.js';
import type { CustomerLinks } from './links/types.js';
import { SqlMaintenance } from './maintenance/maintenance.js';
import type { Maintenance } from './maintenance/types.js';
import { SqlSessions } from './sessions/console-sessions.js';
import type { ConsoleSessionStore } from './sessions/console-sessions.js';
import { SqlStripe } from './stripe/stripe.js';
import type { StripeStore } from './stripe/types.js';
import { SqlStripeApiKeys } from './stripe-keys/stripe-api-keys.js';
import type { StripeApiKeyStore } from './stripe-keys/types.js';
import { SqlSubscribers } from './subscribers/subscribers.js';
import type { SubscriberStore } from './subscribers/types.js';
import { SqlTenants } from './tenants/tenants.js';
import type { TenantStore } from './tenants/types.js';

/**
 * Everything Dunwall keeps, as one role per field: each consumer takes the roles it uses (the
 * read model the change log, the deliverer the queue, the policy clock the maintenance), so
 * that its test fakes those alone. The lookup reads none of it directly: each process holds
 * a copy of what it needs (src/readmodel/).
 */
export interface Store {
  tenants: TenantStore;
  subscribers: SubscriberStore;
  /** The Stripe intake: signing secrets, events and their effects, the intake's counters. */
  stripe: StripeStore;
  /** The change log every process's read model follows. */
  changes: ChangeLog;
  /** The status feed tenants read. */
  feed: StatusFeed;
  /** Downstream messages: the tenants' endpoints, the outbox, and the delivery queue. */
  downstream: DownstreamStore;
  /** A tenant's credentials and secret keys. */
  keys: KeyStore;
  /** Each data space's Stripe API key, sealed. */
  stripeApiKeys: StripeApiKeyStore;
  /** Console sessions. */
  sessions: ConsoleSessionStore;
  analytics: Analytics;
  /** Pay and card links through Dunwall: their tokens, their opens, their renewal. */
  links: CustomerLinks;
  /** What runs on a clock: pruning, scheduled lockouts, policy sweeps, health. */
  maintenance: Maintenance;
  close(): Promise<void>;
}

/**
 * The roles over one open database, in plain PostgreSQL SQL, the same on a server and on
 * PGlite. `secrets` seals HMAC and signing secrets on write and opens them on read; default:
 * clear text. Every role that commits a change the lookup may answer differently tells the
 * change log's readers of this instance at once.
 */
export function storeOver(db: Db, options: { secrets?: SecretBox } = {}): Store {
  const secrets = options.secrets ?? SecretBox.clear();
  const commits = new Commits();
  return {
    tenants: new SqlTenants(db, secrets, commits),
    subscribers: new SqlSubscribers(db, commits),
    stripe: new SqlStripe(db, secrets, commits),
    changes: new SqlChangeLog(db, secrets, commits),
    feed: new SqlStatusFeed(db),
    downstream: {
      endpoints: new SqlEndpoints(db, secrets),
      outbox: new SqlOutbox(db),
      queue: new SqlDeliveryQueue(db, secrets),
    },
    keys: new SqlKeys(db, secrets, commits),
    stripeApiKeys: new SqlStripeApiKeys(db, secrets, commits),
    sessions: new SqlSessions(db),
    analytics: new SqlAnalytics(db),
    links: new SqlLinks(db, commits),
    maintenance: new SqlMaintenance(db, commits),
    close: () => db.close(),
  };
}

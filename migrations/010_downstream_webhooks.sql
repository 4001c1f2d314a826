-- Downstream webhooks (docs/webhooks.md): a tenant's endpoints, the events its subscribers'
-- changes raise (an outbox written in the transaction of the change), one delivery per event
-- and endpoint (the queue), and the attempts made.

CREATE TABLE webhook_endpoints (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- The endpoint's public id (ep_...).
  uid text NOT NULL UNIQUE,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  url text NOT NULL,
  description text NOT NULL DEFAULT '',
  -- NULL: every event type.
  event_types text[],
  enabled boolean NOT NULL DEFAULT true,
  -- Why it is disabled: 'admin', 'gone' (it answered 410) or 'failing' (it failed for days).
  disabled_reason text CHECK (disabled_reason IN ('admin', 'gone', 'failing')),
  disabled_detail text,
  disabled_at timestamptz,
  -- Since when every attempt failed; NULL after a success.
  failing_since timestamptz,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CHECK (enabled = (disabled_reason IS NULL))
);
CREATE INDEX webhook_endpoints_tenant ON webhook_endpoints (tenant_id, id);

-- Signing secrets live with the tenant's other secrets (sealed alike), one endpoint each.
ALTER TABLE tenant_credentials ADD COLUMN endpoint_id integer REFERENCES webhook_endpoints (id) ON DELETE CASCADE;
ALTER TABLE tenant_credentials DROP CONSTRAINT tenant_credentials_kind_check;
ALTER TABLE tenant_credentials ADD CONSTRAINT tenant_credentials_kind_check
  CHECK (kind IN ('publishable_key', 'hmac_secret', 'stripe_webhook_secret', 'webhook_signing_secret'));
ALTER TABLE tenant_credentials ADD CONSTRAINT tenant_credentials_endpoint_check
  CHECK ((kind = 'webhook_signing_secret') = (endpoint_id IS NOT NULL));
CREATE INDEX tenant_credentials_endpoint ON tenant_credentials (endpoint_id) WHERE endpoint_id IS NOT NULL;

-- The last sequence number given to each customer's events: receivers order by it.
CREATE TABLE webhook_sequences (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  last_sequence bigint NOT NULL,
  PRIMARY KEY (tenant_id, processor_customer_id)
);

-- One row per event (the message): its id is the webhook-id of every delivery of it.
CREATE TABLE webhook_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  uid text NOT NULL UNIQUE,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  type text NOT NULL,
  processor_customer_id text NOT NULL,
  sequence bigint NOT NULL,
  -- The body sent, byte for byte: what is signed.
  payload text NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX webhook_events_tenant_created ON webhook_events (tenant_id, created_at);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

-- The queue: one row per event and endpoint. A claim moves next_attempt_at past the attempt's
-- lease (leased_until), so that no other instance takes the row while it is under way, and an
-- instance that dies mid-attempt leaves it to be taken again once the lease ends.
CREATE TABLE webhook_deliveries (
  endpoint_id integer NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id bigint NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  -- 'infinity': parked while its endpoint is disabled.
  next_attempt_at timestamptz NOT NULL,
  leased_until timestamptz,
  -- The claim that holds the lease: only it records the attempt's result.
  lease_token text,
  -- Retries stop at this time: the message failed.
  give_up_at timestamptz NOT NULL,
  last_attempt_at timestamptz,
  last_status integer,
  last_error text,
  created_at timestamptz NOT NULL,
  completed_at timestamptz,
  PRIMARY KEY (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_pending_created ON webhook_deliveries (created_at) WHERE state = 'pending';
-- Whether anything is due at all: read at every wake of every instance.
CREATE INDEX webhook_deliveries_pending_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
-- The attempts under way (leased rows), counted against each endpoint's cap at every claim.
CREATE INDEX webhook_deliveries_leased ON webhook_deliveries (endpoint_id, leased_until) WHERE leased_until IS NOT NULL;

CREATE TABLE webhook_attempts (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  endpoint_id integer NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id bigint NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
  attempted_at timestamptz NOT NULL,
  status_code integer,
  latency_ms integer NOT NULL,
  -- delivered, failed (retried), gone (410), refused (the address is not allowed), gave_up
  outcome text NOT NULL,
  error text
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_attempted_at ON webhook_attempts (attempted_at);

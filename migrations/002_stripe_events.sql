-- The position of the change that set a subscriber's status: (status_at, status_rank,
-- status_event_id). A later change applies only when its position comes after it.
ALTER TABLE subscribers
  ADD COLUMN status_rank smallint NOT NULL DEFAULT 0,
  ADD COLUMN status_event_id text NOT NULL DEFAULT '';

-- A removed subscriber keeps its position here, so that an older event delivered late
-- does not bring the record back.
CREATE TABLE subscriber_tombstones (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  removed_at timestamptz NOT NULL,
  rank smallint NOT NULL,
  event_id text NOT NULL,
  PRIMARY KEY (tenant_id, processor_customer_id)
);

-- Every relevant Stripe event received, once per tenant and id (redeliveries are found
-- here), with the fields its derivation used and what it did.
CREATE TABLE stripe_events (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  event_id text NOT NULL,
  event_type text NOT NULL,
  processor_customer_id text,
  created timestamptz NOT NULL,
  facts jsonb NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('applied', 'stale', 'ignored')),
  received_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, event_id)
);
CREATE INDEX stripe_events_customer ON stripe_events (tenant_id, processor_customer_id, created);

-- Statuses follow dunning episodes (docs/reference.md#statuses-and-their-derivation). `subscribers` stays what the
-- lookup reads: the customer's status, recomputed in the transaction of every change from
-- its episodes and its override.

-- One row per episode: a subscription (sub_...), or an automatically collected invoice of
-- no subscription (in_...). (at, rank, event_id) is the position of the event that set it.
CREATE TABLE subscriber_episodes (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  episode text NOT NULL,
  state text NOT NULL CHECK (state IN ('warning', 'lockout', 'resolved')),
  reason text NOT NULL,
  decline_code text,
  at timestamptz NOT NULL,
  rank smallint NOT NULL,
  event_id text NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, processor_customer_id, episode)
);

-- What invoice events told of each invoice: enough for a decline that names only its
-- payment to find its episode, whichever of the two arrives first.
CREATE TABLE stripe_invoices (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  invoice_id text NOT NULL,
  processor_customer_id text NOT NULL,
  episode text NOT NULL,
  auto_collected boolean NOT NULL,
  first_invoice boolean NOT NULL,
  PRIMARY KEY (tenant_id, invoice_id)
);

-- Payment intent or charge -> its invoice, from either side's payload.
CREATE TABLE stripe_payment_links (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  payment_id text NOT NULL,
  invoice_id text NOT NULL,
  PRIMARY KEY (tenant_id, payment_id)
);
CREATE INDEX stripe_payment_links_invoice ON stripe_payment_links (tenant_id, invoice_id);

-- Every decline of a payment intent or charge, one row per payment id it names; it gates
-- only once linked to an automatically collected invoice.
CREATE TABLE stripe_declines (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  payment_id text NOT NULL,
  event_id text NOT NULL,
  processor_customer_id text NOT NULL,
  created timestamptz NOT NULL,
  hard boolean NOT NULL,
  decline_code text,
  PRIMARY KEY (tenant_id, payment_id, event_id)
);

-- An admin's status (and, after this migration, every status written by the previous
-- version) stands as of `overridden_at` until a Stripe event dated in a later second
-- changes one of the customer's episodes. NULL: the status is derived from the episodes.
ALTER TABLE subscribers ADD COLUMN overridden_at timestamptz;
UPDATE subscribers SET overridden_at = status_at;
ALTER TABLE subscribers DROP COLUMN status_rank, DROP COLUMN status_event_id;

-- Which episode a change came through, and the events that changed nothing by themselves
-- (a decline of a one-off payment) kept for the record.
ALTER TABLE subscriber_history
  ADD COLUMN episode text,
  ADD COLUMN effect text NOT NULL DEFAULT 'changed' CHECK (effect IN ('changed', 'removed', 'none'));
UPDATE subscriber_history SET effect = 'removed' WHERE status IS NULL;

-- A decline waiting for its invoice is kept as `pending`.
ALTER TABLE stripe_events DROP CONSTRAINT stripe_events_outcome_check;
ALTER TABLE stripe_events ADD CONSTRAINT stripe_events_outcome_check CHECK (outcome IN ('applied', 'stale', 'ignored', 'pending'));

-- What reached each tenant's Stripe intake, per UTC day (docs/operations.md, Stripe intake
-- counters): `received` (a webhook delivery whose signature verified, whatever came of it),
-- `refused_signature`, `refused_livemode` and `replayed` (events the operator's replay took).
-- Counted in memory by each process and added here in batches, one row per tenant, day and
-- kind, so that a delivery, refused or not, never writes by itself. `last_at`: the latest
-- of them, by the clock of the process that counted it.
CREATE TABLE stripe_intake (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  day date NOT NULL,
  kind text NOT NULL CHECK (kind IN ('received', 'refused_signature', 'refused_livemode', 'replayed')),
  count bigint NOT NULL CHECK (count >= 0),
  last_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, day, kind)
);
-- Retention prunes by day, oldest first.
CREATE INDEX stripe_intake_day ON stripe_intake (day);

-- A tenant's health counts the deliveries that failed (gave up) lately: few rows, read by
-- endpoint and time without going through every delivery the endpoint ever had.
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (endpoint_id, completed_at) WHERE state = 'failed';

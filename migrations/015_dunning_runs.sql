-- Dunning runs, for the recovery analytics (docs/api.md). An episode row keeps only its
-- current run and its last resolution, so a customer who failed, paid and failed again
-- would lose the first run. One row per run: from the first event that put the episode in
-- warning or lockout to the resolution that ended it (`ended_at`, `outcome`), open while
-- both are null. Written in the transaction of the episode change, from the decision's
-- effect (domain/runs.ts). `amount` and `currency` are the invoice's `amount_due` as last
-- known when the run was written; `decline_class` the worst class of its events.
CREATE TABLE dunning_runs (
  id bigserial PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  episode text NOT NULL,
  started_at timestamptz NOT NULL,
  ended_at timestamptz,
  outcome text CHECK (outcome IN ('paid', 'voided', 'subscription_ended', 'removed')),
  invoice_id text,
  amount bigint,
  currency text,
  decline_class text NOT NULL CHECK (decline_class IN ('soft', 'authentication', 'exhausted', 'hard')),
  CHECK ((ended_at IS NULL) = (outcome IS NULL))
);

-- At most one open run per episode: the write finds it here. With tenant_id first, the
-- same index serves the analytics' "at risk now" (a tenant's open runs).
CREATE UNIQUE INDEX dunning_runs_open ON dunning_runs (tenant_id, processor_customer_id, episode) WHERE ended_at IS NULL;
-- The analytics read a tenant's runs by the time they ended (recovered per period, time to
-- recover) and by the time they started (outcomes, decline mix, cohorts). The covered
-- columns let both be answered from the index alone where the engine can.
CREATE INDEX dunning_runs_ended ON dunning_runs (tenant_id, ended_at) INCLUDE (started_at, outcome, amount, currency) WHERE ended_at IS NOT NULL;
CREATE INDEX dunning_runs_started ON dunning_runs (tenant_id, started_at) INCLUDE (ended_at, outcome, decline_class);

-- What the episodes still tell: each unresolved episode's current run (from its dunning
-- start; a row from before migration 011 knows only its latest event, taken as the start)
-- and each resolved episode's last run when its start is known. Runs before those are lost.
INSERT INTO dunning_runs (tenant_id, processor_customer_id, episode, started_at, ended_at, outcome, invoice_id, amount, currency, decline_class)
SELECT e.tenant_id, e.processor_customer_id, e.episode,
  CASE WHEN e.state = 'resolved' THEN e.dunning_started_at ELSE COALESCE(e.dunning_started_at, e.at) END,
  CASE WHEN e.state = 'resolved' THEN COALESCE(e.resolved_at, e.at) END,
  CASE WHEN e.state <> 'resolved' THEN NULL WHEN e.reason IN ('voided', 'subscription_ended') THEN e.reason ELSE 'paid' END,
  e.invoice_id, i.amount_due, i.currency,
  CASE
    WHEN e.state = 'resolved' THEN 'soft'
    WHEN e.reason = 'hard_decline' THEN 'hard'
    WHEN e.reason IN ('retries_exhausted', 'subscription_unpaid') THEN 'exhausted'
    WHEN e.reason = 'payment_action_required' THEN 'authentication'
    ELSE 'soft'
  END
FROM subscriber_episodes e
LEFT JOIN stripe_invoices i ON i.tenant_id = e.tenant_id AND i.invoice_id = e.invoice_id
WHERE e.state <> 'resolved' OR e.dunning_started_at IS NOT NULL;

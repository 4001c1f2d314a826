-- A tenant's dunning policy (docs/reference.md#the-dunning-policy), the answered status beside the derived
-- one, and what Stripe tells about money (issue: a gate the customer can pay through).

-- The policy: how derived statuses are enforced. The defaults keep the behaviour before it.
ALTER TABLE tenants
  ADD COLUMN policy_enforcement text NOT NULL DEFAULT 'gate' CHECK (policy_enforcement IN ('gate', 'banner_only', 'monitor')),
  ADD COLUMN policy_grace_days smallint NOT NULL DEFAULT 0 CHECK (policy_grace_days BETWEEN 0 AND 60),
  ADD COLUMN policy_escalate_after_days smallint CHECK (policy_escalate_after_days BETWEEN 1 AND 120);

-- `status` stays what the lookup reads: now the *answered* status (the derived one after the
-- policy) as of the last write. `derived_status` is the status of the episodes alone.
-- `lockout_at`: while answered `warning`, when a grace ends or an escalation falls due; every
-- instance answers `lockout` from then on by comparing its clock, and one instance writes it.
-- `pay_url`: the hosted invoice page of the open invoice behind the worst unresolved episode.
-- `derived_status` includes an admin's override while it stands (an override): the status
-- the admin set. `banner_only` and `monitor` still apply to it, so `status` may differ.
ALTER TABLE subscribers
  ADD COLUMN derived_status text CHECK (derived_status IN ('active', 'warning', 'lockout')),
  ADD COLUMN lockout_at timestamptz,
  ADD COLUMN lockout_rule text CHECK (lockout_rule IN ('grace_ended', 'escalated')),
  ADD COLUMN pay_url text;
UPDATE subscribers SET derived_status = status;
ALTER TABLE subscribers ALTER COLUMN derived_status SET NOT NULL;

-- The instance that records time-driven transitions takes the due ones by time.
CREATE INDEX subscribers_lockout_at ON subscribers (lockout_at) WHERE lockout_at IS NOT NULL;
-- A policy change re-reads only the subscribers that any policy can answer differently.
CREATE INDEX subscribers_not_active ON subscribers (tenant_id, processor_customer_id)
  WHERE derived_status <> 'active' OR status <> 'active';

-- The read model follows the answered status and what the page needs with it.
DROP TRIGGER subscribers_log_update ON subscribers;
CREATE TRIGGER subscribers_log_update AFTER UPDATE ON subscribers
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    OR OLD.lockout_at IS DISTINCT FROM NEW.lockout_at
    OR OLD.pay_url IS DISTINCT FROM NEW.pay_url
    OR OLD.processor_customer_id IS DISTINCT FROM NEW.processor_customer_id
    OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
  EXECUTE FUNCTION dunwall_log_subscriber();

-- An episode's dunning start (the first event of its current unresolved run), its last
-- resolution, and the invoice behind it. Unknown for rows written before (an episode keeps
-- its latest event only): null, which the policy answers as derived (no grace is invented).
ALTER TABLE subscriber_episodes
  ADD COLUMN dunning_started_at timestamptz,
  ADD COLUMN resolved_at timestamptz,
  ADD COLUMN invoice_id text;

-- What Stripe tells about an invoice's money, from its latest event (by `created`).
ALTER TABLE stripe_invoices
  ADD COLUMN amount_due bigint,
  ADD COLUMN amount_remaining bigint,
  ADD COLUMN currency text,
  ADD COLUMN hosted_invoice_url text,
  ADD COLUMN status text,
  ADD COLUMN observed_at timestamptz;

-- The history shows the derived status beside the answered one, and changes the policy
-- made (source `policy`, its rule).
ALTER TABLE subscriber_history
  ADD COLUMN derived_status text CHECK (derived_status IN ('active', 'warning', 'lockout')),
  ADD COLUMN lockout_at timestamptz,
  ADD COLUMN policy_rule text CHECK (policy_rule IN ('grace_ended', 'escalated', 'policy_changed'));
UPDATE subscriber_history SET derived_status = status;
ALTER TABLE subscriber_history DROP CONSTRAINT subscriber_history_source_check;
ALTER TABLE subscriber_history ADD CONSTRAINT subscriber_history_source_check CHECK (source IN ('admin', 'stripe', 'policy'));

-- A policy change is applied to the tenant's subscribers in batches, each its own short
-- transaction, by whichever instance holds this row at the time; `after` is the last
-- customer id done. The row goes when every subscriber has been seen.
CREATE TABLE policy_sweeps (
  tenant_id integer PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
  after text NOT NULL DEFAULT '',
  started_at timestamptz NOT NULL
);

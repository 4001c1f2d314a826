-- Notices (docs/notices.md): what an active subscriber's answer may tell beside its status.

-- The notices a tenant's policy enables (`policy.notices`): none by default.
ALTER TABLE tenants ADD COLUMN policy_notices text[] NOT NULL DEFAULT '{}'
  CHECK (policy_notices <@ ARRAY['card_expiring']::text[]);

-- A customer's card-expiring notice, per space (the tenant row whose subscribers it
-- concerns), learned from Stripe's events: `expires` (YYYY-MM) while it holds, until
-- `until_at` (the next renewal, or the end of the card's month); both NULL once a card
-- change or the renewal's payment ended it. The row stays, so that an older event arriving
-- late (ordered by `event_created`, then `event_id`) does not start it again.
CREATE TABLE card_notices (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  expires text CHECK (expires ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
  until_at timestamptz,
  ended_by text CHECK (ended_by IN ('card_changed', 'renewal_paid')),
  event_id text NOT NULL,
  event_created timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, processor_customer_id),
  CHECK ((expires IS NULL) = (until_at IS NULL))
);
-- The read model loads the notices that hold.
CREATE INDEX card_notices_holding ON card_notices (tenant_id) WHERE expires IS NOT NULL;

-- The read model follows a notice as it follows its subscriber: the same change log row.
CREATE TRIGGER card_notices_log_insert_delete AFTER INSERT OR DELETE ON card_notices
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_subscriber();
CREATE TRIGGER card_notices_log_update AFTER UPDATE ON card_notices
  FOR EACH ROW WHEN ((OLD.expires, OLD.until_at) IS DISTINCT FROM (NEW.expires, NEW.until_at))
  EXECUTE FUNCTION dunwall_log_subscriber();

-- A tenant's test mode is a second row of its own (migration 022) that carries a copy of the
-- tenant's settings: the notices are one of them.
CREATE OR REPLACE FUNCTION dunwall_mirror_settings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tenants SET tier = NEW.tier, card_update_url = NEW.card_update_url, hmac_required = NEW.hmac_required,
    suspended = NEW.suspended, allowed_origins = NEW.allowed_origins, lookups_per_minute = NEW.lookups_per_minute,
    branding = NEW.branding, policy_enforcement = NEW.policy_enforcement, policy_grace_days = NEW.policy_grace_days,
    policy_escalate_after_days = NEW.policy_escalate_after_days, policy_notices = NEW.policy_notices,
    livemode = NEW.livemode, updated_at = NEW.updated_at
  WHERE mode_of = NEW.id;
  RETURN NULL;
END $$;

-- Modes (docs/test-mode.md): every tenant has a live and a test mode, as a Stripe account
-- does, and the data of one never mixes with the other's. Each mode is a data space: a row
-- of `tenants`. The tenant's own row is one space; the other mode's space is a twin row whose
-- `mode_of` names the tenant's row. Every table keyed by `tenant_id` (subscribers, their
-- history, episodes, Stripe events, the change log, the status feed, analytics, the outbox)
-- thereby keeps the two modes apart with no change to its queries.
--
-- The settings (tier, branding, policy, allowed origins, hmac_required, suspension, rate
-- limit) are the tenant's row's; a twin holds a copy, kept equal by the trigger below, so that
-- a query reading them by a space's id reads the tenant's. The hmac secret and the downstream
-- endpoints stay on the tenant's row. Per space: its publishable and secret keys, its Stripe
-- webhook signing secret.
--
-- A twin's slug (`<slug>~live` / `<slug>~test`) is outside the slug pattern, so no URL can
-- address it; listings and counts leave twins out.
--
-- Existing tenants (the contract's migration rule): a `livemode = false` tenant's row, with
-- its data and keys, becomes its test space and the twin its live space; every other
-- tenant's row (live or either) is its live space and the twin its test space. Every key
-- keeps working for the mode its row is now.
ALTER TABLE tenants
  ADD COLUMN mode text NOT NULL DEFAULT 'live' CHECK (mode IN ('live', 'test')),
  ADD COLUMN mode_of integer REFERENCES tenants (id) ON DELETE CASCADE;

ALTER TABLE tenants DROP CONSTRAINT tenants_slug_check;
ALTER TABLE tenants ADD CONSTRAINT tenants_slug_check
  CHECK (mode_of IS NOT NULL OR slug ~ '^[a-z0-9][a-z0-9-]{1,62}$');
-- A twin is never the tenant of another twin, and a tenant has one twin.
ALTER TABLE tenants ADD CONSTRAINT tenants_twin_slug CHECK (mode_of IS NULL OR slug = split_part(slug, '~', 1) || '~' || mode);
CREATE UNIQUE INDEX tenants_one_twin ON tenants (mode_of) WHERE mode_of IS NOT NULL;

UPDATE tenants SET mode = 'test' WHERE livemode = false;

INSERT INTO tenants (slug, tier, card_update_url, hmac_required, suspended, allowed_origins, lookups_per_minute,
  branding, policy_enforcement, policy_grace_days, policy_escalate_after_days, livemode, created_at, updated_at,
  mode, mode_of)
SELECT t.slug || '~' || other.mode, t.tier, t.card_update_url, t.hmac_required, t.suspended, t.allowed_origins,
  t.lookups_per_minute, t.branding, t.policy_enforcement, t.policy_grace_days, t.policy_escalate_after_days,
  t.livemode, t.created_at, t.updated_at, other.mode, t.id
FROM tenants t CROSS JOIN LATERAL (SELECT CASE WHEN t.mode = 'live' THEN 'test' ELSE 'live' END AS mode) other
WHERE t.mode_of IS NULL
ORDER BY t.id;

-- The settings of a tenant's row, copied onto its twin whenever they change (a twin's own
-- columns are never written otherwise).
CREATE OR REPLACE FUNCTION dunwall_mirror_settings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tenants SET tier = NEW.tier, card_update_url = NEW.card_update_url, hmac_required = NEW.hmac_required,
    suspended = NEW.suspended, allowed_origins = NEW.allowed_origins, lookups_per_minute = NEW.lookups_per_minute,
    branding = NEW.branding, policy_enforcement = NEW.policy_enforcement, policy_grace_days = NEW.policy_grace_days,
    policy_escalate_after_days = NEW.policy_escalate_after_days, livemode = NEW.livemode, updated_at = NEW.updated_at
  WHERE mode_of = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER tenants_mirror_settings AFTER UPDATE ON tenants
  FOR EACH ROW WHEN (NEW.mode_of IS NULL) EXECUTE FUNCTION dunwall_mirror_settings();

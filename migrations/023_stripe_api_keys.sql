-- The tenant's Stripe API key, one per data space (the row whose subscribers are of that
-- mode): what Dunwall asks Stripe with for an invoice's current page or a Customer Portal
-- session. Sealed like every secret kept usable (src/secrets, bound to the row and the kind
-- 'stripe_api_key'); `prefix` (its first 12 characters) is all that is ever shown again.
-- Who set or removed it is recorded in tenant_credential_changes (kind 'stripe_api_key').
CREATE TABLE tenant_stripe_api_keys (
  tenant_id integer PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
  secret text NOT NULL,
  prefix text NOT NULL,
  set_at timestamptz NOT NULL
);

-- Whether a space has a key changes what its answers carry (Dunwall's own pay and card
-- links): every process's read model hears of a key set, replaced or removed.
CREATE TRIGGER tenant_stripe_api_keys_log AFTER INSERT OR UPDATE OR DELETE ON tenant_stripe_api_keys
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_tenant('tenant_id');

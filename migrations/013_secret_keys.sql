-- A tenant's secret keys (docs/reference.md#keys-and-scopes): many per tenant, each named, with scopes.
-- Only SHA-256 digests are kept, and the key is found by its digest. A rotation keeps the
-- replaced digest beside the new one until `previous_expires_at`, so that a server that has
-- not switched yet is not refused. A revoked key is deleted.
CREATE TABLE tenant_secret_keys (
  id text PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  name text NOT NULL,
  scopes text[] NOT NULL,
  prefix text NOT NULL,
  digest bytea NOT NULL,
  previous_digest bytea,
  previous_expires_at timestamptz,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  -- Coarse: written by each process at most once a minute per key, never per request.
  last_used_at timestamptz,
  CHECK (octet_length(digest) = 32),
  CHECK ((previous_digest IS NULL) = (previous_expires_at IS NULL))
);
CREATE UNIQUE INDEX tenant_secret_keys_digest ON tenant_secret_keys (digest);
CREATE UNIQUE INDEX tenant_secret_keys_previous_digest ON tenant_secret_keys (previous_digest) WHERE previous_digest IS NOT NULL;
CREATE INDEX tenant_secret_keys_tenant ON tenant_secret_keys (tenant_id, created_at);

-- Every process's read model holds the keys' digests: a key created, rotated or revoked
-- reaches every instance with the tenant's next change. The time of last use is no change.
CREATE TRIGGER tenant_secret_keys_log_insert_delete AFTER INSERT OR DELETE ON tenant_secret_keys
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_tenant('tenant_id');
CREATE TRIGGER tenant_secret_keys_log_update AFTER UPDATE ON tenant_secret_keys
  FOR EACH ROW WHEN ((OLD.digest, OLD.previous_digest, OLD.previous_expires_at, OLD.expires_at, OLD.scopes, OLD.tenant_id)
    IS DISTINCT FROM (NEW.digest, NEW.previous_digest, NEW.previous_expires_at, NEW.expires_at, NEW.scopes, NEW.tenant_id))
  EXECUTE FUNCTION dunwall_log_tenant('tenant_id');

-- A change made through the tenant API names the key that made it; null: the operator, or
-- not an admin change.
ALTER TABLE subscriber_history ADD COLUMN secret_key_id text;

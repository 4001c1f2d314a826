-- Who changed what decides a status (docs/security.md): every change of a tenant's Stripe
-- webhook signing secret is recorded with the operator or the secret key that made it. The
-- key's prefix and name are copied, so the record still says which key it was once the key
-- is revoked (a revoked key is deleted). Kept with the tenant, never pruned: a row per change.
CREATE TABLE tenant_credential_changes (
  id bigserial PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  kind text NOT NULL,
  at timestamptz NOT NULL,
  by_operator boolean NOT NULL,
  secret_key_id text,
  secret_key_prefix text,
  secret_key_name text,
  CHECK (by_operator = (secret_key_id IS NULL)),
  CHECK ((secret_key_id IS NULL) = (secret_key_prefix IS NULL))
);
CREATE INDEX tenant_credential_changes_tenant ON tenant_credential_changes (tenant_id, kind, at DESC, id DESC);

-- Console sessions (docs/console.md): a signed-in browser holds a random session id in an
-- HttpOnly cookie; only its SHA-256 digest is kept here, so a copy of this table signs no
-- one in. An operator's session has no tenant; a tenant's names the secret key it was
-- opened with, and ends with it (a revoked key is deleted, and its sessions with it). Every
-- session ends at `expires_at`; signing out deletes it at once.
CREATE TABLE console_sessions (
  digest bytea PRIMARY KEY,
  tenant_id integer REFERENCES tenants (id) ON DELETE CASCADE,
  secret_key_id text REFERENCES tenant_secret_keys (id) ON DELETE CASCADE,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  CHECK (octet_length(digest) = 32),
  CHECK ((tenant_id IS NULL) = (secret_key_id IS NULL))
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
CREATE INDEX console_sessions_key ON console_sessions (secret_key_id) WHERE secret_key_id IS NOT NULL;

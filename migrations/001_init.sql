-- Tiers: a name and its entitlement flags (booleans).
CREATE TABLE tiers (
  name text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  entitlements jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO tiers (name, entitlements) VALUES
  ('starter', '{"powered_by_watermark": true, "custom_domain": false, "downstream_webhooks": false}'),
  ('growth', '{"powered_by_watermark": false, "custom_domain": true, "downstream_webhooks": false}'),
  ('scale', '{"powered_by_watermark": false, "custom_domain": true, "downstream_webhooks": true}');

CREATE TABLE tenants (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,62}$'),
  tier text NOT NULL REFERENCES tiers (name),
  card_update_url text,
  hmac_required boolean NOT NULL DEFAULT false,
  suspended boolean NOT NULL DEFAULT false,
  allowed_origins jsonb,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);

-- Publishable keys are kept only as SHA-256 digests (hex); HMAC and Stripe signing secrets
-- must be usable, so they are kept as secrets. Several per kind during a rotation, each with
-- an optional expiry.
CREATE TABLE tenant_credentials (
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  kind text NOT NULL CHECK (kind IN ('publishable_key', 'hmac_secret', 'stripe_webhook_secret')),
  key_hash text,
  secret text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz,
  CHECK ((kind = 'publishable_key') = (key_hash IS NOT NULL AND secret IS NULL)),
  CHECK (kind = 'publishable_key' OR secret IS NOT NULL)
);
CREATE UNIQUE INDEX tenant_credentials_key_hash ON tenant_credentials (key_hash) WHERE key_hash IS NOT NULL;
CREATE INDEX tenant_credentials_tenant ON tenant_credentials (tenant_id, kind);

-- status_at: the time of the event that set the status (an admin action is an event at the
-- time it is made); later events are ordered against it.
CREATE TABLE subscribers (
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'warning', 'lockout')),
  reason text NOT NULL,
  status_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, processor_customer_id)
);

-- Every change of a subscriber's status with its cause; status NULL: the record was removed.
CREATE TABLE subscriber_history (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  status text CHECK (status IN ('active', 'warning', 'lockout')),
  reason text,
  source text NOT NULL CHECK (source IN ('admin', 'stripe')),
  event_id text,
  event_type text,
  decline_code text,
  occurred_at timestamptz NOT NULL,
  recorded_at timestamptz NOT NULL
);
CREATE INDEX subscriber_history_subscriber ON subscriber_history (tenant_id, processor_customer_id, id);

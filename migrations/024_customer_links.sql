-- Pay and card links through Dunwall (docs/links.md). In a data space with a Stripe API key
-- (tenant_stripe_api_keys, migration 023),
-- the pay link a non-active answer carries is `{DUNWALL_PUBLIC_URL}/pay/{token}`: opened, it
-- asks Stripe for the invoice's current page. The token is made on the write that sets the
-- link, never on a lookup.

-- The public address the stored links were made with (DUNWALL_PUBLIC_URL), one row. Boot
-- writes it; when it differs from what the links were made with, every space with links is
-- answered again (policy_sweeps), so that no stored link names an old address.
CREATE TABLE customer_link_settings (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  public_url text
);
INSERT INTO customer_link_settings (one, public_url) VALUES (true, NULL);

-- One row per token. A token is looked up by its SHA-256 digest; `url` is the link as answers
-- carry it (subscribers.pay_url holds the same text), kept so that the next write of the same
-- customer and invoice gives the same link rather than a new one each time. `tenant_id` is the
-- data space (the mode's row). A link is valid until `expires_at` (30 days); one close to it
-- is replaced on the next write or renewal sweep.
CREATE TABLE customer_links (
  id bigserial PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  token_sha256 bytea NOT NULL UNIQUE,
  url text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('pay', 'card')),
  processor_customer_id text NOT NULL,
  invoice_id text,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  CHECK ((kind = 'pay') = (invoice_id IS NOT NULL))
);
CREATE INDEX customer_links_current ON customer_links (tenant_id, processor_customer_id, kind, invoice_id, expires_at DESC);
CREATE INDEX customer_links_expiry ON customer_links (expires_at);

-- Every open of a link (tenant space, customer, kind, time) and where it sent the customer:
-- Stripe's fresh page, the stored page, the branding's payment link, or Dunwall's own page.
CREATE TABLE customer_link_opens (
  id bigserial PRIMARY KEY,
  tenant_id integer NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
  processor_customer_id text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('pay', 'card')),
  invoice_id text,
  opened_at timestamptz NOT NULL,
  sent_to text NOT NULL CHECK (sent_to IN ('stripe', 'stored_page', 'payment_link', 'contact_page'))
);
CREATE INDEX customer_link_opens_customer ON customer_link_opens (tenant_id, processor_customer_id, opened_at);
CREATE INDEX customer_link_opens_time ON customer_link_opens (tenant_id, opened_at);

-- When the stored hosted invoice page stops working, as Stripe documents it: 30 days after
-- the due date (after finalization for an invoice charged automatically), never more than
-- 120 days after finalization. NULL: not known (an event without those fields).
ALTER TABLE stripe_invoices ADD COLUMN hosted_page_expires_at timestamptz;

-- A tenant's branding for the snippet (texts per locale, colors, logo, payment and support
-- links), set through the admin API and served publicly; a change reaches the read model
-- through the tenant's own trigger.
ALTER TABLE tenants ADD COLUMN branding jsonb NOT NULL DEFAULT '{}'::jsonb;

-- Every write that can change a lookup's answer tells every instance, so that no code path
-- that writes can forget to: each instance LISTENs on dunwall_invalidate and drops what it
-- cached. Payloads: 's:<tenant id>:<customer id>' (a subscriber), 't:<tenant id>:<slug>'
-- (a tenant or its credentials), '*' (a tier: every tenant).
CREATE OR REPLACE FUNCTION dunwall_notify_subscriber() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r record := COALESCE(NEW, OLD);
BEGIN
  PERFORM pg_notify('dunwall_invalidate', 's:' || r.tenant_id || ':' || r.processor_customer_id);
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION dunwall_notify_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r record := COALESCE(NEW, OLD);
BEGIN
  PERFORM pg_notify('dunwall_invalidate', 't:' || r.id || ':' || r.slug);
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION dunwall_notify_credential() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r record := COALESCE(NEW, OLD);
BEGIN
  PERFORM pg_notify('dunwall_invalidate', 't:' || r.tenant_id || ':' || (SELECT slug FROM tenants WHERE id = r.tenant_id));
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION dunwall_notify_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('dunwall_invalidate', '*');
  RETURN NULL;
END $$;

CREATE TRIGGER subscribers_invalidate AFTER INSERT OR UPDATE OR DELETE ON subscribers
  FOR EACH ROW EXECUTE FUNCTION dunwall_notify_subscriber();
CREATE TRIGGER tenants_invalidate AFTER INSERT OR UPDATE OR DELETE ON tenants
  FOR EACH ROW EXECUTE FUNCTION dunwall_notify_tenant();
CREATE TRIGGER tenant_credentials_invalidate AFTER INSERT OR UPDATE OR DELETE ON tenant_credentials
  FOR EACH ROW EXECUTE FUNCTION dunwall_notify_credential();
CREATE TRIGGER tiers_invalidate AFTER INSERT OR UPDATE OR DELETE ON tiers
  FOR EACH STATEMENT EXECUTE FUNCTION dunwall_notify_all();

-- The change notifications are sent on a channel named after the schema the tables live in:
-- `dunwall_invalidate` in `public` (as before, so that instances of the previous version
-- keep hearing them during a rolling upgrade), `dunwall_invalidate_<schema>` elsewhere.
-- Deployments (or test runs) sharing one database in different schemas no longer wake each
-- other's processes.
CREATE OR REPLACE FUNCTION dunwall_changes_channel() RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_schema() = 'public' THEN 'dunwall_invalidate' ELSE left('dunwall_invalidate_' || current_schema(), 63) END
$$;

CREATE OR REPLACE FUNCTION dunwall_log_subscriber() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r record := COALESCE(NEW, OLD);
BEGIN
  INSERT INTO lookup_changes (tenant_id, processor_customer_id) VALUES (r.tenant_id, r.processor_customer_id);
  IF TG_OP = 'UPDATE' AND (OLD.tenant_id, OLD.processor_customer_id) IS DISTINCT FROM (NEW.tenant_id, NEW.processor_customer_id) THEN
    INSERT INTO lookup_changes (tenant_id, processor_customer_id) VALUES (OLD.tenant_id, OLD.processor_customer_id);
  END IF;
  PERFORM pg_notify(dunwall_changes_channel(), 'changed');
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION dunwall_log_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO lookup_changes (tenant_id) VALUES ((to_jsonb(COALESCE(NEW, OLD)) ->> TG_ARGV[0])::integer);
  PERFORM pg_notify(dunwall_changes_channel(), 'changed');
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION dunwall_log_tier() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO lookup_changes (tier) SELECT DISTINCT name FROM (VALUES (OLD.name), (NEW.name)) AS t (name) WHERE name IS NOT NULL;
  PERFORM pg_notify(dunwall_changes_channel(), 'changed');
  RETURN NULL;
END $$;

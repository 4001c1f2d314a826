-- The change log each process's read model follows (src/readmodel/). Every write that can
-- change a lookup's answer leaves a row naming what it changed, stamped with its own
-- transaction id, and wakes every listener with one notification per transaction.
--
-- A reader remembers the snapshot (pg_current_snapshot()) it last read at, and next reads
-- the rows whose transaction that snapshot did not see. Transaction ids, unlike sequence
-- values, say exactly which writers a snapshot saw, whatever order they commit in: a row
-- of a slow writer that began before a faster one committed is still "not seen" until it
-- commits, and then read.
--
-- A row names a subscriber (tenant_id, processor_customer_id), a tenant (its settings,
-- credentials or tier: processor_customer_id NULL), or a tier (tier; tenant_id NULL). A
-- tier's row names the tier, not the tenants on it when it changed: a reader re-reads the
-- tenants on it as of its own snapshot, so a tenant that moved onto the tier while the
-- tier's transaction ran is not missed.
CREATE TABLE lookup_changes (
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  tenant_id integer,
  processor_customer_id text,
  tier text,
  recorded_at timestamptz NOT NULL DEFAULT now(),
  CHECK ((tenant_id IS NULL) = (tier IS NOT NULL))
);
CREATE INDEX lookup_changes_xid ON lookup_changes (xid);
CREATE INDEX lookup_changes_recorded_at ON lookup_changes (recorded_at);

-- Pruning deletes old rows and records here the highest transaction id it deleted: a reader
-- whose snapshot had not seen that transaction may have lost a change, and reloads.
CREATE TABLE lookup_changes_horizon (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  pruned_through xid8 NOT NULL DEFAULT '0'
);
INSERT INTO lookup_changes_horizon DEFAULT VALUES;

DROP TRIGGER subscribers_invalidate ON subscribers;
DROP TRIGGER tenants_invalidate ON tenants;
DROP TRIGGER tenant_credentials_invalidate ON tenant_credentials;
DROP TRIGGER tiers_invalidate ON tiers;
DROP FUNCTION dunwall_notify_subscriber();
DROP FUNCTION dunwall_notify_tenant();
DROP FUNCTION dunwall_notify_credential();
DROP FUNCTION dunwall_notify_all();

-- One payload for every row: PostgreSQL folds identical notifications of one transaction
-- into one, sent at commit.
CREATE OR REPLACE FUNCTION dunwall_log_subscriber() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  r record := COALESCE(NEW, OLD);
BEGIN
  INSERT INTO lookup_changes (tenant_id, processor_customer_id) VALUES (r.tenant_id, r.processor_customer_id);
  IF TG_OP = 'UPDATE' AND (OLD.tenant_id, OLD.processor_customer_id) IS DISTINCT FROM (NEW.tenant_id, NEW.processor_customer_id) THEN
    INSERT INTO lookup_changes (tenant_id, processor_customer_id) VALUES (OLD.tenant_id, OLD.processor_customer_id);
  END IF;
  PERFORM pg_notify('dunwall_invalidate', 'changed');
  RETURN NULL;
END $$;

-- A tenant's own row, or one of its credentials: the argument names the column that holds
-- the tenant's id.
CREATE OR REPLACE FUNCTION dunwall_log_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO lookup_changes (tenant_id) VALUES ((to_jsonb(COALESCE(NEW, OLD)) ->> TG_ARGV[0])::integer);
  PERFORM pg_notify('dunwall_invalidate', 'changed');
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION dunwall_log_tier() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO lookup_changes (tier) SELECT DISTINCT name FROM (VALUES (OLD.name), (NEW.name)) AS t (name) WHERE name IS NOT NULL;
  PERFORM pg_notify('dunwall_invalidate', 'changed');
  RETURN NULL;
END $$;

-- A subscriber's update that leaves its status alone (a reason, a time) changes no answer.
CREATE TRIGGER subscribers_log_insert_delete AFTER INSERT OR DELETE ON subscribers
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_subscriber();
CREATE TRIGGER subscribers_log_update AFTER UPDATE ON subscribers
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    OR OLD.processor_customer_id IS DISTINCT FROM NEW.processor_customer_id
    OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
  EXECUTE FUNCTION dunwall_log_subscriber();
CREATE TRIGGER tenants_log AFTER INSERT OR UPDATE OR DELETE ON tenants
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_tenant('id');
CREATE TRIGGER tenant_credentials_log AFTER INSERT OR UPDATE OR DELETE ON tenant_credentials
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_tenant('tenant_id');
CREATE TRIGGER tiers_log AFTER UPDATE OR DELETE ON tiers
  FOR EACH ROW EXECUTE FUNCTION dunwall_log_tier();

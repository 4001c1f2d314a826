-- The tenant's status change feed (docs/reference.md#the-status-feed, docs/feed.md): one row each time a
-- subscriber's answer changes, that is its answered status, its scheduled lockout or its pay
-- link, whatever wrote it (a Stripe event, an admin, the policy clock, a policy sweep, a
-- deletion). A subscriber with no record answers `active` with neither, so a deletion is a
-- change to `active`, and a new active subscriber changes nothing.
--
-- Read like the change log (migration 006): by snapshot visibility of `xid`, never "rows after
-- the last one seen", since rows are written before their transactions commit, in any order.
-- `seq` orders the rows a reader gets at once. It is taken when the trigger inserts the row,
-- after the write holds the subscriber's row lock, so two changes of one subscriber have
-- their `seq` in the order they commit in; changes of different subscribers need no order
-- between them.
CREATE TABLE status_changes (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
  tenant_id integer NOT NULL,
  processor_customer_id text NOT NULL,
  status text NOT NULL CHECK (status IN ('active', 'warning', 'lockout')),
  lockout_at timestamptz,
  pay_url text,
  occurred_at timestamptz NOT NULL
);
-- A tenant's reader scans the transactions its position had not seen.
CREATE INDEX status_changes_tenant_xid ON status_changes (tenant_id, xid);
-- Retention prunes by age, oldest first.
CREATE INDEX status_changes_occurred_at ON status_changes (occurred_at);

-- Pruning records the highest transaction id it deleted: a reader whose position had not
-- seen that transaction may have lost a change, and is told to list again (410).
CREATE TABLE status_changes_horizon (
  id boolean PRIMARY KEY DEFAULT true CHECK (id),
  pruned_through xid8 NOT NULL DEFAULT '0'
);
INSERT INTO status_changes_horizon DEFAULT VALUES;

-- The list: a tenant's subscribers answered other than active, by customer id. Narrower
-- than subscribers_not_active (011), which also holds every subscriber a `monitor` tenant
-- answers active.
CREATE INDEX subscribers_answered_not_active ON subscribers (tenant_id, processor_customer_id) WHERE status <> 'active';

-- The answer of one side of a write, as the lookup gives it: `lockout_at` only while
-- `warning`, `pay_url` only while not `active`; a row that is not there answers `active`.
CREATE OR REPLACE FUNCTION dunwall_record_status_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  was_status text := 'active';
  was_lockout timestamptz;
  was_pay text;
  now_status text := 'active';
  now_lockout timestamptz;
  now_pay text;
  same_key boolean := TG_OP = 'UPDATE' AND (OLD.tenant_id, OLD.processor_customer_id) = (NEW.tenant_id, NEW.processor_customer_id);
BEGIN
  IF TG_OP <> 'INSERT' THEN
    was_status := OLD.status;
    was_lockout := CASE WHEN OLD.status = 'warning' THEN OLD.lockout_at END;
    was_pay := CASE WHEN OLD.status <> 'active' THEN OLD.pay_url END;
  END IF;
  IF TG_OP <> 'DELETE' THEN
    now_status := NEW.status;
    now_lockout := CASE WHEN NEW.status = 'warning' THEN NEW.lockout_at END;
    now_pay := CASE WHEN NEW.status <> 'active' THEN NEW.pay_url END;
  END IF;
  -- A row moved to another key: its old key now answers active, its new key as written.
  IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE' AND NOT same_key) THEN
    IF was_status <> 'active' THEN
      INSERT INTO status_changes (tenant_id, processor_customer_id, status, occurred_at)
      VALUES (OLD.tenant_id, OLD.processor_customer_id, 'active', now());
    END IF;
    IF TG_OP = 'DELETE' THEN
      RETURN NULL;
    END IF;
    was_status := 'active';
    was_lockout := NULL;
    was_pay := NULL;
  END IF;
  IF (was_status, was_lockout, was_pay) IS DISTINCT FROM (now_status, now_lockout, now_pay) THEN
    INSERT INTO status_changes (tenant_id, processor_customer_id, status, lockout_at, pay_url, occurred_at)
    VALUES (NEW.tenant_id, NEW.processor_customer_id, now_status, now_lockout, now_pay, NEW.updated_at);
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER subscribers_status_feed_insert_delete AFTER INSERT OR DELETE ON subscribers
  FOR EACH ROW EXECUTE FUNCTION dunwall_record_status_change();
CREATE TRIGGER subscribers_status_feed_update AFTER UPDATE ON subscribers
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    OR OLD.lockout_at IS DISTINCT FROM NEW.lockout_at
    OR OLD.pay_url IS DISTINCT FROM NEW.pay_url
    OR OLD.processor_customer_id IS DISTINCT FROM NEW.processor_customer_id
    OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
  EXECUTE FUNCTION dunwall_record_status_change();

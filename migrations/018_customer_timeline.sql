-- A customer's timeline (its page in the console, docs/console.md).

-- Its webhook messages, newest first (GET .../subscribers/:customerId/webhooks): without
-- this, the read walks every message the tenant has kept.
CREATE INDEX webhook_events_customer ON webhook_events (tenant_id, processor_customer_id, sequence DESC);

-- What an admin change was: an override set, an override cleared, or the record removed.
-- NULL for other sources, and for admin changes recorded before this column.
ALTER TABLE subscriber_history ADD COLUMN admin_action text
  CHECK (admin_action IN ('set_status', 'clear_override', 'delete'));

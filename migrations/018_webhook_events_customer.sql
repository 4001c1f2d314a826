-- A customer's webhook messages, newest first, for its page in the console
-- (GET .../subscribers/:customerId/webhooks): without it, the read walks every message the
-- tenant has kept.
CREATE INDEX webhook_events_customer ON webhook_events (tenant_id, processor_customer_id, sequence DESC);

-- Retention: processed Stripe events and the history are pruned by age, oldest first, in
-- small batches; these indexes find each batch without scanning the tables.
CREATE INDEX stripe_events_received_at ON stripe_events (received_at);
CREATE INDEX subscriber_history_recorded_at ON subscriber_history (recorded_at);

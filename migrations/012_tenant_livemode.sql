-- Test mode (docs/api.md, test mode): a tenant takes Stripe's live events (true), its test
-- events (false) or both (NULL: the default, and what every tenant created before this
-- setting has). An event of the other mode is answered `livemode_mismatch` and, like an
-- irrelevant type, not kept in stripe_events, so its outcomes there are unchanged.
ALTER TABLE tenants ADD COLUMN livemode boolean;

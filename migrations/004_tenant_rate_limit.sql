-- A tenant's own lookup rate limit, in lookups per minute across all addresses; NULL: the
-- service's default (DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT).
ALTER TABLE tenants ADD COLUMN lookups_per_minute integer CHECK (lookups_per_minute > 0);

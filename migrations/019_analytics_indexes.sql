-- The policy impact (store/analytics.ts) joins a tenant's non-active subscribers to their
-- unresolved episodes. Without an index on those, the planner read every episode of every
-- tenant, resolved ones included (a tenant of a million subscribers beside two million
-- others: 1,500,000 episodes read for its 30,000 unresolved ones, docs/operations.md).
-- Few rows: an episode is unresolved only while its customer is in dunning.
CREATE INDEX subscriber_episodes_unresolved ON subscriber_episodes (tenant_id, processor_customer_id) WHERE state <> 'resolved';

-- A secret key sent from a browser (a lookup carrying `Origin` with a secret key) is refused,
-- and the key is marked: when it was last seen there. The tenant treats such a key as leaked
-- and rotates it; a rotation clears the mark. Written at most once a minute per key and
-- process, never per request; no change of it is a change the read model follows (the
-- update trigger of migration 013 names the columns that are).
ALTER TABLE tenant_secret_keys ADD COLUMN seen_in_browser_at timestamptz;

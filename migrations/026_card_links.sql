-- Card links through Dunwall (docs/links.md): in a data space with a Stripe API key and a
-- public URL, a warning's `card_update_url` and a card-expiring notice's card link are
-- `{DUNWALL_PUBLIC_URL}/card/{token}` (customer_links kind 'card', migration 024), unless the
-- tenant set its own card_update_url. Made on the write that answers the customer, like the
-- pay link, and carried to the read model beside it.

-- The card link of a non-active subscriber (NULL: none; the tenant's own URL, if any, answers).
ALTER TABLE subscribers ADD COLUMN card_url text;

DROP TRIGGER subscribers_log_update ON subscribers;
CREATE TRIGGER subscribers_log_update AFTER UPDATE ON subscribers
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
    OR OLD.lockout_at IS DISTINCT FROM NEW.lockout_at
    OR OLD.pay_url IS DISTINCT FROM NEW.pay_url
    OR OLD.card_url IS DISTINCT FROM NEW.card_url
    OR OLD.processor_customer_id IS DISTINCT FROM NEW.processor_customer_id
    OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
  EXECUTE FUNCTION dunwall_log_subscriber();

-- The card link a notice that holds carries (NULL: none).
ALTER TABLE card_notices ADD COLUMN card_url text;

DROP TRIGGER card_notices_log_update ON card_notices;
CREATE TRIGGER card_notices_log_update AFTER UPDATE ON card_notices
  FOR EACH ROW WHEN ((OLD.expires, OLD.until_at, OLD.card_url) IS DISTINCT FROM (NEW.expires, NEW.until_at, NEW.card_url))
  EXECUTE FUNCTION dunwall_log_subscriber();


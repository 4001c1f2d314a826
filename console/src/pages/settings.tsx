/** @jsxImportSource preact */
import { useEffect, useState } from 'preact/hooks';
import { api, holds } from '../api.js';
import { ErrorNote, Loading, Missing, Page, useConsole, useLoad } from '../ui.js';
import { BrandingSection } from './settings/branding.js';
import { EndpointsSection } from './settings/endpoints.js';
import { IntegrationSection } from './settings/integration.js';
import type { Integration } from './settings/integration.js';
import type { Settings as SettingsAnswer } from '@dunwall/wire';
import { KeysSection } from './settings/keys.js';
import { PolicySection } from './settings/policy.js';

/** The integration's part of a settings answer: the only fields its section changes. */
function pickIntegration(s: Integration): Integration {
  return {
    card_update_url: s.card_update_url,
    hmac_required: s.hmac_required,
    allowed_origins: s.allowed_origins,
    stripe_webhook_secret_set: s.stripe_webhook_secret_set,
    stripe_api_key: s.stripe_api_key,
  };
}

/**
 * Branding (with the snippet's own preview), the policy (with what it would change), the
 * integration (card update page, hmac, origins, Stripe's signing secret), keys and webhook endpoints.
 */
export function Settings() {
  const { session, base } = useConsole();
  const canWrite = holds(session, 'settings:write');
  const canSetStripe = holds(session, 'stripe:write');
  // GET /settings needs settings:write: a key without it sees the sections its scopes allow.
  const loaded = useLoad(
    () => (canWrite ? api.get<SettingsAnswer>(`${base}/settings`) : Promise.resolve(null)),
    [base, canWrite],
  );
  const [settings, setSettings] = useState<SettingsAnswer | null>(null);
  useEffect(() => setSettings(loaded.data), [loaded.data]);
  return (
    <Page title="Settings">
      {!canWrite ? <Missing scope="settings:write" /> : null}
      {canWrite && loaded.loading && settings === null ? <Loading what="the settings" /> : null}
      <ErrorNote error={loaded.error} retry={loaded.reload} />
      {settings ? (
        <>
          <BrandingSection
            saved={settings.branding}
            canWrite={canWrite}
            onSaved={(branding) => setSettings((s) => s && { ...s, branding })}
          />
          <PolicySection
            saved={settings.policy}
            canRead={holds(session, 'subscribers:read')}
            canWrite={canWrite}
            onSaved={(policy) => setSettings((s) => s && { ...s, policy })}
          />
          <IntegrationSection
            saved={settings}
            canSetStripe={canSetStripe}
            onSaved={(next) => setSettings((s) => s && { ...s, ...pickIntegration(next) })}
          />
        </>
      ) : null}
      {!canWrite ? <IntegrationSection saved={null} canSetStripe={canSetStripe} onSaved={() => undefined} /> : null}
      {/* Keyed: the sections above arrive later, and these keep what is typed in them meanwhile. */}
      <KeysSection key="keys" />
      <EndpointsSection key="endpoints" />
    </Page>
  );
}

/// <reference types="vite/client" />
import { useEffect, useState } from 'react';
import {
  BillingBanner,
  BillingGate,
  DunwallProvider,
  useBillingFetch,
  useBillingStatus,
  useEntitlement,
} from '@dunwall/react';

// A test tenant's key shows the real banner or gate with ?preview=warning or ?preview=lockout.
const preview = new URLSearchParams(location.search).get('preview');

export function App({ customer, hmac }: { customer: string; hmac: string }) {
  return (
    <DunwallProvider
      baseUrl={import.meta.env.VITE_DUNWALL_URL}
      tenant={import.meta.env.VITE_DUNWALL_TENANT}
      publishableKey={import.meta.env.VITE_DUNWALL_KEY}
      customer={customer}
      hmac={hmac}
      preview={preview === 'warning' || preview === 'lockout' ? preview : null}
    >
      <BillingBanner />
      <Dashboard />
      <BillingGate supportUrl="https://acme.example.com/support" />
    </DunwallProvider>
  );
}

function Dashboard() {
  const billing = useBillingStatus();
  const customDomain = useEntitlement('custom_domain');
  // Your API through useBillingFetch(): its 402 billing_lockout refusal shows the gate too.
  const api = useBillingFetch();
  const [projects, setProjects] = useState<string[]>([]);
  useEffect(() => {
    void api('/api/projects').then(async (res) => res.ok && setProjects((await res.json()) as string[]));
  }, [api]);
  return (
    <main>
      <h1>Dashboard</h1>
      <p data-testid="billing">
        {billing.status} from {billing.source}
        {billing.ready ? '' : ' (asking)'}
      </p>
      {customDomain ? (
        <button type="button">Set up your custom domain</button>
      ) : (
        <p>Custom domains come with the Scale plan.</p>
      )}
      <p>Revenue this month: $48,210</p>
      <ul aria-label="Projects">
        {projects.map((p) => (
          <li key={p}>{p}</li>
        ))}
      </ul>
    </main>
  );
}

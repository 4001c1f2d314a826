import { useEffect, useState } from 'react';
import { BillingBanner, BillingGate, DunwallProvider, useBillingFetch, useBillingStatus } from '@dunwall/react';

export function App({ customer, hmac }: { customer: string | null; hmac: string | null }) {
  return (
    <DunwallProvider
      baseUrl={import.meta.env.VITE_DUNWALL_URL}
      tenant={import.meta.env.VITE_DUNWALL_TENANT}
      publishableKey={import.meta.env.VITE_DUNWALL_KEY}
      customer={customer}
      hmac={hmac}
    >
      <BillingBanner />
      <Dashboard customer={customer} />
      <BillingGate supportUrl="mailto:support@acme.example.com" />
    </DunwallProvider>
  );
}

function Dashboard({ customer }: { customer: string | null }) {
  const billing = useBillingStatus();
  const projects = useProjects();
  return (
    <main>
      <h1>Acme</h1>
      <p>
        {customer === null ? (
          <a href="/signin?customer=cus_demo">Sign in</a>
        ) : (
          <>
            Signed in as {customer}. <a href="/logout">Sign out</a>
          </>
        )}
      </p>
      <p data-testid="billing">
        Billing: {billing.status} from {billing.source}
      </p>
      <p data-testid="api">API: {projects}</p>
    </main>
  );
}

/**
 * The app's own API, which the server's middleware protects: what it answered. Called through
 * useBillingFetch(), so that the API's 402 billing_lockout refusal shows the gate too.
 */
function useProjects(): string {
  const api = useBillingFetch();
  const [answer, setAnswer] = useState('asking');
  useEffect(() => {
    const request = new AbortController();
    api('/api/projects', { signal: request.signal })
      .then(async (res) => {
        const body = (await res.json()) as { projects?: { name: string }[]; code?: string };
        setAnswer(res.ok ? `${body.projects?.length ?? 0} projects` : `${res.status} ${body.code ?? ''}`);
      })
      .catch((err: Error) => {
        if (err.name !== 'AbortError') setAnswer(`failed: ${err.message}`);
      });
    return () => request.abort();
  }, [api]);
  return answer;
}

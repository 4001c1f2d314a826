/**
 * The application's own page under docs/examples/nextjs's layout. It reads the status too
 * (`data-source` says where the shown status came from), and marks the document once
 * hydrated: effects run only in the browser, after hydration.
 */
import { useBillingStatus } from '@dunwall/react';
import { useEffect } from 'react';

export function Page() {
  const { status, source } = useBillingStatus();
  useEffect(() => {
    document.documentElement.dataset.hydrated = 'true';
  }, []);
  return (
    <main>
      <h1>Projects</h1>
      <p id="billing-readout" data-status={status} data-source={source}>
        Billing: {status}
      </p>
    </main>
  );
}

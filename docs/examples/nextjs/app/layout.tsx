// app/layout.tsx: a server component, rendered for each request.
import type { ReactNode } from 'react';
import { getBillingBootstrap } from '../lib/dunwall.js';
import { currentCustomer } from '../lib/session.js';
import { Billing } from './billing.js';

export default async function RootLayout({ children }: { children: ReactNode }) {
  // Your sign-in: the Stripe customer id of the account signed in, or null.
  const customer = await currentCustomer();
  const billing = customer ? await getBillingBootstrap(customer) : null;
  return (
    <html lang="en">
      <body>
        <Billing {...billing}>{children}</Billing>
      </body>
    </html>
  );
}

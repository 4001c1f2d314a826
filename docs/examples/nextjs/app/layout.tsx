// app/layout.tsx: a server component, rendered for each request.
import type { ReactNode } from 'react';
import { dunwall } from '../lib/dunwall.js';
import { currentCustomer } from '../lib/session.js';
import { Billing } from './billing.js';

export default async function RootLayout({ children }: { children: ReactNode }) {
  // Your sign-in: the Stripe customer id of the account signed in, or null.
  const customer = await currentCustomer();
  // Who is signed in (with the hmac) and their status to render with; never throws, 1.5 s at most.
  const billing = await dunwall.pageBootstrap(customer);
  return (
    <html lang="en">
      <body>
        <Billing {...billing}>{children}</Billing>
      </body>
    </html>
  );
}

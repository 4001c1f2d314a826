'use client';
// app/billing.tsx: renders on the server with the layout's bootstrap, then in the browser.
import { BillingBanner, BillingGate, DunwallProvider } from '@dunwall/react';
import type { BillingBootstrap } from '@dunwall/react';
import type { ReactNode } from 'react';

export interface BillingProps {
  customer?: string | null;
  hmac?: string | null;
  bootstrap?: BillingBootstrap | null;
  children?: ReactNode;
}

export function Billing({ customer, hmac, bootstrap, children }: BillingProps) {
  return (
    <DunwallProvider
      baseUrl={process.env.NEXT_PUBLIC_DUNWALL_URL ?? ''}
      tenant={process.env.NEXT_PUBLIC_DUNWALL_TENANT ?? ''}
      publishableKey={process.env.NEXT_PUBLIC_DUNWALL_PUBLISHABLE_KEY ?? ''}
      customer={customer}
      hmac={hmac}
      bootstrap={bootstrap}
    >
      <BillingBanner />
      {children}
      <BillingGate />
    </DunwallProvider>
  );
}

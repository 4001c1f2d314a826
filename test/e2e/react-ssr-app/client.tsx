/**
 * The browser's side: hydrates the client component with the props the server rendered it
 * with, recording every error React recovers from. `?tamper` gives it other props than the
 * server's: the control, where hydration must complain.
 */
import { version } from 'react';
import { hydrateRoot } from 'react-dom/client';
import { Billing } from '../../../docs/examples/nextjs/app/billing.js';
import type { ClientProps } from './server.js';
import { Page } from './page.js';

const recorded = window as unknown as { __recoverable: string[]; __react: string };
recorded.__recoverable = [];
recorded.__react = version;
const props = JSON.parse(document.getElementById('billing-props')?.textContent ?? '{}') as ClientProps;
if (new URLSearchParams(location.search).has('tamper')) props.bootstrap = null;
const root = document.getElementById('root');
if (!root) throw new Error('no #root');
hydrateRoot(
  root,
  <Billing {...props}>
    <Page />
  </Billing>,
  {
    onRecoverableError: (error: unknown) => {
      recorded.__recoverable.push(error instanceof Error ? error.message : String(error));
    },
  },
);

import express from 'express';
import { dunwallExpress } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer } from './session.js';

export const app = express();

// After your sign-in, before the routes it protects.
app.use(
  dunwallExpress(dunwall, {
    // The Stripe customer id of the account signed in; null: not a customer's request.
    customer: (req: express.Request) => signedInCustomer(req.headers.cookie),
    // Always reachable: /api/me, where the page learns who is signed in (refused, a locked-out
    // customer's page could not show the gate), and the pages to pay and to sign out.
    exempt: ['/api/me', '/billing', '/billing/*', '/logout'],
    // A page load goes to the billing page (303); an API call gets the 402 problem.
    redirectTo: '/billing',
  }),
);

// Who is signed in, for the page's <DunwallProvider>: { customer, hmac }, both null when signed out.
app.get('/api/me', (req, res) => {
  res.json(dunwall.identity(signedInCustomer(req.headers.cookie)));
});
app.get('/api/projects', (_req, res) => {
  res.json({ projects: [] });
});
app.get('/billing', (_req, res) => {
  res.send('Billing: pay the overdue invoice here.');
});

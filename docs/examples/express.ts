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
    // Always reachable, so that a locked-out customer can pay or sign out.
    exempt: ['/billing', '/billing/*', '/logout'],
    // A page load goes to the billing page (303); an API call gets the 402 problem.
    redirectTo: '/billing',
  }),
);

app.get('/api/projects', (_req, res) => {
  res.json({ projects: [] });
});
app.get('/billing', (_req, res) => {
  res.send('Billing: pay the overdue invoice here.');
});

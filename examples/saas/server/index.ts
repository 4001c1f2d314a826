import { fileURLToPath } from 'node:url';
import express from 'express';
import { dunwallExpress } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer, signInCookie, signOutCookie } from './session.js';

export const app = express();

// The front end Vite built (npm run build): public files, like any page's script.
app.use(express.static(fileURLToPath(new URL('../dist', import.meta.url))));

// Sign-in and sign-out, before the middleware: a locked-out customer can still leave.
app.get('/signin', (req, res) => {
  const cookie = signInCookie(req.query.customer);
  if (cookie === null) {
    res.status(400).send('Sign in with ?customer=cus_...');
    return;
  }
  res.setHeader('Set-Cookie', cookie).redirect(303, '/');
});
app.get('/logout', (_req, res) => {
  res.setHeader('Set-Cookie', signOutCookie).redirect(303, '/');
});

// Every route below refuses a locked-out customer with the 402 problem.
app.use(
  dunwallExpress(dunwall, {
    customer: (req: express.Request) => signedInCustomer(req.headers.cookie),
    // /api/me must answer in lockout too: without it, the page cannot show the gate.
    exempt: ['/api/me', '/billing', '/billing/*', '/logout'],
  }),
);

// Who is signed in, for the page's provider: the customer id and its hmac (signed with the
// tenant's HMAC secret, so that Dunwall's answer carries the invoice's "Pay now" link); null
// and null for a signed-out visitor.
app.get('/api/me', (req, res) => {
  res.set('Cache-Control', 'no-store').json(dunwall.identity(signedInCustomer(req.headers.cookie)));
});

app.get('/api/projects', (_req, res) => {
  res.json({ projects: [{ name: 'Website' }, { name: 'Mobile app' }] });
});
app.get('/api/usage', (_req, res) => {
  res.json({ requests: 48_210 });
});
app.get('/billing', (_req, res) => {
  res.send('Billing: pay the overdue invoice here.');
});

// Enforce from the first request when Dunwall answers; when it does not, serve anyway:
// until the copy has heard from Dunwall, every customer is let through (fail open).
try {
  await dunwall.ready();
} catch (err) {
  console.warn(`Dunwall is not ready (${(err as Error).message}): serving, failing open`);
}
const server = app.listen(Number(process.env.PORT ?? 3001), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address();
  if (address !== null && typeof address === 'object')
    console.log(`Acme listening on http://${address.address}:${address.port}`);
});

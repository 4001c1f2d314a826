import { Hono } from 'hono';
import type { Context } from 'hono';
import { dunwallHono } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer } from './session.js';

export const app = new Hono();

app.use(
  dunwallHono(dunwall, {
    customer: (c: Context) => signedInCustomer(c.req.header('cookie')),
    // /api/me (who is signed in: the page needs it to show the gate), paying, signing out.
    exempt: ['/api/me', '/billing', '/billing/*', '/logout'],
    redirectTo: '/billing',
  }),
);

app.get('/api/me', (c) => c.json(dunwall.identity(signedInCustomer(c.req.header('cookie')))));
app.get('/api/projects', (c) => c.json({ projects: [] }));
app.get('/billing', (c) => c.text('Billing: pay the overdue invoice here.'));

import Fastify from 'fastify';
import type { FastifyRequest } from 'fastify';
import { dunwallFastify } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer } from './session.js';

export const app = Fastify();

// Registered at the root, its hook protects every route of the app.
await app.register(dunwallFastify, {
  dunwall,
  customer: (request: FastifyRequest) => signedInCustomer(request.headers.cookie),
  // /api/me (who is signed in: the page needs it to show the gate), paying, signing out.
  exempt: ['/api/me', '/billing', '/billing/*', '/logout'],
  redirectTo: '/billing',
});

app.get('/api/me', async (request) => dunwall.identity(signedInCustomer(request.headers.cookie)));
app.get('/api/projects', async () => ({ projects: [] }));
app.get('/billing', async () => 'Billing: pay the overdue invoice here.');

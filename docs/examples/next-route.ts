// app/api/projects/route.ts: each route to protect is wrapped. Not app/api/me/route.ts, where
// the page learns who is signed in: refused, a locked-out customer's page could not show the gate.
import { withDunwall } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer } from './session.js';

const options = { customer: (request: Request) => signedInCustomer(request.headers.get('cookie')) };

export const GET = withDunwall(dunwall, options, async () => Response.json({ projects: [] }));

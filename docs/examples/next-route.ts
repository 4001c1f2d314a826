// app/api/projects/route.ts
import { withDunwall } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer } from './session.js';

const options = { customer: (request: Request) => signedInCustomer(request.headers.get('cookie')) };

export const GET = withDunwall(dunwall, options, async () => Response.json({ projects: [] }));

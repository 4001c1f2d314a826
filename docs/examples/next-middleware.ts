// middleware.ts (proxy.ts from Next.js 16 on, its function named proxy)
import { checkRequest } from '@dunwall/node';
import type { MiddlewareOptions } from '@dunwall/node';
import { dunwall } from './dunwall.js';
import { signedInCustomer } from './session.js';

const options: MiddlewareOptions<Request> = {
  customer: (request) => signedInCustomer(request.headers.get('cookie')),
  // /api/me (who is signed in: the page needs it to show the gate), paying, signing out.
  exempt: ['/api/me', '/billing', '/billing/*', '/logout'],
  redirectTo: '/billing',
};

export async function middleware(request: Request): Promise<Response | undefined> {
  // null: the request goes on to its page or route handler.
  return (await checkRequest(dunwall, options, request)) ?? undefined;
}

export const config = {
  // Every path but Next.js's own files.
  matcher: ['/((?!_next/static|_next/image|favicon.ico).*)'],
  // The copy lives in the server's memory: the Node.js runtime, not the Edge runtime.
  runtime: 'nodejs',
};

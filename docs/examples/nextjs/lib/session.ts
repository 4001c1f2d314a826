/**
 * Stands in for the application's own sign-in in the example of docs/nextjs.md (which does
 * not show this file): `currentCustomer()` gives the Stripe customer id of the account
 * signed in for the request being rendered, or null, as an app's `auth()` does from the
 * request's cookies. The tests render a request as a customer with `asCustomer`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const request = new AsyncLocalStorage<string | null>();

export function asCustomer<T>(customerId: string | null, render: () => T): T {
  return request.run(customerId, render);
}

export async function currentCustomer(): Promise<string | null> {
  return request.getStore() ?? null;
}

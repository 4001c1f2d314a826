// The app's own sign-in, reduced to a stand-in: a `customer` cookie names the Stripe customer
// signed in, and anyone may choose it at /signin?customer=cus_... Replace it with your real
// sign-in: everything else in this app is Dunwall's packages, as the docs show them.
const COOKIE = /(?:^|;\s*)customer=(cus_[A-Za-z0-9]{1,64})(?:;|$)/;
const CUSTOMER_ID = /^cus_[A-Za-z0-9]{1,64}$/;

/** The Stripe customer id of the account signed in, or null. */
export function signedInCustomer(cookieHeader: string | null | undefined): string | null {
  return COOKIE.exec(cookieHeader ?? '')?.[1] ?? null;
}

/** The cookie that signs `customer` in, or null when it is not a Stripe customer id. */
export function signInCookie(customer: unknown): string | null {
  if (typeof customer !== 'string' || !CUSTOMER_ID.test(customer)) return null;
  return `customer=${customer}; Path=/; HttpOnly; SameSite=Lax`;
}

export const signOutCookie = 'customer=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0';

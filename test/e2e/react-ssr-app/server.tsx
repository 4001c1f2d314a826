/**
 * What Next.js does with docs/examples/nextjs for one request, server side: runs the layout
 * (a server component) as the signed-in customer, finds the client component it returns, and
 * renders it with `renderToString`; its props (minus the children) are what the browser
 * hydrates it with. Bundled by esbuild with the React of the run (18 or 19).
 */
import { isValidElement, version } from 'react';
import type { ReactElement, ReactNode } from 'react';
import { renderToString } from 'react-dom/server';
import { Billing } from '../../../docs/examples/nextjs/app/billing.js';
import type { BillingProps } from '../../../docs/examples/nextjs/app/billing.js';
import RootLayout from '../../../docs/examples/nextjs/app/layout.js';
import { dunwall } from '../../../docs/examples/nextjs/lib/dunwall.js';
import { asCustomer } from '../../../docs/examples/nextjs/lib/session.js';
import { Page } from './page.js';

export type ClientProps = Omit<BillingProps, 'children'>;

function clientBoundary(node: ReactNode): ReactElement<BillingProps> | null {
  if (!isValidElement<{ children?: ReactNode }>(node)) return null;
  if (node.type === Billing) return node as ReactElement<BillingProps>;
  const children = node.props.children;
  for (const child of Array.isArray(children) ? (children as ReactNode[]) : [children]) {
    const found = clientBoundary(child);
    if (found) return found;
  }
  return null;
}

export async function renderPage(
  customer: string | null,
): Promise<{ html: string; props: ClientProps; react: string }> {
  const tree = await asCustomer(customer, () => RootLayout({ children: <Page /> }));
  const boundary = clientBoundary(tree);
  if (!boundary) throw new Error('the layout renders no <Billing>');
  // The props Next.js serializes for the browser: all but the children (rendered on the server, sent as their own payload).
  const props: ClientProps = { ...boundary.props };
  delete (props as BillingProps).children;
  return { html: renderToString(boundary), props, react: version };
}

/** Stops the layout's copy of the statuses (lib/dunwall.ts). */
export function close(): Promise<void> {
  return dunwall.close();
}

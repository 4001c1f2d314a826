/** @jsxImportSource preact */
import { Page } from '../ui.js';

export function Subscribers() {
  return (
    <Page title="Subscribers">
      <p>Subscribers.</p>
    </Page>
  );
}

export function SubscriberPage() {
  return (
    <Page title="Subscriber">
      <p>Subscriber.</p>
    </Page>
  );
}

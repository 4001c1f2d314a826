/** @jsxImportSource preact */
import { Page } from '../ui.js';

export function Settings() {
  return (
    <Page title="Settings">
      <p>Settings.</p>
    </Page>
  );
}

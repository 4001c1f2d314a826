/** @jsxImportSource preact */
import { Page } from '../ui.js';

export function Health() {
  return (
    <Page title="Health">
      <p>Health.</p>
    </Page>
  );
}

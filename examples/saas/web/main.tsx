import { createRoot } from 'react-dom/client';
import { App } from './App';

// Who is signed in, and the customer's hmac, from the app's own backend.
const me = (await fetch('/api/me').then((r) => r.json())) as { customer: string | null; hmac: string | null };
const root = document.getElementById('root');
if (root) createRoot(root).render(<App customer={me.customer} hmac={me.hmac} />);

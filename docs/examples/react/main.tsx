import { createRoot } from 'react-dom/client';
import { App } from './App';

// Your app knows who is signed in; its backend also computes the customer's hmac.
const me = (await fetch('/api/me').then((r) => r.json())) as { customer: string; hmac: string };
const root = document.getElementById('root');
if (root) createRoot(root).render(<App customer={me.customer} hmac={me.hmac} />);

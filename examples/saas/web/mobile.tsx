// The React Native screen (mobile/App.tsx) in a browser, through react-native-web: what the
// phone shows, on a page of its own.
import { createRoot } from 'react-dom/client';
import App from '../mobile/App';

const me = (await fetch('/api/me').then((r) => r.json())) as { customer: string | null; hmac: string | null };
const root = document.getElementById('root');
if (root) createRoot(root).render(<App customer={me.customer} hmac={me.hmac} />);

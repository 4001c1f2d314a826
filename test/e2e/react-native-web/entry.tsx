/** docs/examples/react-native/App.tsx as an app renders it once signed in: the customer and hmac from the page's query. */
import { createRoot } from 'react-dom/client';
import App from '../../../docs/examples/react-native/App.js';

const query = new URLSearchParams(location.search);
const root = document.getElementById('root');
if (root) createRoot(root).render(<App customer={query.get('customer')} hmac={query.get('hmac')} />);

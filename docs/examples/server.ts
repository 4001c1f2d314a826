// server.ts: starts the Express app of express.ts (below).
import { dunwall } from './dunwall.js';
import { app } from './express.js';

const port = Number(process.env.PORT ?? 3000);

// Enforce from the first request: wait for the copy's first list, 10 s at most. Dunwall away,
// or the key refused: say why, and listen anyway. Everyone is let through until the copy
// reaches Dunwall, which it keeps trying in the background.
await dunwall.ready().catch((err: unknown) => console.warn(`dunwall: starting without the list: ${String(err)}`));

app.listen(port, () => console.log(`listening on port ${port}`));

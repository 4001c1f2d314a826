import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { availableEngines, pgClients } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';

const postgres = (await availableEngines()).find((e) => e.name === 'postgres');

describe.skipIf(!postgres)('change notifications in a schema of their own (PostgreSQL)', () => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let listener: pg.Client;
  const clients = pgClients();
  const heard: { channel: string; payload: string | undefined }[] = [];

  beforeAll(async () => {
    if (!postgres) return;
    opened = await postgres.open();
    if (opened.target.engine !== 'postgres') throw new Error('a PostgreSQL target was expected');
    listener = await clients.open(opened.target.url);
    listener.on('notification', (n) => heard.push({ channel: n.channel, payload: n.payload }));
  });
  afterAll(async () => {
    await clients.endAll();
    await opened?.cleanup();
  });

  it("notifies on the schema's own channel, never on the one production listens to", async () => {
    const [row] = await opened.db.query<{ channel: string; schema: string }>(
      'SELECT dunwall_changes_channel() AS channel, current_schema() AS schema',
    );
    expect(row?.schema).toMatch(/^dunwall_test_/);
    expect(row?.channel).toBe(`dunwall_invalidate_${row?.schema ?? ''}`);
    await listener.query('LISTEN dunwall_invalidate');
    await listener.query(`LISTEN "${row?.channel ?? ''}"`);
    await opened.store.tenants.createTenant(newTenant('acme'), new Date());
    // Both channels' notifications of one commit would arrive together: wait for the
    // schema's, then see that production's channel heard nothing.
    for (let i = 0; i < 100 && !heard.some((h) => h.channel === row?.channel); i += 1) await listener.query('SELECT 1');
    expect(heard.filter((h) => h.channel === row?.channel).length).toBeGreaterThan(0);
    expect(heard.filter((h) => h.channel === 'dunwall_invalidate')).toEqual([]);
    // In the public schema (the listener's session), the channel is the one it always was.
    const publicChannel = await listener.query<{ channel: string }>(
      `SELECT ${row?.schema ?? ''}.dunwall_changes_channel() AS channel`,
    );
    expect(publicChannel.rows[0]?.channel).toBe('dunwall_invalidate');
  });
});

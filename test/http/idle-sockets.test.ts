import { afterEach, describe, expect, it, vi } from 'vitest';
import { once } from 'node:events';
import type { Server } from 'node:http';
import { connect, createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { closeIdleSockets } from '../../src/http/connections.js';

const IDLE_MS = 10_000;
const INTERVAL_MS = 1_000;

/** An echo server (whatever a socket sends comes back) under the sweep. */
async function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.on('data', (chunk) => socket.write(chunk)));
  closeIdleSockets(server as unknown as Server, IDLE_MS, INTERVAL_MS);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server: server as unknown as Server, port: (server.address() as AddressInfo).port };
}

async function client(server: Server, port: number): Promise<Socket> {
  const accepted = once(server, 'connection');
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  await accepted;
  return socket;
}

/** Sends a byte and waits for it to come back: the server read it and wrote it. */
async function talk(socket: Socket): Promise<void> {
  const echoed = once(socket, 'data');
  socket.write('x');
  await echoed;
}

describe('idle sockets, closed by a periodic sweep', () => {
  let server: Server | null = null;

  afterEach(async () => {
    vi.useRealTimers();
    server?.close();
    server = null;
  });

  it('destroys a silent socket once idle for the bound, and spares one that reads and writes', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    const started = await echoServer();
    server = started.server;
    const silent = await client(server, started.port);
    const talking = await client(server, started.port);
    const silentClosed = once(silent, 'close');
    let silentGone = false;
    void silentClosed.then(() => (silentGone = true));

    // Half the bound at a time, the talking socket sending and receiving in between.
    for (let i = 0; i < 4; i++) {
      await vi.advanceTimersByTimeAsync(IDLE_MS / 2);
      await talk(talking);
    }
    await silentClosed;
    expect(silentGone).toBe(true);
    expect(talking.destroyed).toBe(false);

    // Silent from now on: it goes too, within a sweep of its bound.
    const talkingClosed = once(talking, 'close');
    await vi.advanceTimersByTimeAsync(IDLE_MS + INTERVAL_MS);
    await talkingClosed;
  });

  it('never sweeps with a bound of 0', async () => {
    const plain = createServer();
    closeIdleSockets(plain as unknown as Server, 0, INTERVAL_MS);
    expect(plain.listenerCount('connection')).toBe(0);
  });
});

import { connect, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { HTTP_LIMITS } from '../src/server/http-transport.js';
import { Emulator } from '../src/server/emulator.js';
import { startEmulator } from './helpers/emulator.js';
import { http } from './helpers/oauth.js';
import { pollUntil } from './helpers/wait.js';

const METADATA = '/.well-known/oauth-authorization-server';

/** A raw connection to the emulator; `closed` turns true once the server closed it. */
interface Conn {
  socket: Socket;
  closed: boolean;
  data: string;
}

function open(baseUrl: string): Promise<Conn> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const conn: Conn = { socket: connect({ host: hostname, port: Number(port) }), closed: false, data: '' };
    conn.socket.setEncoding('latin1');
    conn.socket.on('data', (chunk: string) => (conn.data += chunk));
    conn.socket.on('close', () => (conn.closed = true));
    conn.socket.on('error', () => undefined);
    conn.socket.once('connect', () => resolve(conn));
    conn.socket.once('error', reject);
  });
}

const openMany = async (baseUrl: string, n: number): Promise<Conn[]> => {
  const conns: Conn[] = [];
  // In tens: a loaded machine's accept queue is not the subject here.
  for (let i = 0; i < n; i += 10) conns.push(...(await Promise.all(Array.from({ length: Math.min(10, n - i) }, () => open(baseUrl)))));
  return conns;
};

const head = (baseUrl: string) => `GET ${METADATA} HTTP/1.1\r\nHost: ${new URL(baseUrl).host}\r\n`;

/**
 * An emulator of one test's own, stopped when that test ends: the timeout tests below only wait on Node's timers
 * (idle sockets, nothing to compute), so they wait together, and the helper's stop after each test would stop theirs.
 */
async function withOwnEmulator(test: (emu: Emulator) => Promise<void>): Promise<void> {
  const emu = await Emulator.start({ port: 0, authPort: 0, inMemory: true });
  try {
    await test(emu);
  } finally {
    await emu.stop();
  }
}

describe('41.2, 41.3: the HTTP transport bounds connections, heads and idle keep-alive', () => {
  it('41.2: Node defaults for the head: 16 KiB, a 10 s head timeout, 5 s keep-alive, and a connection bound below a desktop fd limit', () => {
    expect(HTTP_LIMITS.head).toBe(16 * 1024);
    expect(HTTP_LIMITS.headersTimeoutMs).toBe(10_000);
    expect(HTTP_LIMITS.keepAliveMs).toBe(5_000);
    expect(HTTP_LIMITS.connections).toBeLessThan(1024 - 256);
  });

  it('41.2: 200 connections that never end a 15 KB head: at most maxConnections stay open, and a normal client is answered', async () => {
    const max = 40;
    const emu = await startEmulator({ maxConnections: max });
    const conns = await openMany(emu.baseUrl, 200);
    // Each sends a head that stays just under the parser's limit and never ends.
    for (const c of conns) c.socket.write(`${head(emu.baseUrl)}x-padding: ${'a'.repeat(15_000)}\r\n`);
    // The oldest unfinished heads were closed for the newer connections.
    await pollUntil(() => conns.filter((c) => !c.closed).length <= max, `at most ${max} connections open`);
    const res = await http(`${emu.baseUrl}${METADATA}`);
    expect(res.status).toBe(200);
    expect(conns.filter((c) => !c.closed).length).toBeLessThanOrEqual(max);
    for (const c of conns) c.socket.destroy();
  });

  it('41.3: 100 idle keep-alive connections on a bound of 40: the oldest idle ones are closed, every new client is served', async () => {
    const max = 40;
    const emu = await startEmulator({ maxConnections: max });
    const conns = await openMany(emu.baseUrl, 100);
    for (const c of conns) c.socket.write(`${head(emu.baseUrl)}\r\n`);
    // Each connection that stayed was answered and is now idle, kept alive.
    await pollUntil(() => conns.every((c) => c.closed || c.data.includes('\r\n\r\n{')), 'every open connection answered');
    const alive = conns.filter((c) => !c.closed);
    expect(alive.length).toBeLessThanOrEqual(max);
    expect(alive.every((c) => c.data.startsWith('HTTP/1.1 200'))).toBe(true);
    // The newest stayed: the oldest idle went first.
    expect(conns.at(-1)!.closed).toBe(false);
    for (let i = 0; i < 5; i++) expect((await http(`${emu.baseUrl}${METADATA}`)).status).toBe(200);
    for (const c of conns) c.socket.destroy();
  });

  it('41.3: when every connection has a request in flight, a new one gets 503 with Retry-After and those in flight go on', async () => {
    const max = 4;
    const emu = await startEmulator({ maxConnections: max });
    // Four event streams of the admin API: each a request in flight for as long as it is read.
    const busy = await openMany(emu.baseUrl, max);
    const { host } = new URL(emu.baseUrl);
    for (const c of busy) c.socket.write(`GET /_admin/events HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${emu.adminToken}\r\n\r\n`);
    await pollUntil(() => busy.every((c) => c.data.includes('event: overview')), 'every stream started');
    const extra = await open(emu.baseUrl);
    await pollUntil(() => extra.closed, 'the extra connection closed');
    expect(extra.data).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\nRetry-After: 1\r\n/);
    expect(extra.data).toContain('all 4 connections the emulator keeps open have a request in flight');
    expect(busy.every((c) => !c.closed)).toBe(true);
    for (const c of busy) c.socket.destroy();
  });

  it.concurrent(
    '41.3: an idle keep-alive connection is closed by the server after keepAliveMs (5 s), not fastify’s 72 s',
    { timeout: 20_000 },
    () =>
      withOwnEmulator(async (emu) => {
        const conn = await open(emu.baseUrl);
        conn.socket.write(`${head(emu.baseUrl)}\r\n`);
        await pollUntil(() => conn.data.includes('\r\n\r\n{'), 'the answer');
        await pollUntil(() => conn.closed, 'the server closing the idle connection', { timeoutMs: 15_000 });
      }),
  );

  it.concurrent(
    '41.3: a body that never comes is closed after the request timeout (20 s), with 408, and the connection closes',
    { timeout: 45_000 },
    () =>
      withOwnEmulator(async (emu) => {
        const conn = await open(emu.baseUrl);
        const { host } = new URL(emu.baseUrl);
        conn.socket.write(
          `POST /oauth/register HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`,
        );
        await pollUntil(() => conn.closed, 'the server closing the request whose body stopped', { timeoutMs: 35_000 });
        expect(conn.data).toMatch(/^HTTP\/1\.1 408 /);
      }),
  );

  it.concurrent('41.2: a head that stops half way is closed after the head timeout (10 s), with 408', { timeout: 25_000 }, () =>
    withOwnEmulator(async (emu) => {
      const conn = await open(emu.baseUrl);
      conn.socket.write(head(emu.baseUrl));
      await pollUntil(() => conn.closed, 'the server closing the unfinished head', { timeoutMs: 20_000 });
      expect(conn.data).toMatch(/^HTTP\/1\.1 408 /);
    }),
  );
});

/**
 * Issue 45.7: a call the client waits to retry says so on stderr, once in a log, and on a terminal as a countdown
 * in place that is cleared when the retry goes out.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../src/core/state/clock.js';
import type { ClientContext } from '../src/client/context.js';
import { HttpClient } from '../src/client/http.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
});

/** 429 with Retry-After: 2 once, then 200. */
async function limitedOnce(): Promise<string> {
  let calls = 0;
  server = createServer((_req, res) => {
    if (calls++ === 0) res.writeHead(429, { 'retry-after': '2', 'content-type': 'application/json' }).end('{}');
    else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

function context(tty: boolean): { ctx: ClientContext; written: string[] } {
  const written: string[] = [];
  const stderr = { isTTY: tty, write: (text: string) => void written.push(text) };
  const ctx = {
    clock: systemClock,
    env: {},
    cwd: process.cwd(),
    stdout: { write: () => true },
    stderr,
    openUrl: async () => undefined,
  } as unknown as ClientContext;
  return { ctx, written };
}

describe('45.7 a rate-limited call that is retried says so', () => {
  it('45.7 in a log: one line naming the wait and that Ctrl-C stops it', async () => {
    const { ctx, written } = context(false);
    const http = new HttpClient(ctx);
    const res = await http.send({ method: 'GET', url: await limitedOnce() });
    await http.close();
    expect(res.status).toBe(200);
    expect(written).toEqual(['agent-access: rate limited; retrying in 2 s (attempt 2 of 4; Ctrl-C stops)\n']);
  });

  it('45.7 on a terminal: the line counts down in place (2 s, then 1 s) and is cleared before the answer', async () => {
    const { ctx, written } = context(true);
    const http = new HttpClient(ctx);
    const res = await http.send({ method: 'GET', url: await limitedOnce() });
    await http.close();
    expect(res.status).toBe(200);
    const shown = written.join('');
    expect(shown).toMatch(/^\r\x1b\[2K\S agent-access: rate limited; retrying in 2 s \(attempt 2 of 4; Ctrl-C stops\)/);
    expect(shown).toMatch(/retrying in 1 s \(attempt 2 of 4; Ctrl-C stops\)/);
    expect(shown.endsWith('\r\x1b[2K')).toBe(true);
    expect(shown).not.toContain('\n');
  });
});

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openConsent } from '../src/conformance/runner.js';
import { CONSENT_OPENER } from '../src/index.js';

/**
 * bin/consent-opener.js, the $BROWSER of `conformance client`'s scenarios: it plays the person's browser, so it must
 * follow redirects as a browser does, to the client's redirect URI, and say plainly when it cannot.
 */
let server: Server;
let base: string;
const seen: string[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(req.url!);
    const url = new URL(req.url!, base);
    const hop = Number(url.searchParams.get('hop') ?? 0);
    if (url.pathname === '/authorize') res.writeHead(302, { location: '/consent?hop=1' }).end();
    else if (url.pathname === '/consent') res.writeHead(303, { location: `${base}/callback?code=c1&state=s1` }).end('see other');
    else if (url.pathname === '/callback') res.writeHead(200, { 'content-type': 'text/html' }).end('<p>You can close this window.</p>');
    else if (url.pathname === '/loop') res.writeHead(302, { location: `/loop?hop=${hop + 1}` }).end();
    else if (url.pathname === '/custom-scheme') res.writeHead(302, { location: 'com.example.app:/callback?code=c1' }).end();
    else res.writeHead(404).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => server.close());

async function open(...args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CONSENT_OPENER, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stderr };
}

describe('the consent opener ($BROWSER of conformance client)', () => {
  it('follows a relative and an absolute redirect to the redirect URI, reads its answer and exits 0', async () => {
    seen.length = 0;
    const res = await open(`${base}/authorize?client_id=x`);
    expect(res).toEqual({ code: 0, stderr: '' });
    expect(seen).toEqual(['/authorize?client_id=x', '/consent?hop=1', '/callback?code=c1&state=s1']);
  });

  it('a server that does not answer: exit 1, naming the URL and the cause', async () => {
    const closed = createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as AddressInfo).port;
    closed.close();
    await once(closed, 'close');
    const res = await open(`http://127.0.0.1:${port}/authorize`);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(`consent-opener: http://127.0.0.1:${port}/authorize: connect ECONNREFUSED 127.0.0.1:${port}\n`);
  });

  it('more than 20 redirects, as fetch allows, or one to a scheme that is not http(s): exit 1, saying so', async () => {
    seen.length = 0;
    const loop = await open(`${base}/loop`);
    expect(loop.code).toBe(1);
    expect(loop.stderr).toMatch(/: more than 20 redirects\n$/);
    expect(seen).toHaveLength(21);
    const custom = await open(`${base}/custom-scheme`);
    expect(custom.code).toBe(1);
    expect(custom.stderr).toMatch(/: a redirect to com\.example\.app: cannot be followed\n$/);
  });

  it('without a URL as its last argument: usage, exit 2', async () => {
    expect(await open()).toEqual({ code: 2, stderr: 'usage: consent-opener URL (the consent URL, as $BROWSER is called)\n' });
    expect((await open('not-a-url')).code).toBe(2);
  });

  it('in process (ClientRun.openConsent): the same steps, settled as the process would exit', async () => {
    seen.length = 0;
    await openConsent(`${base}/authorize?client_id=x`);
    expect(seen).toEqual(['/authorize?client_id=x', '/consent?hop=1', '/callback?code=c1&state=s1']);
    await expect(openConsent(`${base}/loop`)).rejects.toThrow(/^more than 20 redirects$/);
    await expect(openConsent(`${base}/custom-scheme`)).rejects.toThrow(/^a redirect to com\.example\.app: cannot be followed$/);
    await expect(openConsent(`${base}/authorize`, AbortSignal.abort())).rejects.toThrow(/abort/i);
  });
});

import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onTestFinished } from 'vitest';

/**
 * A server that breaks one rule: a proxy on 127.0.0.1 in front of an emulator's two hosts ({base_url} and {auth_url}),
 * which speaks for the emulator under its own ports and lets a mutation change one request or answer.
 *
 * Every URL of the emulator is rewritten to the proxy's in both directions. The access tokens' `iss` and `aud` name the
 * emulator's port, and a proxy cannot sign: it hands out a token of its own whose payload names the proxy (its
 * signature no longer matches), and swaps it back for the real one on the way in. So a mutation of the payload
 * (`aud` without /mcp) fails the check that reads the claims, and nothing else.
 */
export interface ProxiedRequest {
  host: 'base' | 'auth';
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string;
}

export interface ProxiedAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface Mutation {
  /** Changes a request before it goes on, or answers it itself (an answer returned: never forwarded). */
  request?(req: ProxiedRequest): ProxiedAnswer | void;
  /** Changes an answer on its way back (URLs already the proxy's). */
  answer?(req: ProxiedRequest, res: ProxiedAnswer): void;
  /** Changes the payload of an access token the proxy hands out (its URLs already the proxy's). */
  claims?(claims: Record<string, unknown>): void;
}

export interface ContractProxy {
  baseUrl: string;
  authUrl: string;
  close(): Promise<void>;
}

const portOf = (url: string) => new URL(url).port;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const listen = (server: Server) =>
  new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));

/** Starts the proxy in front of `target` (an emulator's base and auth URLs) with `mutation` applied. */
export async function startContractProxy(target: { baseUrl: string; authUrl: string }, mutation: Mutation = {}): Promise<ContractProxy> {
  const servers = { base: createServer(), auth: createServer() };
  const ports = { base: await listen(servers.base), auth: await listen(servers.auth) };
  const emulator = { base: portOf(target.baseUrl), auth: portOf(target.authUrl) };
  const swap = (text: string, from: Record<'base' | 'auth', string | number>, to: Record<'base' | 'auth', string | number>) =>
    text
      .replace(new RegExp(`127\\.0\\.0\\.1(:|%3A)${from.base}(?!\\d)`, 'gi'), (_, sep: string) => `127.0.0.1${sep}${to.base}`)
      .replace(new RegExp(`127\\.0\\.0\\.1(:|%3A)${from.auth}(?!\\d)`, 'gi'), (_, sep: string) => `127.0.0.1${sep}${to.auth}`);
  const inward = (text: string) => swap(text, ports, emulator);
  const outward = (text: string) => swap(text, emulator, ports);
  const ownTokens = new Map<string, string>();

  /** The proxy's own access token for a real one: the payload names the proxy, the mutation may change it. */
  const ownToken = (real: string) => {
    const parts = real.split('.');
    if (parts.length !== 3) return real;
    const claims = JSON.parse(outward(Buffer.from(parts[1]!, 'base64url').toString('utf8'))) as Record<string, unknown>;
    mutation.claims?.(claims);
    const own = `${parts[0]}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${parts[2]}`;
    ownTokens.set(own, real);
    return own;
  };
  const realToken = (text: string) => text.replace(/[\w-]+\.[\w-]+\.[\w-]+/g, (t) => ownTokens.get(t) ?? t);

  for (const host of ['base', 'auth'] as const) {
    servers[host].on('request', (incoming: IncomingMessage, outgoing) => {
      void (async () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(incoming.headers))
          if (typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k)) headers[k] = realToken(inward(v));
        const req: ProxiedRequest = {
          host,
          method: incoming.method ?? 'GET',
          url: new URL(inward(incoming.url ?? '/'), host === 'base' ? target.baseUrl : target.authUrl),
          headers,
          body: realToken(inward(await readBody(incoming))),
        };
        let res = mutation.request?.(req) ?? undefined;
        if (!res) {
          const answer = await fetch(req.url, {
            method: req.method,
            headers: req.headers,
            body: req.method === 'GET' || req.method === 'HEAD' ? undefined : req.body,
            redirect: 'manual',
          });
          const out: Record<string, string> = {};
          answer.headers.forEach((v, k) => {
            if (!['content-length', 'content-encoding', 'transfer-encoding', 'connection', 'keep-alive'].includes(k)) out[k] = outward(v);
          });
          let body = outward(await answer.text());
          if (req.url.pathname === '/oauth/token' && answer.status === 200) {
            const tokens = JSON.parse(body) as Record<string, unknown>;
            if (typeof tokens.access_token === 'string') tokens.access_token = ownToken(tokens.access_token);
            body = JSON.stringify(tokens);
          }
          res = { status: answer.status, headers: out, body };
          mutation.answer?.(req, res);
        }
        outgoing.writeHead(res.status, { ...res.headers, 'content-length': Buffer.byteLength(res.body) }).end(res.body);
      })().catch((e: Error) => outgoing.writeHead(502, { 'content-type': 'text/plain' }).end(`proxy: ${e.message}`));
    });
  }
  const proxy: ContractProxy = {
    baseUrl: `http://127.0.0.1:${ports.base}`,
    authUrl: `http://127.0.0.1:${ports.auth}`,
    close: async () => {
      for (const s of Object.values(servers)) {
        s.closeAllConnections();
        await new Promise<void>((resolve) => s.close(() => resolve()));
      }
    },
  };
  onTestFinished(() => proxy.close());
  return proxy;
}

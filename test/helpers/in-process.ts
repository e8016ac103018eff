/**
 * Emulators started without listening (`listen: false`), by the origins their URLs name: the tests' `http()`
 * (helpers/oauth.ts) serves a request to one of them through its `inject`, with no socket. That is how test/unit
 * checks the HTTP rules in one process; what only a real socket shows stays in the integration tests.
 */
import type { Emulator } from '../../src/server/emulator.js';

const byOrigin = new Map<string, Emulator>();
/** Ports no emulator binds; each emulator in this process gets its own pair, so two in one test stay apart. */
let nextPort = 24_100;

export function nextPorts(): { port: number; authPort: number } {
  const port = nextPort;
  nextPort += 2;
  return { port, authPort: port + 1 };
}

export function serveInProcess(emulator: Emulator): () => void {
  const origins = [new URL(emulator.baseUrl).origin, new URL(emulator.authUrl).origin];
  for (const origin of origins) byOrigin.set(origin, emulator);
  return () => origins.forEach((origin) => byOrigin.delete(origin));
}

/** The emulator in this process that serves `url`, if any. */
export const inProcessFor = (url: string): Emulator | undefined => byOrigin.get(new URL(url).origin);

/**
 * `fetch` for clients that take one (oauth4webapi's `customFetch`, the MCP SDK's transports): a request to an
 * emulator in this process goes through its `inject`, any other to the global fetch.
 */
export async function fetchInProcess(input: string | URL | Request, init?: RequestInit): Promise<Response> {
  const request = new Request(input, init);
  const emulator = inProcessFor(request.url);
  if (!emulator) return fetch(request);
  const sent: Record<string, string> = {};
  request.headers.forEach((value, name) => (sent[name] = value));
  const res = await emulator.inject({
    url: request.url,
    method: request.method,
    headers: sent,
    body: request.body ? await request.text() : undefined,
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers))
    for (const one of [value].flat()) if (one !== undefined) headers.append(name, String(one));
  const bodiless = request.method === 'HEAD' || [101, 204, 205, 304].includes(res.statusCode);
  return new Response(bodiless ? null : new Uint8Array(res.rawPayload), { status: res.statusCode, statusText: res.statusMessage, headers });
}

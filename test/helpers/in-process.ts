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

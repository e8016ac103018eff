/**
 * Running the sample clients of test/fixtures/conformance (issue 42 point 5) against an in-process emulator: the
 * consent opener of `conformance client` as the browser that a consent policy answers, the client as a process with
 * the base URL last (or the faulty client in this process), and what the emulator saw of it.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONSENT_OPENER, openConsent } from '../../src/conformance/runner.js';
import { ManualClock } from '../../src/core/state/clock.js';
import type { ConsentPolicy } from '../../src/core/emulation/consent-policy.js';
import type { AppEvent } from '../../src/core/state/events.js';
import type { FaultSpec } from '../../src/core/emulation/fault-spec.js';
import type { Emulator } from '../../src/server/emulator.js';
import { runFaultyClient } from '../fixtures/conformance/faulty-client.mjs';
import { startEmulator } from './emulator.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/conformance/', import.meta.url));

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a sample client of test/fixtures/conformance with `baseUrl` last, its $BROWSER the consent opener, to its exit. */
export async function runSampleClient(script: string, baseUrl: string, env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, [join(FIXTURES, script), baseUrl], {
    env: { ...process.env, BROWSER: CONSENT_OPENER, AGENT_ACCESS_BASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/**
 * The faulty sample client in this process (its runFaultyClient, as runClientConformance calls it), the consent
 * opener's steps as its browser: what the emulator sees is what it sees of the process, without two Node starts.
 */
export async function runFaultyClientHere(baseUrl: string, env: Record<string, string> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const signal = AbortSignal.timeout(60_000);
  const code = await runFaultyClient({
    baseUrl,
    env: { ...(process.env as Record<string, string>), AGENT_ACCESS_BASE_URL: '', ...env },
    stdout: { write: (text) => void (stdout += text) },
    stderr: { write: (text) => void (stderr += text) },
    signal,
    openConsent: (url) => openConsent(url, signal),
  }).catch((e: Error) => {
    // As the process would crash: its stack on stderr, exit 1 (runClientConformance judges a throw so too).
    stderr += `${e.stack}\n`;
    return 1;
  });
  return { code, stdout, stderr };
}

/** An emulator on a manual clock whose consent policy approves (unless told otherwise), and every event it publishes, with the real time seen. */
export async function emulatorWithLog(options: { faults?: FaultSpec[]; seed?: number; rateLimit?: string; consent?: ConsentPolicy } = {}) {
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 9));
  const emulator: Emulator = await startEmulator({
    clock,
    consent: [{ clientId: null, policy: options.consent ?? { decision: 'approve' } }],
    faults: options.faults,
    ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
    ...(options.seed !== undefined ? { varyUnspecified: { seed: options.seed } } : {}),
  });
  const events: Array<AppEvent & { seen: number }> = [];
  emulator.core.events.subscribe((e) => void events.push({ ...e, seen: Date.now() }));
  const of = <N extends AppEvent['name']>(name: N) =>
    events.filter((e): e is Extract<AppEvent, { name: N }> & { seen: number } => e.name === name);
  const polls = () => of('request.served').filter((e) => e.data.method === 'GET' && e.data.path.startsWith('/research/'));
  return { emulator, clock, events, of, polls };
}

export type Log = Awaited<ReturnType<typeof emulatorWithLog>>;

/**
 * The person's clock moves the way the expiry scenarios move it: 16 minutes once the `expireAfterAsks`th ask (default
 * the first) is charged, before its answer is sent, so every call after it carries an expired token; and 10 minutes
 * at the first poll, so the research job finishes.
 */
export function moveClockAlong({ emulator, clock }: Log, { expireAfterAsks = 1 } = {}): void {
  let asks = 0;
  let polled = false;
  emulator.core.events.subscribe((e) => {
    if (e.name === 'charge.recorded' && (e.data.route === 'POST /chat/ask' || e.data.route === 'tool ask') && ++asks === expireAfterAsks)
      clock.advance(16 * 60_000);
    if (!polled && e.name === 'request.served' && e.data.method === 'GET' && e.data.path.startsWith('/research/')) {
      polled = true;
      clock.advance(10 * 60_000);
    }
  });
}

export const refreshes = (log: Log) => log.of('tokens.issued').filter((e) => e.data.grant_type === 'refresh_token');

/** The person revokes the grant once its first ask is charged: refused from the next request on (spec 3.3, 5.7). */
export function revokeAfterFirstAsk({ emulator }: Log): void {
  let revoked = false;
  emulator.core.events.subscribe((e) => {
    if (revoked || e.name !== 'charge.recorded') return;
    revoked = true;
    emulator.faults.arm({ kind: 'revoke', grant_id: e.data.grant_id });
  });
}

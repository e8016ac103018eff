/**
 * The programmatic API: start the emulated Agent Access Service from test code or CI scripts, in this process or
 * as a child `agent-access serve`, and control it (clock, tokens without the browser) through its admin API, the
 * same way in both cases.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { adminRequest } from './client/admin-api.js';
import { ManualClock, systemClock } from './core/clock.js';
import type { TokenResponse } from './core/grants/index.js';
import { Emulator, type EmulatorOptions } from './server/emulator.js';
import { checkSeed, type VaryUnspecified } from './core/variation.js';

export { Emulator, type EmulatorOptions } from './server/emulator.js';
export { ManualClock, parseDuration, type Clock } from './core/clock.js';
export type { AppEvent, EventMap, EventName } from './core/events.js';
export { AdminError } from './client/admin-api.js';
export type { VaryUnspecified } from './core/variation.js';

export interface StartEmulatorOptions {
  /** `system` (default): real time. `manual`: time stands still until `clock.advance()`; a number starts it there (epoch ms). */
  clock?: 'system' | 'manual' | number;
  /** `in-process` (default) or `child`: a separate `agent-access serve` process, stopped by `stop()`. */
  mode?: 'in-process' | 'child';
  /** Ports; default 0 (free ports). */
  port?: number;
  authPort?: number;
  /** A state file; default: in memory. */
  state?: string;
  fixtures?: string;
  /** Per grant on the REST allowlist, e.g. `60/min`. */
  rateLimit?: string;
  /**
   * Vary what the spec leaves open (`serve --vary-unspecified`): `{ seed }` repeats a run exactly, `true` picks a
   * random seed (read it from `varyUnspecified` of the result). Default: off.
   */
  varyUnspecified?: boolean | VaryUnspecified;
  /** In-process only: any other emulator option (prices, timings, ask timeout, ...). */
  emulator?: Omit<EmulatorOptions, 'clock' | 'port' | 'authPort' | 'state' | 'inMemory' | 'fixtures' | 'rateLimit' | 'varyUnspecified'>;
}

export interface IssueTokensOptions {
  /** Scopes of the grant, e.g. `['ask', 'research']`; checked as at /authorize (retired scopes are refused). */
  scopes: string[];
  /** An identity token (no `resource`): refused by the API, as real identity tokens are. Default false. */
  identity?: boolean;
  /** An existing client; default: a new client is registered. */
  clientId?: string;
  clientName?: string;
  /** A person of the fixtures; default: the default person. */
  personId?: string;
}

export type IssuedTokens = TokenResponse & { client_id: string; grant_id: string };

export interface RunningEmulator {
  readonly baseUrl: string;
  readonly authUrl: string;
  readonly issuer: string;
  readonly adminUrl: string;
  readonly adminToken: string;
  /** The variation mode it runs in, with its seed, or false. */
  readonly varyUnspecified: VaryUnspecified | false;
  readonly clock: {
    readonly mode: 'system' | 'manual';
    /** The emulator's time, epoch ms. */
    now(): Promise<number>;
    /**
     * Moves a manual clock forward (`"16m"`, `"24h"`, `900_000`): access-token expiry, code lifetime, the 24-hour
     * idempotency window, rate-limit windows, research and training all move together; resolves once jobs caught up.
     */
    advance(by: string | number): Promise<number>;
  };
  /**
   * A test shortcut around the consent screen: a grant as if the person had clicked "Zulassen", and its first
   * tokens (real ones: refresh, revocation and the resource guard treat them as any other). Use the browser flow
   * (`agent-access login`, or your client) when the flow itself is under test.
   */
  issueTokens(options: IssueTokensOptions): Promise<IssuedTokens>;
  /** Stops the emulator (in flight requests finish, state is flushed). */
  stop(): Promise<void>;
}

interface Endpoints {
  baseUrl: string;
  authUrl: string;
  issuer: string;
  adminUrl: string;
  adminToken: string;
  varyUnspecified: VaryUnspecified | false;
}

const admin = <T>(e: Endpoints, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> => adminRequest<T>({ adminUrl: e.adminUrl, token: e.adminToken }, method, path, body);

function controls(e: Endpoints, mode: 'system' | 'manual', stop: () => Promise<void>): RunningEmulator {
  return {
    ...e,
    clock: {
      mode,
      now: async () => (await admin<{ now: number }>(e, 'GET', '/clock')).now,
      advance: async (by) => (await admin<{ now: number }>(e, 'POST', '/clock/advance', { by })).now,
    },
    issueTokens: (o) => admin<IssuedTokens>(e, 'POST', '/tokens', { scopes: o.scopes, identity: o.identity, client_id: o.clientId, client_name: o.clientName, person_id: o.personId }),
    stop,
  };
}

const BIN = fileURLToPath(new URL('../bin/agent-access.js', import.meta.url));

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

async function startChild(options: StartEmulatorOptions, mode: 'system' | 'manual'): Promise<RunningEmulator> {
  if (typeof options.clock === 'number') throw new Error('a child emulator starts its manual clock at the current time; pass clock: "manual"');
  if (options.emulator) throw new Error('the `emulator` options apply in-process only; a child takes serve flags');
  const args = ['serve', '--json', '--quiet', '--port', String(options.port ?? 0), '--auth-port', String(options.authPort ?? 0), '--clock', mode, ...(options.state ? ['--state', options.state] : ['--in-memory'])];
  if (options.fixtures) args.push('--fixtures', options.fixtures);
  if (options.rateLimit) args.push('--rate-limit', options.rateLimit);
  if (options.varyUnspecified) args.push(options.varyUnspecified === true ? '--vary-unspecified' : `--vary-unspecified=${checkSeed(options.varyUnspecified.seed)}`);
  const child: ChildProcess = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  // The child never outlives this process, even when a test run ends without calling stop().
  const killChild = () => child.kill('SIGKILL');
  process.once('exit', killChild);
  // The newest stderr only, for the error message of a failed start.
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + String(d)).slice(-16_384)));
  const exited = once(child, 'exit');
  let line: string;
  try {
    line = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`agent-access serve was not ready within ${READY_TIMEOUT_MS / 1000} s: ${stderr.trim()}`)), READY_TIMEOUT_MS);
      createInterface({ input: child.stdout! }).once('line', (l) => {
        clearTimeout(timer);
        resolve(l);
      });
      exited.then(
        ([code]) => reject(new Error(`agent-access serve exited with ${code}: ${stderr.trim()}`)),
        (e: Error) => reject(new Error(`agent-access serve could not start: ${e.message}`)),
      );
    });
  } catch (e) {
    killChild();
    process.off('exit', killChild);
    throw e;
  }
  const ready = JSON.parse(line) as { base_url: string; auth_url: string; issuer: string; admin_url: string; admin_token: string; vary_unspecified?: VaryUnspecified };
  const e: Endpoints = { baseUrl: ready.base_url, authUrl: ready.auth_url, issuer: ready.issuer, adminUrl: ready.admin_url, adminToken: ready.admin_token, varyUnspecified: ready.vary_unspecified ?? false };
  let stopping: Promise<void> | undefined;
  return controls(e, mode, () =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        // A clean stop flushes the state; one that hangs is cut off.
        const timer = setTimeout(killChild, STOP_TIMEOUT_MS);
        await exited.catch(() => undefined);
        clearTimeout(timer);
      }
      process.off('exit', killChild);
    })()),
  );
}

/**
 * Starts the emulator on free loopback ports, in memory unless `state` is given.
 *
 * ```ts
 * const emu = await startEmulator({ clock: 'manual' });
 * const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
 * await emu.clock.advance('16m'); // the access token has expired
 * await emu.stop();
 * ```
 */
export async function startEmulator(options: StartEmulatorOptions = {}): Promise<RunningEmulator> {
  if (typeof options.clock === 'number' && !Number.isFinite(options.clock)) throw new RangeError(`clock: ${options.clock} is not a time (epoch milliseconds)`);
  const mode = options.clock === 'manual' || typeof options.clock === 'number' ? 'manual' : 'system';
  if (options.mode === 'child') return startChild(options, mode);
  const emulator = await Emulator.start({
    ...options.emulator,
    port: options.port ?? 0,
    authPort: options.authPort ?? 0,
    state: options.state,
    inMemory: options.state === undefined,
    fixtures: options.fixtures,
    rateLimit: options.rateLimit,
    clock: mode === 'manual' ? new ManualClock(typeof options.clock === 'number' ? options.clock : Date.now()) : systemClock,
    varyUnspecified: options.varyUnspecified === true ? { seed: randomInt(1_000_000) } : options.varyUnspecified || false,
  });
  const e = { baseUrl: emulator.baseUrl, authUrl: emulator.authUrl, issuer: emulator.issuer, adminUrl: emulator.adminUrl, adminToken: emulator.adminToken, varyUnspecified: emulator.varyUnspecified };
  return controls(e, mode, () => emulator.stop());
}

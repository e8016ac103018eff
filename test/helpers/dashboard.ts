import { stripVTControlCharacters } from 'node:util';
import { createElement } from 'react';
import { render } from 'ink-testing-library';
import type { AppEvent, EventMap, EventName } from '../../src/protocol/events.js';
import type { Finding } from '../../src/protocol/findings.js';
import type { Overview } from '../../src/protocol/overview.js';
import { Dashboard, type DashboardActions } from '../../src/dashboard/app.js';
import type { StreamMessage } from '../../src/dashboard/model.js';
import { pollUntil } from './wait.js';

export const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);

export function overview(overrides: Partial<Overview> = {}): Overview {
  return {
    seq: 0,
    now: T0,
    service: { base_url: 'http://127.0.0.1:4100', auth_url: 'http://127.0.0.1:4101', issuer: 'http://127.0.0.1:4100' },
    persons: { 'person-anna': 'Anna Schmidt' },
    totals: { clients: 1, grants: 0, findings: 0 },
    clients: { 'client-1': { client_id: 'client-1', client_name: 'Wetter-Agent', registered_at: T0 } },
    grants: [],
    families: [],
    research: [],
    training: [],
    charges: { by_client: {}, by_grant: {}, entries: [], replays: [] },
    actions: [],
    requests: [],
    faults: [],
    findings: [],
    ...overrides,
  };
}

/** A client finding as the emulator records it: by default a parallel refresh of client-1's family fam-1, seen once at T0. */
export function finding(overrides: Partial<Finding> = {}): Finding {
  return {
    id: 'refresh.concurrent:client-1:fam-1',
    code: 'refresh.concurrent',
    severity: 'error',
    client_id: 'client-1',
    client_name: 'Wetter-Agent',
    grant_id: 'grant-1',
    family_id: 'fam-1',
    count: 1,
    first_at: T0,
    last_at: T0,
    message:
      'A refresh token (generation 1) was presented again 0.4 s after it was rotated: the client refreshes in parallel with one token, and the replay rule invalidated the whole family.',
    hint: 'Refresh once per token family: serialise refreshes behind one lock or shared promise, so that requests that find the access token expired wait for one refresh and then use its tokens. Each refresh token works once; a second use kills the family.',
    spec: 'spec 3.2; OAuth 2.1 §4.3.1',
    ...overrides,
  };
}

/** A scripted event stream: sequence numbers and times advance like the server's. */
export class Script {
  seq: number;
  at: number;
  constructor(start: { seq?: number; at?: number } = {}) {
    this.seq = start.seq ?? 0;
    this.at = start.at ?? T0;
  }
  /** The next event, `ms` after the previous one. */
  event<N extends EventName>(name: N, data: EventMap[N], ms = 1000): StreamMessage {
    this.at += ms;
    return { type: 'event', event: { seq: ++this.seq, at: this.at, name, data } as AppEvent };
  }
}

export const frameText = (frame: string | undefined): string => stripVTControlCharacters(frame ?? '');

/** Waits until the newest frame satisfies `test` (renders are batched and asynchronous); returns that frame. */
export async function waitForFrame(
  frame: () => string,
  test: (frame: string) => boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<string> {
  const match = await pollUntil(
    () => {
      const f = frame();
      return test(f) ? { frame: f } : undefined;
    },
    what,
    { timeoutMs, describe: frame },
  );
  return match.frame;
}

/**
 * Types keys one at a time, each handled and rendered before the next is read (the dashboard's key handler is the
 * one of the newest render). Both steps are queued as immediates: Ink hands a lone Escape on in one (it could have
 * begun an escape sequence), React's scheduler renders the state change in the next.
 */
export async function pressKeys(stdin: { write(data: string): void }, keys: readonly string[]): Promise<void> {
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  for (const key of keys) {
    stdin.write(key);
    for (let i = 0; i < 3; i++) await turn();
  }
}

/** Renders the dashboard with ink-testing-library over a scripted source; `columns`/`rows` set the terminal's size. */
export function renderDashboard(options: { columns?: number; rows?: number; colors?: boolean; messageMs?: number } = {}) {
  let push: (message: StreamMessage) => void = () => undefined;
  const calls: string[] = [];
  const actions: DashboardActions = {
    revokeGrant: async (id) => void calls.push(`revoke ${id}`),
    decideAction: async (id, decision) => void calls.push(`${decision} ${id}`),
  };
  const app = render(
    createElement(Dashboard, {
      subscribe: (p) => {
        push = p;
        return () => undefined;
      },
      actions,
      colors: options.colors ?? true,
      batchMs: 1,
      ...(options.messageMs === undefined ? {} : { messageMs: options.messageMs }),
    }),
  );
  const stdout = app.stdout as unknown as NodeJS.EventEmitter;
  const resize = (columns: number, rows: number) => {
    Object.defineProperty(stdout, 'columns', { value: columns, configurable: true });
    Object.defineProperty(stdout, 'rows', { value: rows, configurable: true });
    stdout.emit('resize');
  };
  resize(options.columns ?? 80, options.rows ?? 24);
  const frame = () => frameText(app.lastFrame());
  const waitFor = (test: (frame: string) => boolean, what = 'the expected frame') => waitForFrame(frame, test, what);
  return {
    ...app,
    calls,
    resize,
    frame,
    waitFor,
    send: (...messages: StreamMessage[]) => messages.forEach((m) => push(m)),
    press: (...keys: string[]) => pressKeys(app.stdin, keys),
  };
}

export const KEYS = {
  tab: '\t',
  shiftTab: '\u001B[Z',
  down: '\u001B[B',
  up: '\u001B[A',
  escape: '\u001B',
  enter: '\r',
  backspace: '\u007F',
} as const;

import type { AppEvent, EventMap, EventName } from '../core/state/events.js';
import type { Clock } from '../core/state/clock.js';
import type { Finding } from '../protocol/findings.js';
import type { ObservedExchange, ObservedRequest, RequestObserver } from '../server/observer.js';
import { TOOL_SCOPES } from '../server/mcp-tools.js';

/** An event with the real time it happened at: a client's waits are judged in real time. */
export type TimedEvent<N extends EventName = EventName> = Extract<AppEvent, { name: N }> & { real: number };

/**
 * A clock that runs with real time and can jump forward: the scenarios move it (an access token expires, a research
 * job runs for minutes) while a client's own waits stay real, so jobs finish and Retry-After means seconds.
 */
export class SteppedClock implements Clock {
  #offset = 0;
  now(): number {
    return Date.now() + this.#offset;
  }
  jump(ms: number): void {
    this.#offset += ms;
  }
}

/** REST allowlist routes and `/mcp`, as fastify names them. */
const RESOURCE_ROUTE = /^\/(?:mcp|chat\/ask|research|training)(?:\/|$)/;
const isResourceCall = (r: ObservedRequest) => r.server === 'api' && r.route !== null && RESOURCE_ROUTE.test(r.route);

/** The tools that only read, as a GET of their REST twin does: `get_research`, `get_training_document`, ... */
const READ_TOOLS = new Set(Object.keys(TOOL_SCOPES).filter((name) => name.startsWith('get_')));

/** A JSON-RPC message (or batch) that calls a tool. */
function toolCall(body: unknown): { name: string; args: Record<string, unknown> } | null {
  for (const message of Array.isArray(body) ? body : [body]) {
    const m = message as { method?: unknown; params?: { name?: unknown; arguments?: unknown } } | null;
    if (m?.method === 'tools/call' && typeof m.params?.name === 'string')
      return { name: m.params.name, args: (m.params.arguments as Record<string, unknown> | undefined) ?? {} };
  }
  return null;
}

/** One call of the service's API by the client: a REST allowlist request, or an MCP tool call. */
export interface Call {
  exchange: ObservedExchange;
  /** The meter's name: `POST /chat/ask`, `GET /research/{job_id}`, `tool ask`. */
  route: string;
  /** POST /chat/ask, /research, /training, and the tools that are no reads: what may be charged. */
  post: boolean;
  /** The Idempotency-Key header, or a tool's idempotency_key argument. */
  key: string | undefined;
  /** The body that a retry must repeat: the JSON text (REST), or the tool's arguments without the key (MCP). */
  body: string;
  /** A job or document id the route names. */
  id: string | undefined;
}

/**
 * Everything the emulator of one scenario run saw: its events and every exchange, each with real times. Scenarios
 * react to it while the client runs (`onEvent`, `onExchange`) and judge from it afterwards, never from the client's
 * output.
 */
export class RunLog implements RequestObserver {
  readonly events: TimedEvent[] = [];
  readonly exchanges: ObservedExchange[] = [];
  /** The findings as they stood when the command had exited. */
  readonly findings: Finding[] = [];
  readonly #eventListeners: Array<(e: TimedEvent) => void> = [];
  readonly #exchangeListeners: Array<(e: ObservedExchange) => void> = [];
  readonly #startListeners: Array<(request: ObservedRequest, othersInFlight: number) => void> = [];
  /** The arrivals of calls to the API (REST allowlist and /mcp) whose answer has not ended yet. */
  readonly #inFlight = new Set<number>();

  started(request: ObservedRequest): void {
    if (!isResourceCall(request)) return;
    for (const l of this.#startListeners) l(request, this.#inFlight.size);
    this.#inFlight.add(request.arrival);
  }

  ended(exchange: ObservedExchange): void {
    this.#inFlight.delete(exchange.arrival);
    this.exchanges.push(exchange);
    for (const l of this.#exchangeListeners) l(exchange);
  }

  event(event: AppEvent): void {
    const timed = { ...event, real: Date.now() } as TimedEvent;
    this.events.push(timed);
    for (const l of this.#eventListeners) l(timed);
  }

  onEvent(listener: (e: TimedEvent) => void): void {
    this.#eventListeners.push(listener);
  }

  /** A call to the API has arrived (before its token is checked), with how many others were in flight then. */
  onCallStarted(listener: (request: ObservedRequest, othersInFlight: number) => void): void {
    this.#startListeners.push(listener);
  }

  onExchange(listener: (e: ObservedExchange) => void): void {
    this.#exchangeListeners.push(listener);
  }

  of<N extends EventName>(name: N): Array<TimedEvent<N> & { data: EventMap[N] }> {
    return this.events.filter((e) => e.name === name) as Array<TimedEvent<N> & { data: EventMap[N] }>;
  }

  /** The exchanges with the service's API (REST allowlist and /mcp), in the order they ended. */
  resourceExchanges(): ObservedExchange[] {
    return this.exchanges.filter(isResourceCall);
  }

  /** The client's calls, in the order they arrived. */
  calls(): Call[] {
    return this.exchanges
      .map(callOf)
      .filter((c): c is Call => c !== null)
      .sort((a, b) => a.exchange.arrival - b.exchange.arrival);
  }

  /** Moments a scenario marks (when it moved the clock, revoked a grant, ...), real time. */
  readonly marks = new Map<string, number>();

  mark(name: string, at: number = Date.now()): void {
    this.marks.set(name, at);
  }

  /** The parsed JSON answer of an exchange, or undefined. */
  static answer(exchange: ObservedExchange): Record<string, unknown> | undefined {
    if (!exchange.response) return undefined;
    try {
      const value = JSON.parse(exchange.response) as unknown;
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }
}

/** The exchange as a call of the API, or null when it is none (metadata, OAuth, an MCP message that calls no tool). */
export function callOf(exchange: ObservedExchange): Call | null {
  if (exchange.server !== 'api' || exchange.route === null || !RESOURCE_ROUTE.test(exchange.route)) return null;
  if (exchange.route === '/mcp') {
    if (exchange.method !== 'POST') return null;
    const tool = toolCall(exchange.body);
    // Refused by the token before its body was read: with a token, a call all the same (its tool unknown).
    if (
      !tool &&
      exchange.body === undefined &&
      exchange.authorization !== undefined &&
      (exchange.status === 401 || exchange.status === 403)
    )
      return { exchange, route: 'POST /mcp', post: true, key: undefined, body: '', id: undefined };
    if (!tool) return null;
    const { idempotency_key: key, ...args } = tool.args;
    return {
      exchange,
      route: `tool ${tool.name}`,
      post: !READ_TOOLS.has(tool.name),
      key: typeof key === 'string' ? key : undefined,
      body: JSON.stringify(args),
      id: typeof args.job_id === 'string' ? args.job_id : typeof args.document_id === 'string' ? args.document_id : undefined,
    };
  }
  const template = exchange.route.replace(/:([A-Za-z_]+)/g, '{$1}');
  const params = /^\/(?:research|training)\/([^/?]+)/.exec(exchange.url);
  return {
    exchange,
    route: `${exchange.method} ${template}`,
    post: exchange.method === 'POST',
    key: exchange.idempotencyKey,
    body: exchange.rawBody ?? (exchange.body === undefined ? '' : JSON.stringify(exchange.body)),
    id: params ? decodeURIComponent(params[1]!) : undefined,
  };
}

/** The most calls that were in flight at once among `calls` (real time intervals). */
export function mostInFlight(calls: readonly Call[]): number {
  const edges = calls.flatMap((c) => [
    { t: c.exchange.startedAt, d: 1 },
    { t: c.exchange.endedAt, d: -1 },
  ]);
  // Ends before starts at the same millisecond: calls one after the other are not parallel.
  edges.sort((a, b) => a.t - b.t || a.d - b.d);
  let now = 0;
  let most = 0;
  for (const e of edges) most = Math.max(most, (now += e.d));
  return most;
}

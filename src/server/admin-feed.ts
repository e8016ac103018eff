import type { ServerResponse } from 'node:http';
import type { ChargeEntry } from '../core/state/charges.js';
import type { Core } from '../core/core.js';
import type { AppEvent } from '../core/state/events.js';
import {
  OVERVIEW_LIMITS,
  buildOverview,
  type FaultView,
  type ReplayEntry,
  type RequestEntry,
  type Overview,
} from '../core/emulation/overview.js';

/** How often an open stream gets the server's clock (also its keep-alive). */
export const TICK_MS = 1000;
/** A dashboard that falls this far behind (beyond its overview) is cut off; it reconnects from a fresh overview. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

const frame = (event: string, data: unknown, id?: number): string =>
  `event: ${event}\n${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

/** Keeps the newest `limit` items of a list that only grows at its end. */
function pushCapped<T>(list: T[], item: T, limit: number): void {
  list.push(item);
  if (list.length > limit * 2) list.splice(0, list.length - limit);
}

/**
 * The admin side of the event bus: keeps what the core does not store or stores only in files (the newest requests,
 * replays, charges) and serves the overview and the server-sent event stream the dashboard folds into its state.
 */
export class AdminFeed {
  readonly #core: Core;
  readonly #requests: RequestEntry[] = [];
  readonly #replays: ReplayEntry[] = [];
  /** Charges seen on the bus since this feed started; older ones come from the ledger, read once. */
  readonly #charges: ChargeEntry[] = [];
  #ledger: Promise<ChargeEntry[]> | undefined;
  /** Open streams and the writer of each. */
  readonly #streams = new Map<ServerResponse, (text: string) => void>();
  readonly #unsubscribe: () => void;
  #ticker: NodeJS.Timeout | undefined;
  #closed = false;

  readonly #faults: (() => FaultView[]) | undefined;

  constructor(core: Core, faults?: () => FaultView[]) {
    this.#core = core;
    this.#faults = faults;
    this.#unsubscribe = core.events.subscribe((event) => {
      // A restore replaced the ledger and the state: what was kept of them is read again. Requests stay: they were served.
      if (event.name === 'state.restored') {
        this.#ledger = undefined;
        this.#charges.length = 0;
        this.#replays.length = 0;
      } else if (event.name === 'request.served')
        pushCapped(this.#requests, { ...event.data, seq: event.seq, at: event.at }, OVERVIEW_LIMITS.requests);
      else if (event.name === 'charge.recorded') pushCapped(this.#charges, event.data, OVERVIEW_LIMITS.charges);
      else if (event.name === 'idempotency.replayed')
        pushCapped(this.#replays, { ...event.data, seq: event.seq, at: event.at }, OVERVIEW_LIMITS.charges);
    });
  }

  /** The ledger's newest entries, read on the first overview only (the file only grows, until a restore; later charges arrive as events). */
  #ledgerTail(): Promise<ChargeEntry[]> {
    return (this.#ledger ??= this.#core.persistence.readCharges().then((entries) => entries.slice(-OVERVIEW_LIMITS.charges)));
  }

  async overview(): Promise<Overview> {
    const ledger = await this.#ledgerTail();
    // A charge may be both in the ledger and seen as an event (recorded around the read): once, by its number.
    const bySeq = new Map<number, ChargeEntry>();
    for (const entry of [...ledger, ...this.#charges]) bySeq.set(entry.seq, entry);
    const charges = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
    return buildOverview(this.#core, {
      charges,
      replays: [...this.#replays],
      requests: this.#requests.slice(-OVERVIEW_LIMITS.requests),
      faults: this.#faults?.(),
    });
  }

  /**
   * Streams `overview`, then every event after it, then a `tick` with the server's clock every second. After a
   * `state.restored` event everything the reader folded is stale: a fresh overview follows it, and the events after.
   */
  async stream(raw: ServerResponse): Promise<void> {
    // While an overview is built, events wait here and are sent after it, if newer than it.
    let backlog: AppEvent[] | null = [];
    let restored = false;
    let refreshing = false;
    let allowance = MAX_BUFFERED_BYTES;
    const send = (text: string) => {
      if (raw.writableEnded || raw.destroyed) return;
      raw.write(text);
      if (raw.writableLength > allowance) raw.destroy();
    };
    /** Sends an overview and the events that waited for it; again while a restore happened meanwhile. False: the stream ended. */
    const refresh = async (): Promise<boolean> => {
      refreshing = true;
      try {
        do {
          restored = false;
          backlog ??= [];
          let overview: Overview;
          try {
            overview = await this.overview();
          } catch (e) {
            send(frame('error', { message: (e as Error).message }));
            raw.end();
            return false;
          }
          // The reader left, or the server began to stop, while the overview was built.
          if (raw.destroyed || raw.writableEnded || this.#closed) {
            unsubscribe();
            raw.end();
            return false;
          }
          const text = frame('overview', overview, overview.seq);
          // However large the overview, the reader is cut off only for falling behind after it.
          allowance = Buffer.byteLength(text) + MAX_BUFFERED_BYTES;
          send(text);
          const waiting: AppEvent[] = backlog;
          backlog = null;
          for (const event of waiting) if (event.seq > overview.seq) send(frame(event.name, event, event.seq));
        } while (restored);
        return true;
      } finally {
        refreshing = false;
      }
    };
    const unsubscribe = this.#core.events.subscribe((event) => {
      if (event.name === 'state.restored') restored = true;
      if (backlog) backlog.push(event);
      else send(frame(event.name, event, event.seq));
      if (restored && !refreshing) void refresh();
    });
    raw.on('close', () => {
      unsubscribe();
      this.#streams.delete(raw);
      if (this.#streams.size === 0) this.#stopTicking();
    });
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // Clients wait a second before reconnecting (the stream client has its own back-off).
    raw.write('retry: 1000\n\n');
    if (!(await refresh())) return;
    this.#streams.set(raw, send);
    this.#ticker ??= setInterval(() => {
      const tick = frame('tick', { now: this.#core.clock.now() });
      for (const write of this.#streams.values()) write(tick);
    }, TICK_MS).unref();
  }

  #stopTicking(): void {
    clearInterval(this.#ticker);
    this.#ticker = undefined;
  }

  /** Ends every open stream: the server is stopping. Streams still building their overview end when it is built. */
  close(): void {
    this.#closed = true;
    this.#stopTicking();
    for (const stream of this.#streams.keys()) stream.end();
    this.#streams.clear();
    this.#unsubscribe();
  }
}

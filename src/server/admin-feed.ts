import type { ServerResponse } from 'node:http';
import type { ChargeEntry } from '../core/charges.js';
import type { Core } from '../core/core.js';
import type { AppEvent } from '../core/events.js';
import { SNAPSHOT_LIMITS, buildSnapshot, type RequestEntry, type Snapshot } from '../core/snapshot.js';

/** How often an open stream gets the server's clock (also its keep-alive). */
export const TICK_MS = 1000;
/** A dashboard that reads slower than this much is cut off; it reconnects and starts from a fresh snapshot. */
const MAX_BUFFERED_BYTES = 1024 * 1024;

const frame = (event: string, data: unknown, id?: number): string => `event: ${event}\n${id !== undefined ? `id: ${id}\n` : ''}data: ${JSON.stringify(data)}\n\n`;

/**
 * The admin side of the event bus: keeps the newest requests (the core does not store them) and serves
 * the snapshot and the server-sent event stream the dashboard folds into its state.
 */
export class AdminFeed {
  readonly #core: Core;
  readonly #requests: RequestEntry[] = [];
  /** Open streams and the writer of each. */
  readonly #streams = new Map<ServerResponse, (text: string) => void>();
  readonly #unsubscribe: () => void;
  #ticker: NodeJS.Timeout | undefined;

  constructor(core: Core) {
    this.#core = core;
    this.#unsubscribe = core.events.subscribe((event) => {
      if (event.name !== 'request.served') return;
      this.#requests.push({ ...event.data, seq: event.seq, at: event.at });
      if (this.#requests.length > SNAPSHOT_LIMITS.requests * 2) this.#requests.splice(0, this.#requests.length - SNAPSHOT_LIMITS.requests);
    });
  }

  /** The snapshot; events that arrive while the ledger is read are folded in, so no charge falls between the two. */
  async snapshot(): Promise<Snapshot> {
    const during: ChargeEntry[] = [];
    const stop = this.#core.events.subscribe((event) => {
      if (event.name === 'charge.recorded') during.push(event.data);
    });
    let ledger: string[];
    try {
      ledger = await this.#core.persistence.readLedger();
    } finally {
      stop();
    }
    const entries = ledger.slice(-SNAPSHOT_LIMITS.charges).map((line) => JSON.parse(line) as ChargeEntry);
    const known = new Set(entries.map((e) => e.seq));
    for (const e of during) if (!known.has(e.seq)) entries.push(e);
    return buildSnapshot(this.#core, { charges: entries, requests: this.#requests.slice(-SNAPSHOT_LIMITS.requests) });
  }

  /** Streams `snapshot`, then every event after it, then a `tick` with the server's clock every second. */
  async stream(raw: ServerResponse): Promise<void> {
    // Events raised while the snapshot is built wait here and are sent after it, if newer than it.
    const backlog: AppEvent[] = [];
    let live = false;
    const send = (text: string) => {
      if (raw.writableEnded || raw.destroyed) return;
      raw.write(text);
      if (raw.writableLength > MAX_BUFFERED_BYTES) raw.destroy();
    };
    const unsubscribe = this.#core.events.subscribe((event) => {
      if (!live) backlog.push(event);
      else send(frame(event.name, event, event.seq));
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
    let snapshot: Snapshot;
    try {
      snapshot = await this.snapshot();
    } catch (e) {
      send(frame('error', { message: (e as Error).message }));
      raw.end();
      return;
    }
    send(frame('snapshot', snapshot, snapshot.seq));
    for (const event of backlog) if (event.seq > snapshot.seq) send(frame(event.name, event, event.seq));
    backlog.length = 0;
    live = true;
    this.#streams.set(raw, send);
    this.#ticker ??= setInterval(() => {
      const text = frame('tick', { now: this.#core.clock.now() });
      for (const write of this.#streams.values()) write(text);
    }, TICK_MS).unref();
  }

  #stopTicking(): void {
    clearInterval(this.#ticker);
    this.#ticker = undefined;
  }

  /** Ends every open stream: the server is stopping. */
  close(): void {
    this.#stopTicking();
    for (const stream of this.#streams.keys()) stream.end();
    this.#streams.clear();
    this.#unsubscribe();
  }
}

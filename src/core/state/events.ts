import type { AppEvent, EventMap, EventName } from '../../protocol/events.js';

export {
  EVENT_NAMES,
  type AccessRefusal,
  type AppEvent,
  type EventMap,
  type EventName,
  type FamilyEndReason,
  type GrantRevoker,
  type RefreshRefusal,
} from '../../protocol/events.js';

export type Listener = (event: AppEvent) => void;

/**
 * The typed event bus: every change in the core is published as `entity.verb` with its payload (the names and
 * payloads are the wire's, see protocol/events). The dashboard and the request log subscribe; nothing in the
 * core depends on who listens.
 */
export class EventBus {
  #seq = 0;
  #listeners = new Set<Listener>();
  readonly #queue: AppEvent[] = [];
  #dispatching = false;
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  emit<N extends EventName>(name: N, data: EventMap[N]): void {
    if (this.#listeners.size === 0) {
      this.#seq++;
      return;
    }
    this.#queue.push({ seq: ++this.#seq, at: this.#now(), name, data } as AppEvent);
    // An event emitted by a listener (a finding about the event) waits until every listener has the event before it,
    // so that all of them see the events in their order.
    if (this.#dispatching) return;
    this.#dispatching = true;
    try {
      for (let event = this.#queue.shift(); event; event = this.#queue.shift()) {
        for (const listener of this.#listeners) {
          try {
            listener(event);
          } catch {
            // A failing subscriber must never break the request that caused the event.
          }
        }
      }
    } finally {
      this.#dispatching = false;
    }
  }

  /** The sequence number of the newest event: an overview taken now is followed by the events after it. */
  get seq(): number {
    return this.#seq;
  }

  /** Whether anyone listens: callers skip building payloads that nobody would read. */
  get active(): boolean {
    return this.#listeners.size > 0;
  }

  /** Subscribes to every event; returns the unsubscribe function. */
  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

import type { AppEvent, EventMap, EventName } from '../protocol/events.js';

export { EVENT_NAMES, type AppEvent, type EventMap, type EventName, type FamilyEndReason, type GrantRevoker } from '../protocol/events.js';

export type Listener = (event: AppEvent) => void;

/**
 * The typed event bus: every change in the core is published as `entity.verb` with its payload (the names and
 * payloads are the wire's, see protocol/events). The dashboard and the request log subscribe; nothing in the
 * core depends on who listens.
 */
export class EventBus {
  #seq = 0;
  #listeners = new Set<Listener>();
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  emit<N extends EventName>(name: N, data: EventMap[N]): void {
    if (this.#listeners.size === 0) {
      this.#seq++;
      return;
    }
    const event = { seq: ++this.#seq, at: this.#now(), name, data } as AppEvent;
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch {
        // A failing subscriber must never break the request that caused the event.
      }
    }
  }

  /** The sequence number of the newest event: a snapshot taken now is followed by the events after it. */
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

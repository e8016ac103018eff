import type { AuthorizationRequest } from './authorize.js';

/** A consent screen waiting for the person's answer. Kept in memory: a restart simply asks again. */
export interface Interaction {
  id: string;
  request: AuthorizationRequest;
  person_id: string;
  /** Opaque value tying the interaction to the browser session that saw it. */
  binding: string;
  expires_at: number;
}

const INTERACTION_LIMIT = 10_000;

/** The open consent screens, by id (the rules that open and answer them are in consent.ts). */
export class Interactions {
  readonly #open = new Map<string, Interaction>();

  add(interaction: Interaction): void {
    this.#open.set(interaction.id, interaction);
  }

  get(id: string): Interaction | undefined {
    return this.#open.get(id);
  }

  delete(id: string): void {
    this.#open.delete(id);
  }

  clear(): void {
    this.#open.clear();
  }

  /** Forgets the screens expired as of `now`, and the oldest while the limit is reached. */
  prune(now: number): void {
    for (const [id, i] of this.#open) if (i.expires_at <= now) this.#open.delete(id);
    // Bound memory against a client that opens consent pages in a loop.
    while (this.#open.size >= INTERACTION_LIMIT) this.#open.delete(this.#open.keys().next().value as string);
  }
}

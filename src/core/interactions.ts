import type { AuthorizationRequest } from './authorize.js';

/** A consent screen waiting for the person's answer. Kept in memory: a restart simply asks again. */
export interface Interaction {
  id: string;
  request: AuthorizationRequest;
  person_id: string;
  /** Opaque value tying the interaction to the browser session that saw it. */
  binding: string;
  expires_at: number;
  /**
   * Opened by a request that brought no browser session (a first visit, or a cross-site request, which carries no
   * cookie of `{auth_url}`). Such screens are bounded apart from those of a browser that came back with its session.
   */
  anonymous: boolean;
}

/** Open consent screens of each kind at most (README "Endpoints", **Limits**). */
export const INTERACTION_LIMIT = 10_000;

/**
 * The open consent screens, by id (the rules that open and answer them are in consent.ts). Anonymous screens and
 * those of a known browser session are bounded apart, each oldest first: a flood of cookie-less requests for the
 * authorization endpoint (a page in the developer's browser can send them) pushes out only anonymous screens, never
 * the screen of a browser that came back with its session.
 */
export class Interactions {
  readonly #open = new Map<string, Interaction>();
  /** The ids of each kind in the order they were opened. */
  readonly #anonymous = new Set<string>();
  readonly #known = new Set<string>();

  add(interaction: Interaction): void {
    const kind = interaction.anonymous ? this.#anonymous : this.#known;
    while (kind.size >= INTERACTION_LIMIT) this.delete(kind.values().next().value as string);
    this.#open.set(interaction.id, interaction);
    kind.add(interaction.id);
  }

  get(id: string): Interaction | undefined {
    return this.#open.get(id);
  }

  delete(id: string): void {
    this.#open.delete(id);
    this.#anonymous.delete(id);
    this.#known.delete(id);
  }

  clear(): void {
    this.#open.clear();
    this.#anonymous.clear();
    this.#known.clear();
  }

  /** Forgets the screens expired as of `now`: the oldest of each kind, as all live equally long. */
  prune(now: number): void {
    for (const kind of [this.#anonymous, this.#known])
      for (const id of kind) {
        if (this.#open.get(id)!.expires_at > now) break;
        this.delete(id);
      }
  }
}

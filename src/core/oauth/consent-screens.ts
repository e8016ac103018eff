import { createHmac } from 'node:crypto';
import type { AuthorizationRequest } from './authorize.js';
import { randomToken, safeEqual } from '../state/crypto.js';
import type { Client } from '../state/state.js';
import type { Scope } from './scopes.js';

/**
 * Consent as code (emulator control, not part of the service): who answers the consent screen. `page` shows it to
 * a person (the default); `approve` and `deny` answer it at once, through the same decision the page's form posts;
 * `approve` with `scopes` grants only the requested scopes that are also in that list. Defined with the screen it
 * answers; emulation/consent-policy.ts keeps the policies per client.
 */
export type ConsentPolicy = { decision: 'page' } | { decision: 'deny' } | { decision: 'approve'; scopes?: Scope[] };

/** A consent screen waiting for the person's answer. */
export interface Interaction {
  /** Names the screen in events; unique per screen. */
  id: string;
  request: AuthorizationRequest;
  person_id: string;
  /** Opaque value tying the screen to the browser session that saw it. */
  binding: string;
  expires_at: number;
  /** The screen as its form carries it back: everything above, signed (ConsentScreens). */
  ticket: string;
}

/** Answered screens remembered at most, until each expires (README "Endpoints", **Limits**). */
export const ANSWERED_LIMIT = 100_000;

/** What a ticket carries: the screen, with the client by id (it is looked up again when the screen is answered). */
interface Sealed {
  i: string;
  c: string;
  r: string;
  s: string;
  sc: Scope[];
  rs: string | null;
  cc: string;
  p: string;
  b: string;
  e: number;
}

/**
 * Consent screens are not kept on the server: the screen travels in its form as a ticket signed with a key of this
 * emulator, and comes back with the answer. So no number of requests for the authorization endpoint (a page in the
 * developer's browser can send them by the thousand, with the person's cookie or without) can push out the screen a
 * person is looking at. What is kept is the id of each screen answered, until it expires, so a screen is answered once.
 */
export class ConsentScreens {
  #key = randomToken(32);
  /** Answered screen ids and when each expires, in the order answered. */
  readonly #answered = new Map<string, number>();

  open(screen: Omit<Interaction, 'id' | 'ticket'>): Interaction {
    const id = randomToken(18);
    const { request } = screen;
    const sealed: Sealed = {
      i: id,
      c: request.client.client_id,
      r: request.redirect_uri,
      s: request.state,
      sc: request.scopes,
      rs: request.resource,
      cc: request.code_challenge,
      p: screen.person_id,
      b: screen.binding,
      e: screen.expires_at,
    };
    const body = Buffer.from(JSON.stringify(sealed)).toString('base64url');
    return { ...screen, id, ticket: `${body}.${this.#mac(body)}` };
  }

  /**
   * The screen a ticket carries, if this emulator signed it since its last reset and its client is still registered;
   * expiry, binding and whether it was answered are the caller's to check.
   */
  read(ticket: string, client: (id: string) => Client | undefined): Interaction | undefined {
    const [body, mac, ...rest] = ticket.split('.');
    if (!body || !mac || rest.length > 0 || !safeEqual(this.#mac(body), mac)) return undefined;
    const sealed = JSON.parse(Buffer.from(body, 'base64url').toString()) as Sealed;
    const registered = client(sealed.c);
    if (!registered) return undefined;
    return {
      id: sealed.i,
      request: {
        client: registered,
        redirect_uri: sealed.r,
        state: sealed.s,
        scopes: sealed.sc,
        resource: sealed.rs,
        code_challenge: sealed.cc,
      },
      person_id: sealed.p,
      binding: sealed.b,
      expires_at: sealed.e,
      ticket,
    };
  }

  wasAnswered(id: string): boolean {
    return this.#answered.has(id);
  }

  /** Remembers that the screen was answered; at the bound the earliest answered is forgotten. */
  answered(screen: Interaction): void {
    if (this.#answered.size >= ANSWERED_LIMIT) this.#answered.delete(this.#answered.keys().next().value as string);
    this.#answered.set(screen.id, screen.expires_at);
  }

  /** Forgets answered screens that expired as of `now` (an expired screen is refused anyway). */
  prune(now: number): void {
    for (const [id, expiresAt] of this.#answered) if (expiresAt <= now) this.#answered.delete(id);
  }

  /** Every screen shown so far stops working: a new key (a reset or restore of the state). */
  reset(): void {
    this.#key = randomToken(32);
    this.#answered.clear();
  }

  #mac(text: string): string {
    return createHmac('sha256', this.#key).update(text).digest('base64url');
  }
}

import { createHmac } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomToken, safeEqual } from '../core/crypto.js';

export interface BrowserSession {
  id: string;
  person_id: string;
  /** Keys the CSRF tokens of this session's forms. */
  secret: string;
}

const LIMIT = 10_000;

/**
 * Browser sessions on `{auth_url}`: the emulated person is signed in automatically on first visit.
 * Kept in memory (a restart signs the person in again). CSRF tokens are HMACs of the form's purpose
 * under the session's secret, so a form only works in the session that showed it.
 */
export class BrowserSessions {
  readonly #sessions = new Map<string, BrowserSession>();

  constructor(
    private readonly defaultPersonId: () => string,
    private readonly cookieName: () => string,
  ) {}

  /** The request's session, creating one (and its cookie) when there is none. */
  ensure(request: FastifyRequest, reply: FastifyReply, personId?: string): BrowserSession {
    const existing = this.current(request);
    if (existing && (!personId || existing.person_id === personId)) return existing;
    const session: BrowserSession = { id: randomToken(24), person_id: personId ?? this.defaultPersonId(), secret: randomToken(32) };
    if (this.#sessions.size >= LIMIT) this.#sessions.delete(this.#sessions.keys().next().value as string);
    this.#sessions.set(session.id, session);
    reply.setCookie(this.cookieName(), session.id, { path: '/', httpOnly: true, sameSite: 'lax' });
    return session;
  }

  current(request: FastifyRequest): BrowserSession | undefined {
    const id = request.cookies[this.cookieName()];
    return id ? this.#sessions.get(id) : undefined;
  }

  csrfToken(session: BrowserSession, purpose: string): string {
    return createHmac('sha256', session.secret).update(purpose).digest('base64url');
  }

  checkCsrf(session: BrowserSession, purpose: string, token: string): boolean {
    return safeEqual(this.csrfToken(session, purpose), token);
  }
}

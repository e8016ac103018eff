import { createHmac } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomToken, safeEqual } from '../core/state/crypto.js';

export interface BrowserSession {
  id: string;
  person_id: string;
  /** Keys the CSRF tokens of this session's forms. */
  secret: string;
}

/**
 * Browser sessions on `{auth_url}`: the emulated person is signed in automatically on first visit. A session is
 * its cookie alone, `id.person.mac`, signed with a key of this process (a restart signs the person in again): the
 * server keeps nothing per session, so no number of cookie-less requests (a page in the developer's browser can send
 * them by the thousand) can push out the session of a person. CSRF tokens are HMACs of the form's purpose under the
 * session's secret, so a form only works in the session that showed it.
 */
export class BrowserSessions {
  readonly #key = randomToken(32);

  constructor(
    private readonly defaultPersonId: () => string,
    private readonly cookieName: () => string,
  ) {}

  /** The request's session, creating one (and its cookie) when there is none. */
  ensure(request: FastifyRequest, reply: FastifyReply, personId?: string): BrowserSession {
    const existing = this.current(request);
    if (existing && (!personId || existing.person_id === personId)) return existing;
    const session = this.#session(randomToken(24), personId ?? this.defaultPersonId());
    const person = Buffer.from(session.person_id).toString('base64url');
    reply.setCookie(this.cookieName(), `${session.id}.${person}.${this.#mac(`${session.id}.${person}`)}`, {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
    });
    return session;
  }

  /** The session the request's cookie names, if the cookie is one this process signed. */
  current(request: FastifyRequest): BrowserSession | undefined {
    const [id, person, mac, ...rest] = (request.cookies[this.cookieName()] ?? '').split('.');
    if (!id || !person || !mac || rest.length > 0 || !safeEqual(this.#mac(`${id}.${person}`), mac)) return undefined;
    return this.#session(id, Buffer.from(person, 'base64url').toString());
  }

  csrfToken(session: BrowserSession, purpose: string): string {
    return createHmac('sha256', session.secret).update(purpose).digest('base64url');
  }

  checkCsrf(session: BrowserSession, purpose: string, token: string): boolean {
    return safeEqual(this.csrfToken(session, purpose), token);
  }

  #session(id: string, personId: string): BrowserSession {
    return { id, person_id: personId, secret: this.#mac(`secret.${id}`) };
  }

  #mac(text: string): string {
    return createHmac('sha256', this.#key).update(text).digest('base64url');
  }
}

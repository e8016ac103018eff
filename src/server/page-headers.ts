import type { FastifyReply } from 'fastify';

/**
 * Headers of every HTML page: not cached, not framed, no referrer, no script at all. `formTargets` are the
 * origins a form may lead to (a consent form ends at the client's redirect URI). CSP has no syntax for an
 * IPv6 literal, so with one of those the form-action directive is left out rather than break the form.
 */
export function pageHeaders(reply: FastifyReply, formTargets: string[] = []): FastifyReply {
  const expressible = formTargets.every((origin) => !new URL(origin).hostname.startsWith('['));
  const formAction = expressible ? ` form-action 'self' ${formTargets.join(' ')};` : '';
  return reply
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header('x-content-type-options', 'nosniff')
    .header(
      'content-security-policy',
      `default-src 'none'; style-src 'unsafe-inline';${formAction} frame-ancestors 'none'; base-uri 'none'`,
    );
}

/**
 * Every check of `conformance server`, defined once: its group, the rule it rests on, what it sends, and what it needs
 * beyond the default run (a charge, a write to the knowledge base, a consent screen of its own). docs/conformance.md
 * lists the same ids (test/unit/contract-checks.test.ts holds the two together).
 */
export type Need = 'charges' | 'writes' | 'extra-login';

export interface ServerCheck {
  group: string;
  rule: string;
  sends: string;
  needs?: Need;
}

export const SERVER_CHECKS = {
  'discovery.resource-metadata': {
    group: 'discovery',
    rule: 'RFC 9728 §3, §3.2; spec 2.7, 4.5',
    sends:
      'GET /.well-known/oauth-protected-resource/mcp: resource = {base_url}/mcp, authorization_servers, scopes_supported with the four ' +
      'scopes and no retired one',
  },
  'discovery.as-metadata': {
    group: 'discovery',
    rule: 'RFC 8414 §2, §3.3; spec 5.1',
    sends:
      "GET the issuer's /.well-known/oauth-authorization-server: issuer exact, the endpoints, code_challenge_methods_supported ⊇ " +
      'S256, token_endpoint_auth_methods_supported = ["none"], grant and response types',
  },
  'registration.public-client': {
    group: 'registration',
    rule: 'RFC 7591 §3.2.1; spec 2.1, 4.1',
    sends: 'POST registration_endpoint with the fields of 2.1: 201, a client_id, no client_secret',
  },
  'registration.bad-redirect-uri': {
    group: 'registration',
    rule: 'RFC 7591 §3.2.2; RFC 6749 §3.1.2',
    sends: 'POST registration_endpoint with a redirect URI that carries a fragment: 400 invalid_redirect_uri',
  },
  'authorize.no-code-challenge': {
    group: 'authorize',
    rule: 'OAuth 2.1 §4.1.1, §4.1.2.1; spec 4.2',
    sends: 'GET authorization_endpoint without code_challenge: a redirect with error=invalid_request, no consent',
  },
  'authorize.plain-method': {
    group: 'authorize',
    rule: 'OAuth 2.1 §4.1.1; spec 5.1',
    sends: 'GET authorization_endpoint with code_challenge_method=plain: a redirect with error=invalid_request, no consent',
  },
  'authorize.retired-scope': {
    group: 'authorize',
    rule: 'spec 2.7, 7; RFC 6749 §4.1.2.1',
    sends: 'GET authorization_endpoint with scope=documents.read: a redirect with error=invalid_scope, no consent',
  },
  'authorize.unknown-client': {
    group: 'authorize',
    rule: 'OAuth 2.1 §4.1.2.1',
    sends: 'GET authorization_endpoint with a client_id never registered: an error answered directly (4xx), no redirect, no consent',
  },
  'authorize.unregistered-redirect-uri': {
    group: 'authorize',
    rule: 'OAuth 2.1 §4.1.2.1; spec 4.2',
    sends:
      'GET authorization_endpoint with a redirect_uri the client did not register: an error answered directly (4xx), no redirect, no consent',
  },
  'token.wrong-code': {
    group: 'token',
    rule: 'OAuth 2.1 §4.1.3, §3.2.4; RFC 6749 §5.2',
    sends: 'POST token_endpoint with a code the server never issued: 400 invalid_grant',
  },
  'token.wrong-verifier': {
    group: 'token',
    rule: 'RFC 7636 §4.6; OAuth 2.1 §4.1.3',
    sends: 'a login of its own; its code sent first with a wrong code_verifier: 400 invalid_grant',
    needs: 'extra-login',
  },
  'token.response': {
    group: 'token',
    rule: 'spec 2.2, 5.3, 8; RFC 6749 §5.1',
    sends: 'every token answer of the run: token_type Bearer, expires_in 900, scope a string',
  },
  'access-token.claims': {
    group: 'access-token',
    rule: 'spec 2.3; RFC 9068 §2.2; RFC 8707 §2',
    sends: 'the access token decoded: aud = {base_url}/mcp, client_id and scope present',
  },
  'refresh.rotates': {
    group: 'refresh',
    rule: 'spec 3.2, 5.3; OAuth 2.1 §4.3.1',
    sends: 'a refresh of the stored login: a new refresh token, the store updated, the new access token accepted at /mcp',
  },
  'refresh.replay-ends-family': {
    group: 'refresh',
    rule: 'spec 3.2, 7; OAuth 2.1 §4.3.1; RFC 9700 §4.14.2',
    sends:
      'a login of its own, refreshed once, its first refresh token sent again: invalid_grant; then its newest refresh token and access token are refused too',
    needs: 'extra-login',
  },
  'guard.no-token': {
    group: 'guard',
    rule: 'spec 4.4, 5.5, 7; RFC 6750 §3',
    sends: "each REST route without a token: 401 with a Bearer WWW-Authenticate whose scope names the route's scope",
  },
  'guard.missing-scope': {
    group: 'guard',
    rule: 'spec 4.4, 5.5; RFC 6750 §3.1',
    sends: 'GET routes with a token that lacks their scope: refused (a 4xx other than 404, which would mean the lookup ran)',
  },
  'guard.identity-token': {
    group: 'guard',
    rule: 'spec 2.3, 5.8, 7',
    sends: 'a login of its own without resource (an identity token) on GET /research/{id} and /mcp: refused',
    needs: 'extra-login',
  },
  'guard.revoked-grant': {
    group: 'guard',
    rule: 'spec 3.3, 5.7, 7; RFC 7009 §2.1',
    sends: 'a login of its own, its refresh token revoked (RFC 7009): its access token refused on the next request',
    needs: 'extra-login',
  },
  'guard.rate-limit-headers': {
    group: 'guard',
    rule: 'spec 8',
    sends: 'the admitted answers of the run: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset',
  },
  'ask.answer': {
    group: 'ask',
    rule: 'spec 2.4, 4.4',
    sends: 'POST /chat/ask with an Idempotency-Key: 200 with answer (string), sources (array), message_id (string)',
    needs: 'charges',
  },
  'ask.replay': {
    group: 'ask',
    rule: 'spec 4.4 rule 5',
    sends: 'the same key and body again: the same bytes, the same message_id',
    needs: 'charges',
  },
  'ask.key-conflict': {
    group: 'ask',
    rule: 'spec 4.4 rule 5, 7',
    sends: 'the same key with another body: 409',
    needs: 'charges',
  },
  'research.created': {
    group: 'research',
    rule: 'spec 2.5, 3.1, 4.4 rule 3',
    sends: 'POST /research with an Idempotency-Key: 202 with job_id, status queued, poll = /research/{job_id}',
    needs: 'charges',
  },
  'research.succeeds': {
    group: 'research',
    rule: 'spec 2.5, 3.1, 4.4 rule 3',
    sends: 'GET poll (free) each second, or as Retry-After says, until succeeded: then report and citations (an array)',
    needs: 'charges',
  },
  'training.accepted': {
    group: 'training',
    rule: 'spec 2.6, 4.4 rule 4',
    sends: 'POST /training with an Idempotency-Key, a small Markdown file: 202 with a job id',
    needs: 'writes',
  },
  'training.status': {
    group: 'training',
    rule: 'spec 2.6, 4.4',
    sends: 'GET /training/{id}: 200 holding processing_step',
    needs: 'writes',
  },
  'training.url': {
    group: 'training',
    rule: 'spec 4.4',
    sends: 'GET /training/{id}/url: a 2xx answer',
    needs: 'writes',
  },
} as const satisfies Record<string, ServerCheck>;

export type ServerCheckId = keyof typeof SERVER_CHECKS;

/** The groups in the order the run takes them (and the table shows them). */
export const GROUPS = [...new Set(Object.values(SERVER_CHECKS).map((c) => c.group))];

/** The flag each need asks for, as the skipped verdict names it. */
export const NEED_FLAG: Record<Need, string> = {
  charges: '--allow-charges',
  writes: '--allow-writes',
  'extra-login': '--allow-extra-logins',
};

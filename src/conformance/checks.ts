import { HINTS } from '../core/oauth/client-hints.js';

/**
 * Every check of `conformance client`, defined once: the rule it rests on and what to change when it fails.
 * docs/conformance.md lists the same ids (test/unit/conformance-report.test.ts holds the two together).
 */
export const CHECKS = {
  'flow.discovery': {
    rule: 'RFC 9728 §3, §5; RFC 8414 §3; spec 4.1',
    hint:
      'Fetch the protected resource metadata of {base_url}/mcp (/.well-known/oauth-protected-resource/mcp, or the ' +
      "resource_metadata URL of a 401) first, take its authorization_servers[0], then fetch that issuer's " +
      '/.well-known/oauth-authorization-server, and take every endpoint from there.',
  },
  'flow.registration': {
    rule: 'spec 4.1; RFC 7591 §2, §3',
    hint:
      'Register as a public client: POST the registration_endpoint with token_endpoint_auth_method "none" and your loopback ' +
      'redirect_uris, and keep the client_id.',
  },
  'flow.pkce-state-resource': {
    rule: 'spec 4.2; OAuth 2.1 §4.1.1; RFC 7636 §4; RFC 8707 §2',
    hint:
      'Send code_challenge (S256 of a fresh verifier) with code_challenge_method=S256, a fresh random state, and ' +
      'resource={base_url}/mcp with every authorization request.',
  },
  'flow.minimal-scopes': { rule: 'spec 2.7, 5.9', hint: HINTS.unusedScope },
  'flow.code-once': {
    rule: 'OAuth 2.1 §4.1.3; RFC 9700 §4.2.4',
    hint: 'Exchange each authorization code once; when the exchange fails, start a new authorization instead of sending the code again.',
  },
  'flow.bearer': {
    rule: 'RFC 6750 §2.1; spec 5.5',
    hint: 'Send the access token as "Authorization: Bearer <token>" on every request to /mcp and the REST routes, never in the query or the body.',
  },
  'expiry.refreshes': { rule: 'spec 3.2, 5.3; OAuth 2.1 §4.3', hint: HINTS.expiredAccessToken },
  'expiry.repeat-succeeds': {
    rule: 'spec 5.3',
    hint: 'After the refresh, send the refused call again with the new access token (a POST with the same Idempotency-Key).',
  },
  'expiry.no-new-consent': {
    rule: 'spec 3.2, 5.3',
    hint: 'An expired access token needs a refresh (grant_type=refresh_token), not a new authorization: keep the refresh token and use it.',
  },
  'rotation.newest-refresh-token': { rule: 'spec 3.2; OAuth 2.1 §4.3.1', hint: HINTS.staleRefreshToken },
  'rotation.family-lives': { rule: 'spec 3.2', hint: HINTS.staleRefreshToken },
  'parallel-expiry.one-refresh': { rule: 'spec 3.2; OAuth 2.1 §4.3.1', hint: HINTS.concurrentRefresh },
  'parallel-expiry.family-lives': { rule: 'spec 3.2', hint: HINTS.concurrentRefresh },
  ...grantEndChecks('revoked'),
  ...grantEndChecks('family-killed'),
  'rate-limited.waits-retry-after': { rule: 'RFC 9110 §10.2.3; spec 7', hint: HINTS.retryTooEarly },
  'rate-limited.at-most-three-calls': {
    rule: 'spec 7, 8',
    hint: 'Retry a call answered 429 only after its Retry-After, one retry at a time: three calls at most while the limit lasts.',
  },
  'rate-limited.eventually-succeeds': {
    rule: 'spec 7; RFC 6585 §4',
    hint: 'Treat 429 as "later", not as a failure: wait Retry-After, then send the call again (a POST with its Idempotency-Key).',
  },
  'server-error.retry-with-key': { rule: 'spec 4.4 rule 5; RFC 9110 §9.2.2', hint: HINTS.retryWithoutKey() },
  'server-error.no-double-charge': { rule: 'spec 1, 4.4 rule 5', hint: HINTS.retryWithoutKey() },
  'lost-answer.retry-same-key': {
    rule: 'spec 4.4 rule 5; RFC 9110 §9.2.2',
    hint:
      `A charged call whose answer was lost may have run: retry it only with the Idempotency-Key it was first sent with, or report ` +
      `the failure and exit non-zero. ${HINTS.retryWithoutKey()}`,
  },
  'lost-answer.one-charge': { rule: 'spec 1, 4.4 rule 5', hint: HINTS.retryWithoutKey() },
  'research-polling.interval': {
    rule: 'spec 3.1',
    hint: 'Wait between polls: at least 1 s (a Retry-After on the answer wins), longer for long jobs; never poll in a loop without a pause.',
  },
  'research-polling.stops-at-succeeded': {
    rule: 'spec 2.5, 3.1',
    hint: 'Stop polling at status "succeeded" and read report and citations from that answer.',
  },
  'research-polling.free': {
    rule: 'spec 1, 3.1, 4.4 rule 3',
    hint: 'Follow a job with GET /research/{job_id}, which is free; never POST /research again to learn how a job stands.',
  },
  'research-polling.unknown-status': {
    rule: 'spec 3.1 (the status between queued and succeeded is not listed)',
    hint: 'Treat every status but "succeeded" and a failure as still working: the spec does not list the running ones.',
  },
  'research-failed.stops-polling': {
    rule: 'spec 2.5, 3.1',
    hint: 'A job with an error (whatever its status is called) is finished: stop polling and report the error.',
  },
  'research-failed.no-unkeyed-restart': { rule: 'spec 1, 4.4 rule 5', hint: HINTS.retryWithoutKey() },
  'training-async.waits-for-indexed': {
    rule: 'spec 2.6, 3.1, 4.4 rule 4',
    hint:
      'After POST /training, poll GET /training/{id} until processing_step reaches its last step (the emulator: "indexed") before ' +
      'asking about the document; until then the search does not know it.',
  },
  'shapes.exits-0': {
    rule: 'spec 2.4, 2.5, 2.6 (shapes the spec leaves open)',
    hint:
      'Read the fields the spec leaves open defensively: sources and citations may be strings or objects with other names, report ' +
      'may be an object, ids any string. Run your client against `agent-access serve --vary-unspecified=SEED` with the seed of the failed run.',
  },
  'shapes.same-calls': {
    rule: 'spec 2.4, 2.5, 2.6 (shapes the spec leaves open)',
    hint:
      'A response of another open shape must not change what the client does next: check types before use and fall back, rather ' +
      'than skip the rest of the work.',
  },
  'consent-denied.exits-non-zero': {
    rule: 'RFC 6749 §4.1.2.1; spec 4.2',
    hint: 'When the redirect carries error=access_denied, stop: tell the person that access was refused and exit non-zero, after at most one new attempt.',
  },
  'consent-denied.no-tokenless-loop': {
    rule: 'spec 5.5; RFC 6750 §3.1',
    hint: 'Without a token the API answers 401 every time: call it only once you hold one.',
  },
} as const satisfies Record<string, { rule: string; hint: string }>;

function grantEndChecks<P extends 'revoked' | 'family-killed'>(prefix: P) {
  return {
    [`${prefix}.no-loop`]: { rule: 'spec 3.3, 5.3; RFC 6750 §3.1', hint: `${HINTS.familyInvalidated} ${HINTS.refreshLoop}` },
    [`${prefix}.stops-or-reauthorizes`]: {
      rule: 'spec 3.3; RFC 6749 §5.2',
      hint:
        'When the refresh is refused with invalid_grant, drop the tokens, then either exit non-zero with a message that the person ' +
        'must authorize again, or start a new authorization.',
    },
    [`${prefix}.no-refused-refresh-retry`]: {
      rule: 'spec 3.2, 3.3; RFC 6749 §5.2',
      hint: 'A refresh token answered invalid_grant is dead for good: delete it and never send it again.',
    },
  } as Record<`${P}.${'no-loop' | 'stops-or-reauthorizes' | 'no-refused-refresh-retry'}`, { rule: string; hint: string }>;
}

export type CheckId = keyof typeof CHECKS;

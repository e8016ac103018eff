import { describe, expect, it } from 'vitest';
import { CLIENT_EXIT, describeCliError, EXIT } from '../../src/cli/errors.js';
import { OAuthError, ProblemError, StateFileError } from '../../src/core/state/errors.js';
import { AdminError } from '../../src/protocol/admin-client.js';
import { apiError } from '../../src/client/http.js';
import { kindOfAnswer, OAUTH_ERRORS, PROBLEMS, PROCESS_ERRORS } from '../../src/protocol/problems.js';
import { ScenarioError } from '../../src/loaders/scenario.js';
import { tablesUnder } from '../helpers/docs.js';

/** A registry table as docs/errors.md writes it: code, status, exit code, meaning. */
const asRows = (registry: Record<string, { status: number; kind: keyof typeof CLIENT_EXIT; title: string }>) =>
  Object.entries(registry).map(([code, e]) => [`\`${code}\``, String(e.status), String(CLIENT_EXIT[e.kind]), e.title]);

describe('the error registry and docs/errors.md', () => {
  it('RFC 9457 §3.1: docs/errors.md lists exactly the problem codes of the registry, each with its status, exit code and title', () => {
    const [problems] = tablesUnder('docs/errors.md', '## Error codes');
    expect(problems).toEqual(asRows(PROBLEMS));
  });

  it('RFC 6749 §5.2: docs/errors.md lists exactly the OAuth error codes of the registry, each with its status and exit code', () => {
    const [, oauth] = tablesUnder('docs/errors.md', '## Error codes');
    expect(oauth).toEqual(asRows(OAUTH_ERRORS));
  });

  it('RFC 9110 §15: every status in the registry is a client (4xx) or server (5xx) error', () => {
    for (const [code, { status }] of [...Object.entries(PROBLEMS), ...Object.entries(OAUTH_ERRORS)])
      expect(status, code).toBeGreaterThanOrEqual(400);
    for (const [code, { status }] of [...Object.entries(PROBLEMS), ...Object.entries(OAUTH_ERRORS)]) expect(status, code).toBeLessThan(600);
  });

  it('every exit code a registry kind maps to is documented in docs/errors.md "## Exit codes"', () => {
    const [exitCodes] = tablesUnder('docs/errors.md', '## Exit codes');
    const documented = new Set(exitCodes!.map(([code]) => Number(code)));
    const kinds = new Set(
      [...Object.values(PROBLEMS), ...Object.values(OAUTH_ERRORS), ...Object.values(PROCESS_ERRORS)].map((e) => e.kind),
    );
    for (const kind of kinds) expect(documented.has(CLIENT_EXIT[kind]), kind).toBe(true);
  });

  it('codes are snake_case', () => {
    for (const code of [...Object.keys(PROBLEMS), ...Object.keys(OAUTH_ERRORS), ...Object.keys(PROCESS_ERRORS)])
      expect(code).toMatch(/^[a-z]+(_[a-z]+)+$/);
  });
});

describe('the CLI maps codes to exit codes through the registry', () => {
  const adminError = (status: number, code: string) =>
    new AdminError(status, { type: `urn:agent-access:error:${code}`, title: 'x', status, detail: 'd' }, '/_admin/x');

  it('grant_not_found is exit 7 (not found), in the process and from the admin API', () => {
    expect(describeCliError(new ProblemError('grant_not_found', 'no grant with id "g"')).exitCode).toBe(EXIT.notFound);
    expect(CLIENT_EXIT[adminError(404, 'grant_not_found').kind]).toBe(7);
  });

  it('consent_expired is exit 1 (a failure, as a login that timed out)', () => {
    expect(describeCliError(new ProblemError('consent_expired', 'abgelaufen')).exitCode).toBe(EXIT.failure);
    expect(CLIENT_EXIT[adminError(400, 'consent_expired').kind]).toBe(1);
  });

  it('conflicts are exit 8, bad input exit 2, a server error exit 6', () => {
    expect(CLIENT_EXIT[adminError(409, 'clock_not_manual').kind]).toBe(EXIT.conflict);
    expect(CLIENT_EXIT[adminError(400, 'invalid_duration').kind]).toBe(EXIT.usage);
    expect(CLIENT_EXIT[adminError(500, 'server_error').kind]).toBe(EXIT.server);
  });

  it('process-level errors: an unusable state file is exit 3, an invalid scenario exit 2', () => {
    expect(describeCliError(new StateFileError('state.json', 'damaged')).exitCode).toBe(EXIT.state);
    expect(describeCliError(new ScenarioError('s.json', 'bad')).exitCode).toBe(EXIT.usage);
  });

  it('RFC 6749 §5.2: an OAuth error keeps its code and maps by it (invalid_scope: usage)', () => {
    const error = new OAuthError('invalid_scope', 'unknown scope');
    expect(error.toJSON()).toEqual({ error: 'invalid_scope', error_description: 'unknown scope' });
    expect(describeCliError(error).exitCode).toBe(EXIT.usage);
    expect(kindOfAnswer(400, { error: 'invalid_grant', error_description: 'x' })).toBe('auth_required');
  });

  it('an answer without a registry code maps by its status class', () => {
    expect(kindOfAnswer(502, {})).toBe('server');
    expect(kindOfAnswer(418, { type: 'about:blank' })).toBe('failed');
  });
});

describe('45.5 what the client commands do with each code the API can answer', () => {
  it('45.5 every problem code answered to `ask`, `research` or `train` exits with the code the table of docs/errors.md gives it', () => {
    const [problems] = tablesUnder('docs/errors.md', '## Error codes');
    const documented = new Map(problems!.map(([code, , exit]) => [code!.replace(/`/g, ''), Number(exit)]));
    const wrong: string[] = [];
    for (const [code, { status }] of Object.entries(PROBLEMS)) {
      const body = { type: `urn:agent-access:error:${code}`, title: 't', status, detail: 'd' };
      const error = apiError(
        { status, headers: {}, body, text: JSON.stringify(body) },
        { method: 'POST', url: 'http://127.0.0.1:4100/training' },
      );
      const exit = CLIENT_EXIT[error.kind];
      if (exit !== documented.get(code)) wrong.push(`${code} (${status}): exits ${exit}, docs/errors.md says ${documented.get(code)}`);
    }
    expect(wrong).toEqual([]);
  });
});

/**
 * Client findings (src/core/emulation/findings.ts), in this process on a manual clock: each produced by the sequence of OAuth
 * calls that causes it, none for the well-behaved sequence beside it, and never a change to what the client gets.
 */
import { describe, expect, it } from 'vitest';
import { checkAuthorizationRequest } from '../../src/core/oauth/consent.js';
import { MINUTE, SECOND } from '../../src/core/state/clock.js';
import { revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { FINDINGS, type Finding } from '../../src/protocol/findings.js';
import { tablesUnder } from '../helpers/docs.js';
import { pkce } from '../helpers/oauth.js';
import { authorize, authorizeQuery, exchangeCode, oauthError, openCore, refresh, register, RESOURCE, walkToTokens } from './helpers.js';

const codes = (findings: Finding[]) => findings.map((f) => f.code);
/** The findings at warning and above: a grant these tests never use for a request holds unused scopes (an info finding). */
const notable = (core: { findings: { list(): Finding[] } }) => core.findings.list().filter((f) => f.severity !== 'info');
const refused = async (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (e: { status?: number; error?: string }) => e,
  );

describe('client findings: refresh tokens (spec 3.2)', () => {
  it('refresh.concurrent: the same refresh token twice within seconds of its rotation (parallel refreshes), counted per presentation', async () => {
    const { core, clock, eventsNamed } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    const rotated = await refresh(core, client.client_id, tokens.refresh_token);
    clock.advance(2 * SECOND);
    const error = (await refused(refresh(core, client.client_id, tokens.refresh_token))) as { error: string; description: string };
    // The rule stands (spec 3.2): the family is dead, and the refusal says why and what to change.
    expect(error.error).toBe('invalid_grant');
    expect(error.description).toMatch(/replay.*Hint: Refresh once per token family/);
    expect(await oauthError(refresh(core, client.client_id, rotated.refresh_token!))).toBe('invalid_grant');
    const [finding] = notable(core);
    expect(finding).toMatchObject({
      code: 'refresh.concurrent',
      severity: 'error',
      client_id: client.client_id,
      client_name: 'Unit-Test-Agent',
      family_id: eventsNamed('refresh.rotated')[0]!.family_id,
      count: 2,
      first_at: clock.now(),
      spec: 'spec 3.2; OAuth 2.1 §4.3.1',
    });
    expect(finding!.message).toMatch(/presented again 2 s after it was rotated/);
    expect(
      eventsNamed('finding.recorded')
        .filter((f) => f.code === 'refresh.concurrent')
        .map((f) => f.count),
    ).toEqual([1, 2]);
  });

  it('refresh.stale_token: a rotated refresh token presented minutes later (the client kept the old one)', async () => {
    const { core, clock } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    await refresh(core, client.client_id, tokens.refresh_token);
    clock.advance(5 * MINUTE);
    expect(await oauthError(refresh(core, client.client_id, tokens.refresh_token))).toBe('invalid_grant');
    expect(codes(notable(core))).toEqual(['refresh.stale_token']);
    expect(notable(core)[0]!.message).toMatch(/rotated 300 s before \(generation 1\)/);
  });

  it('refresh.loop: five rotations within one access-token lifetime; one refresh per expiry is no finding', async () => {
    const { core, clock } = await openCore();
    const calm = await walkToTokens(core);
    let token = calm.tokens.refresh_token;
    for (let i = 0; i < 6; i++) {
      clock.advance(15 * MINUTE);
      token = (await refresh(core, calm.client.client_id, token)).refresh_token!;
    }
    expect(notable(core)).toEqual([]);
    const busy = await walkToTokens(core);
    token = busy.tokens.refresh_token;
    for (let i = 0; i < 5; i++) {
      clock.advance(10 * SECOND);
      token = (await refresh(core, busy.client.client_id, token)).refresh_token!;
    }
    expect(notable(core)).toMatchObject([{ code: 'refresh.loop', client_id: busy.client.client_id, count: 1 }]);
    expect(notable(core)[0]!.message).toMatch(/refreshed 5 times within 40 s, while each access token lasts 900 s/);
  });

  it('refresh.loop and token.identity_at_resource: an identity token refused at /mcp, refreshed and sent again, three times', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core, { resource: undefined });
    let current = tokens;
    for (let i = 0; i < 3; i++) {
      const error = (await refused(authenticate(core, `Bearer ${current.access_token}`, 'ask', 'ask', 'POST /mcp'))) as {
        status: number;
        hint: string;
      };
      expect(error.status).toBe(401);
      expect(error.hint).toMatch(/Send resource=http:\/\/127\.0\.0\.1:4100\/mcp/);
      current = (await refresh(core, client.client_id, current.refresh_token)) as typeof tokens;
    }
    expect(codes(notable(core))).toEqual(['refresh.loop', 'token.identity_at_resource', 'authorize.missing_parameter']);
    const [loop, identity, missing] = notable(core);
    expect(loop!.message).toMatch(/after each refusal at the resource \(identity_token at POST \/mcp\), 3 times in a row/);
    expect(identity).toMatchObject({ count: 3, severity: 'error' });
    expect(identity!.message).toMatch(/presented at POST \/mcp/);
    expect(missing).toMatchObject({ severity: 'warning', spec: 'spec 4.2; OAuth 2.1 §4.1.1' });
    expect(missing!.hint).toMatch(/^Send resource=/);
  });

  it('an access token that expired, then one refresh and a retry, is no finding', async () => {
    const { core, clock } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    clock.advance(16 * MINUTE);
    expect(await refused(authenticate(core, `Bearer ${tokens.access_token}`, 'ask', 'ask', 'POST /chat/ask'))).toMatchObject({
      status: 401,
      hint: expect.stringMatching(/^Refresh the access token/),
    });
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    await authenticate(core, `Bearer ${next.access_token}`, 'ask', 'ask', 'POST /chat/ask');
    expect(notable(core)).toEqual([]);
  });
});

describe('client findings: the authorization request (spec 4.2)', () => {
  it('authorize.missing_parameter: scope and state left out name both, with the habit behind each; the refusal itself is unchanged', async () => {
    const { core, eventsNamed } = await openCore();
    const client = await register(core);
    const outcome = checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge, { scope: undefined, state: undefined }));
    expect(outcome.kind).toBe('redirect');
    const location = new URL((outcome as { location: string }).location);
    expect(location.searchParams.get('error')).toBe('invalid_request');
    expect(location.searchParams.get('error_description')).toMatch(/^state is required\. Hint: .*implement state\(\) in your provider/);
    expect(eventsNamed('authorize.refused')).toEqual([
      { client_id: client.client_id, error: 'invalid_request', description: 'state is required', missing: ['state', 'scope'] },
    ]);
    const findings = notable(core);
    expect(findings.map((f) => [f.code, f.severity, f.id])).toEqual([
      ['authorize.missing_parameter', 'error', `authorize.missing_parameter:${client.client_id}:scope`],
      ['authorize.missing_parameter', 'error', `authorize.missing_parameter:${client.client_id}:state`],
    ]);
    expect(findings.find((f) => f.id.endsWith('scope'))!.hint).toMatch(
      /scope=ask .*scopes_supported: ask workspace.write research training.write/,
    );
  });

  it('spec 4.2: a request without scope alone is invalid_scope, and its description suggests the scope the resource names', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const outcome = checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge, { scope: undefined }));
    const location = new URL((outcome as { location: string }).location);
    expect(location.searchParams.get('error')).toBe('invalid_scope');
    expect(location.searchParams.get('error_description')).toMatch(
      /^scope is required; .* Hint: Request the scopes the agent needs, e\.g\. scope=ask/,
    );
    expect(notable(core)).toMatchObject([{ code: 'authorize.missing_parameter', message: expect.stringMatching(/without scope/) }]);
  });

  it('a complete request is no finding', async () => {
    const { core } = await openCore();
    await walkToTokens(core);
    expect(notable(core)).toEqual([]);
  });
});

describe('client findings: registrations and grants (spec 3.3, 4.1, 5.9)', () => {
  it('registration.repeated: the third registration with the same name and redirect URIs, counting on from there', async () => {
    const { core } = await openCore();
    await register(core);
    await register(core);
    await register(core, { client_name: 'Another agent' });
    expect(notable(core)).toEqual([]);
    await register(core);
    const latest = await register(core);
    expect(notable(core)).toMatchObject([{ code: 'registration.repeated', client_id: latest.client_id, count: 2 }]);
    expect(notable(core)[0]!.message).toMatch(/registered 4 times/);
  });

  it('grant.abandoned: a second grant while the first stays active and unused; revoking or using the first clears it', async () => {
    const { core, clock } = await openCore();
    const first = await walkToTokens(core);
    clock.advance(MINUTE);
    await exchangeCode(core, await authorize(core, first.client));
    expect(notable(core)).toMatchObject([{ code: 'grant.abandoned', grant_id: first.grantId, severity: 'warning' }]);
    // Used again after the second grant: both are in use (two sessions), nothing abandoned.
    clock.advance(MINUTE);
    await authenticate(core, `Bearer ${first.tokens.access_token}`, 'ask', 'ask', 'POST /chat/ask');
    expect(notable(core)).toEqual([]);
    clock.advance(MINUTE);
    await exchangeCode(core, await authorize(core, first.client));
    expect(codes(notable(core))).toEqual(['grant.abandoned', 'grant.abandoned']);
    for (const grant of Object.values(core.state.grants).slice(0, -1)) await revokeGrant(core, grant.id, 'client');
    expect(notable(core)).toEqual([]);
  });

  it('45.12 grant.abandoned per software: a client that registers anew at each login and keeps its old grants is found, naming every grant left active; other software is not', async () => {
    const { core, clock } = await openCore();
    const first = await walkToTokens(core);
    clock.advance(MINUTE);
    const second = await walkToTokens(core);
    clock.advance(MINUTE);
    const third = await walkToTokens(core);
    const abandoned = () => notable(core).filter((f) => f.code === 'grant.abandoned');
    expect(
      abandoned()
        .map((f) => f.grant_id)
        .sort(),
    ).toEqual([first.grantId, second.grantId].sort());
    expect(abandoned().find((f) => f.grant_id === first.grantId)!.message).toBe(
      `The same software (same name and redirect URIs) registered again as client ${third.client.client_id} and was granted access for the same person (grant ${third.grantId}), while 2 older grants stay active and unused since: ${first.grantId} (client ${first.client.client_id}), ${second.grantId} (client ${second.client.client_id}).`,
    );
    // Other software of the same person is judged on its own.
    clock.advance(MINUTE);
    await walkToTokens(core, { client: { client_name: 'Ein anderer Agent', redirect_uris: ['http://127.0.0.1/other'] } });
    expect(abandoned()).toHaveLength(2);
    for (const grant of [first, second]) await revokeGrant(core, grant.grantId, 'client');
    expect(abandoned()).toEqual([]);
  });

  it('45.11 scope.unused says when the code was never exchanged, with the hint to exchange it', async () => {
    const { core } = await openCore();
    const client = await register(core);
    await authorize(core, client, { scope: 'ask', resource: RESOURCE });
    expect(core.findings.list()).toMatchObject([
      {
        code: 'scope.unused',
        message: 'The grant holds “ask”, but its authorization code was never exchanged for tokens, so nothing could use them.',
        hint: expect.stringMatching(/^Exchange the code from the redirect/),
      },
    ]);
  });

  it('a reset forgets the findings', async () => {
    const { core, clock } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    await refresh(core, client.client_id, tokens.refresh_token);
    clock.advance(MINUTE);
    await refused(refresh(core, client.client_id, tokens.refresh_token));
    expect(notable(core)).toHaveLength(1);
    core.events.emit('state.restored', { snapshot: 'baseline', reset: true });
    expect(notable(core)).toEqual([]);
  });
});

describe('client findings: the catalogue and docs/findings.md', () => {
  it('docs/findings.md: the "Diagnosing your client" table lists exactly the catalogue: code, severity, trigger, rule', () => {
    const [table] = tablesUnder('docs/findings.md', '# Diagnosing your client');
    expect(table).toEqual(Object.entries(FINDINGS).map(([code, f]) => [`\`${code}\``, f.severity, f.trigger, f.spec]));
  });
});

import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/state/clock.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { listGrants, revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { startInProcess } from '../helpers/emulator.js';
import { REDIRECT, authorizeAndApprove, decodeJwt, exchangeCode, http, postForm, refresh, register } from '../helpers/oauth.js';

describe('spec 4.3 / OAuth 2.1 §4.1.3: the authorization code grant', () => {
  it('spec 2.2: 200 with Bearer, expires_in 900, scope, access and refresh token, no-store', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false, scope: 'ask research' });
    const res = await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier });
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: 900,
      refresh_token: expect.stringMatching(/^aa1\./),
      scope: 'ask research',
    });
  });

  it('spec 2.3 / RFC 9068: the access token is an ES256 at+jwt with iss, sub, aud={base_url}/mcp, client_id, scope, iat, exp, jti and the grant', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const { header, payload } = decodeJwt(flow.tokens!.access_token);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt', kid: emu.core.state.keys[0]!.kid });
    expect(payload).toMatchObject({
      iss: emu.issuer,
      sub: 'person_erika',
      aud: `${emu.baseUrl}/mcp`,
      client_id: flow.client_id,
      scope: 'ask',
      grant_id: expect.stringMatching(/^grant_/),
      jti: expect.any(String),
    });
    expect(payload.exp - payload.iat).toBe(900);
  });

  it('spec 2.3: a token issued without resource is an identity token whose aud is never {base_url}/mcp', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { resource: null });
    const { payload } = decodeJwt(flow.tokens!.access_token);
    expect(payload.aud).toBe(flow.client_id);
    expect(payload.aud).not.toBe(`${emu.baseUrl}/mcp`);
  });

  it('accepts application/x-www-form-urlencoded;charset=UTF-8', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const res = await postForm(
      `${emu.baseUrl}/oauth/token`,
      {
        grant_type: 'authorization_code',
        code: flow.code,
        redirect_uri: 'http://127.0.0.1:9/callback',
        client_id: flow.client_id,
        code_verifier: flow.pkce.verifier,
      },
      { 'content-type': 'application/x-www-form-urlencoded;charset=UTF-8' },
    );
    expect(res.status).toBe(200);
  });

  it('RFC 7636 §4.6: a wrong code_verifier → invalid_grant, and the code still works with the right one', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const wrong = await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: 'x'.repeat(43) });
    expect(wrong.status).toBe(400);
    expect(wrong.json().error).toBe('invalid_grant');
    expect(
      (await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier })).status,
    ).toBe(200);
  });

  it('RFC 7636: a missing code_verifier → invalid_request', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const res = await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request', error_description: expect.stringContaining('code_verifier') });
  });

  it('OAuth 2.1 §4.1.3: redirect_uri must equal the one of the authorization request → invalid_grant', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const res = await exchangeCode(emu.baseUrl, {
      client_id: flow.client_id,
      code: flow.code,
      code_verifier: flow.pkce.verifier,
      redirect_uri: 'http://127.0.0.1:10/callback',
    });
    expect(res.json().error).toBe('invalid_grant');
  });

  it('a code issued to another client → invalid_grant', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const other = await register(emu.baseUrl);
    const res = await exchangeCode(emu.baseUrl, { client_id: other.client_id, code: flow.code, code_verifier: flow.pkce.verifier });
    expect(res.json().error).toBe('invalid_grant');
  });

  it('RFC 6749 §5.2: error_description never carries a double quote or non-ASCII, whatever the client sent', async () => {
    const emu = await startInProcess();
    const res = await postForm(`${emu.baseUrl}/oauth/token`, { grant_type: 'refresh_token', client_id: 'x"ä\\', refresh_token: 'r' });
    expect(res.json().error).toBe('invalid_client');
    expect(res.json().error_description).toMatch(/^[\x20\x21\x23-\x5b\x5d-\x7e]+$/);
  });

  it('an unknown client → 401 invalid_client (real clients re-register on it)', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const res = await exchangeCode(emu.baseUrl, { client_id: 'client_gone', code: flow.code, code_verifier: flow.pkce.verifier });
    expect(res.status).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it('codes are short-lived: 60 s on the emulator clock', async () => {
    const clock = new ManualClock();
    const emu = await startInProcess({ clock });
    const flow = await authorizeAndApprove(emu, { exchange: false });
    clock.advance(60_000);
    const res = await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier });
    expect(res.json()).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('expired') });
  });

  it('RFC 8707: a resource at the token endpoint must be the one authorized → invalid_target', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const res = await exchangeCode(emu.baseUrl, {
      client_id: flow.client_id,
      code: flow.code,
      code_verifier: flow.pkce.verifier,
      resource: 'https://other.example/mcp',
    });
    expect(res.json().error).toBe('invalid_target');
    const ok = await exchangeCode(emu.baseUrl, {
      client_id: flow.client_id,
      code: flow.code,
      code_verifier: flow.pkce.verifier,
      resource: `${emu.baseUrl}/mcp`,
    });
    expect(ok.status).toBe(200);
  });

  it('OAuth 2.1 §4.1.3: a replayed code → invalid_grant, and the tokens issued from it are revoked', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const args = { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier };
    const first = (await exchangeCode(emu.baseUrl, args)).json();
    await expect(authenticate(emu.core, `Bearer ${first.access_token}`, 'ask')).resolves.toBeTruthy();
    const replay = await exchangeCode(emu.baseUrl, args);
    expect(replay.status).toBe(400);
    expect(replay.json().error).toBe('invalid_grant');
    await expect(authenticate(emu.core, `Bearer ${first.access_token}`, 'ask')).rejects.toMatchObject({ error: 'invalid_token' });
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: first.refresh_token })).json().error).toBe(
      'invalid_grant',
    );
  });

  it('a replayed code without the right verifier does not revoke anything', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    const first = (
      await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier })
    ).json();
    await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: 'y'.repeat(43) });
    await expect(authenticate(emu.core, `Bearer ${first.access_token}`, 'ask')).resolves.toBeTruthy();
  });

  it.each([
    ['grant_type missing', {}, 400, 'invalid_request'],
    ['unsupported grant_type', { grant_type: 'client_credentials' }, 400, 'unsupported_grant_type'],
    ['code missing', { grant_type: 'authorization_code', client_id: 'c', redirect_uri: 'x', code_verifier: 'v' }, 400, 'invalid_request'],
  ])('RFC 6749 §5.2: %s → %i %s', async (_why, fields, status, error) => {
    const emu = await startInProcess();
    const res = await postForm(`${emu.baseUrl}/oauth/token`, fields);
    expect(res.status).toBe(status);
    expect(res.json().error).toBe(error);
    expect(res.json().error_description).toEqual(expect.any(String));
  });

  it('a JSON body is refused with invalid_request naming the media type', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"grant_type":"refresh_token"}',
    });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request', error_description: expect.stringContaining('x-www-form-urlencoded') });
  });
});

describe('spec 3.2 / OAuth 2.1 §4.3: refresh tokens rotate; a replay kills the whole family', () => {
  it('every use rotates: the response carries a new refresh token and the old one stops working', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const r1 = flow.tokens!.refresh_token;
    const second = await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: r1 });
    expect(second.status).toBe(200);
    expect(second.headers['cache-control']).toBe('no-store');
    const body = second.json();
    expect(body.refresh_token).not.toBe(r1);
    expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'ask' });
  });

  it('replay of a rotated token → invalid_grant, and every refresh and access token of the family is refused', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const { client_id } = flow;
    const r1 = flow.tokens!.refresh_token;
    const a1 = flow.tokens!.access_token;
    const g2 = (await refresh(emu.baseUrl, { client_id, refresh_token: r1 })).json();
    const g3 = (await refresh(emu.baseUrl, { client_id, refresh_token: g2.refresh_token })).json();
    await expect(authenticate(emu.core, `Bearer ${g3.access_token}`, 'ask')).resolves.toBeTruthy();

    const replay = await refresh(emu.baseUrl, { client_id, refresh_token: r1 });
    expect(replay.status).toBe(400);
    expect(replay.json().error).toBe('invalid_grant');

    expect((await refresh(emu.baseUrl, { client_id, refresh_token: g3.refresh_token })).json().error).toBe('invalid_grant');
    for (const token of [a1, g2.access_token, g3.access_token]) {
      await expect(authenticate(emu.core, `Bearer ${token}`, 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
    }
    const family = Object.values(emu.core.state.families)[0]!;
    expect(family).toMatchObject({ status: 'invalidated', invalidated_reason: 'refresh_replay', replayed_generation: 1 });
  });

  it('a refresh token of another client → invalid_grant, and the family lives on', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const other = await register(emu.baseUrl);
    expect((await refresh(emu.baseUrl, { client_id: other.client_id, refresh_token: flow.tokens!.refresh_token })).json().error).toBe(
      'invalid_grant',
    );
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).status).toBe(200);
  });

  it('a garbage or unknown refresh token → invalid_grant', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    for (const refresh_token of ['nope', 'aa1.x.y', `aa1.${'a'.repeat(22)}.${'b'.repeat(43)}`]) {
      expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token })).json().error).toBe('invalid_grant');
    }
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).status).toBe(200);
  });

  it('scope may narrow, never widen', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { scope: 'ask research' });
    const narrowed = (
      await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token, scope: 'research' })
    ).json();
    expect(narrowed.scope).toBe('research');
    expect(decodeJwt(narrowed.access_token).payload.scope).toBe('research');
    const wider = await refresh(emu.baseUrl, {
      client_id: flow.client_id,
      refresh_token: narrowed.refresh_token,
      scope: 'research training.write',
    });
    expect(wider.json().error).toBe('invalid_scope');
    // The grant keeps its scopes: the next refresh without scope gets them all back.
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: narrowed.refresh_token })).json().scope).toBe(
      'ask research',
    );
  });

  it('clients send resource on refresh too: accepted when it is {base_url}/mcp, invalid_target otherwise', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const ok = await refresh(emu.baseUrl, {
      client_id: flow.client_id,
      refresh_token: flow.tokens!.refresh_token,
      resource: `${emu.baseUrl}/mcp`,
    });
    expect(ok.status).toBe(200);
    const bad = await refresh(emu.baseUrl, {
      client_id: flow.client_id,
      refresh_token: ok.json().refresh_token,
      resource: 'https://x.example/mcp',
    });
    expect(bad.json().error).toBe('invalid_target');
  });

  it('spec 3.3: after the person revokes the grant, refresh → invalid_grant', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const grant = listGrants(emu.core)[0]!;
    await revokeGrant(emu.core, grant.id, 'person');
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json().error).toBe(
      'invalid_grant',
    );
  });

  it('spec 5.3: access tokens live 900 s on the emulator clock; refresh still works after expiry', async () => {
    const clock = new ManualClock();
    const emu = await startInProcess({ clock });
    const flow = await authorizeAndApprove(emu);
    clock.advance(899_000);
    await expect(authenticate(emu.core, `Bearer ${flow.tokens!.access_token}`, 'ask')).resolves.toBeTruthy();
    clock.advance(2_000);
    await expect(authenticate(emu.core, `Bearer ${flow.tokens!.access_token}`, 'ask')).rejects.toMatchObject({
      error: 'invalid_token',
      message: expect.stringContaining('expired'),
    });
    const fresh = (await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json();
    await expect(authenticate(emu.core, `Bearer ${fresh.access_token}`, 'ask')).resolves.toBeTruthy();
  });

  it('two concurrent refreshes with the same token: exactly one rotates, the other is a replay', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const results = await Promise.all(
      [1, 2].map(() => refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
  });
});

describe('RFC 6749 §5.2, RFC 7009 §2.1: clients are public; client authentication in the Authorization header fails', () => {
  const basic = (clientId: string) => `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:`).toString('base64')}`;

  it('RFC 6749 §5.2: "If the client attempted to authenticate via the Authorization request header field, the authorization server MUST respond with an HTTP 401" and a challenge in its scheme; the code stays unused', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { exchange: false });
    // client_secret_basic with an empty secret, and no client_id in the body: what clients defaulting to it send.
    const res = await postForm(
      `${emu.baseUrl}/oauth/token`,
      { grant_type: 'authorization_code', code: flow.code, redirect_uri: REDIRECT, code_verifier: flow.pkce.verifier },
      { authorization: basic(flow.client_id) },
    );
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(`Basic realm="${emu.issuer}"`);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({
      error: 'invalid_client',
      error_description: expect.stringMatching(/public.*client_id in the form body.*token_endpoint_auth_method 'none'/),
    });
    expect(
      (await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier })).status,
    ).toBe(200);
  });

  it('RFC 6749 §5.2: any scheme, even with client_id in the body → 401 invalid_client naming that scheme; the refresh token is not rotated', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const res = await postForm(
      `${emu.baseUrl}/oauth/token`,
      { grant_type: 'refresh_token', client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token },
      { authorization: `Bearer ${flow.tokens!.access_token}` },
    );
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(`Bearer realm="${emu.issuer}"`);
    expect(res.json().error).toBe('invalid_client');
    expect(Object.values(emu.core.state.families)[0]).toMatchObject({ status: 'active', rotations: 0 });
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).status).toBe(200);
  });

  // RFC 6749 §5.2: "include the WWW-Authenticate response header field matching the authentication scheme used by the client".
  it.each([
    ['Basic', 'Basic Zm9vOg==', 'Basic'],
    ['Bearer', 'Bearer abc', 'Bearer'],
    ['Digest', 'Digest username="a", realm="r"', 'Digest'],
    ['DPoP', 'DPoP eyJ.x.y', 'DPoP'],
    ['Negotiate', 'Negotiate YIIB', 'Negotiate'],
    ['a lower-case scheme', 'basic Zm9vOg==', 'basic'],
    ['a scheme alone', 'Token', 'Token'],
    ['a scheme of 60 characters', `${'X'.repeat(60)} abc`, 'X'.repeat(60)],
    ['no scheme (a separator first)', '=abc', 'Basic'],
    ['no scheme (a comma after the name)', 'Foo,bar', 'Basic'],
  ])(
    '41.15: RFC 6749 §5.2: Authorization with %s → 401 invalid_client, WWW-Authenticate in the scheme sent, else Basic',
    async (_what, authorization, scheme) => {
      const emu = await startInProcess();
      for (const endpoint of ['token', 'revoke']) {
        const res = await postForm(
          `${emu.baseUrl}/oauth/${endpoint}`,
          { grant_type: 'refresh_token', client_id: 'c', refresh_token: 'r', token: 'r' },
          { authorization },
        );
        expect(res.status).toBe(401);
        expect(res.headers['www-authenticate']).toBe(`${scheme} realm="${emu.issuer}"`);
        expect(res.json().error).toBe('invalid_client');
      }
    },
  );

  it('RFC 7009 §2.1: client authentication in the Authorization header at the revocation endpoint → 401 invalid_client with a challenge, and nothing is revoked', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu);
    const res = await postForm(
      `${emu.baseUrl}/oauth/revoke`,
      { token: flow.tokens!.refresh_token, token_type_hint: 'refresh_token' },
      { authorization: basic(flow.client_id) },
    );
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(`Basic realm="${emu.issuer}"`);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toMatchObject({ error: 'invalid_client', error_description: expect.stringContaining('client_id') });
    expect(listGrants(emu.core)[0]).toMatchObject({ status: 'active' });
    await expect(authenticate(emu.core, `Bearer ${flow.tokens!.access_token}`, 'ask')).resolves.toBeTruthy();
  });
});

describe('RFC 7591 §2: grant_types are the grant types the client can use at the token endpoint', () => {
  const withoutRefresh = async (emu: { baseUrl: string; authUrl: string }) => {
    const { client_id } = await register(emu.baseUrl, { grant_types: ['authorization_code'] });
    return authorizeAndApprove(emu, { client_id, exchange: false });
  };

  it('RFC 6749 §5.1: refresh_token is OPTIONAL: a client registered with grant_types [authorization_code] gets none', async () => {
    const emu = await startInProcess();
    const flow = await withoutRefresh(emu);
    const res = await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier });
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 900, scope: 'ask' });
    await expect(authenticate(emu.core, `Bearer ${res.json().access_token}`, 'ask')).resolves.toBeTruthy();
  });

  it('RFC 6749 §5.2: "unauthorized_client: The authenticated client is not authorized to use this authorization grant type": refresh from such a client → 400 naming its grant_types; no family is touched', async () => {
    const emu = await startInProcess();
    const flow = await withoutRefresh(emu);
    expect(
      (await exchangeCode(emu.baseUrl, { client_id: flow.client_id, code: flow.code, code_verifier: flow.pkce.verifier })).status,
    ).toBe(200);
    const other = await authorizeAndApprove(emu);
    const families = JSON.stringify(emu.core.state.families);
    const res = await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: other.tokens!.refresh_token });
    expect(res.status).toBe(400);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.json()).toEqual({ error: 'unauthorized_client', error_description: expect.stringContaining('(authorization_code)') });
    expect(JSON.stringify(emu.core.state.families)).toBe(families);
    expect((await refresh(emu.baseUrl, { client_id: other.client_id, refresh_token: other.tokens!.refresh_token })).status).toBe(200);
  });
});

/** Client registration (spec 2.1, 4.1; RFC 7591) through the core's registerClient, on a manual clock. */
import { describe, expect, it } from 'vitest';
import { OAuthError } from '../../src/core/state/errors.js';
import { requireClient } from '../../src/core/oauth/registration.js';
import { clientMetadata, oauthError, openCore, register, T0 } from './helpers.js';

describe('registration', () => {
  it('spec 2.1, 4.1: a public client gets a client_id and no secret; its metadata is stored as registered', async () => {
    const { core, eventsNamed } = await openCore();
    const client = await register(core);
    expect(client.client_id).toMatch(/\S/);
    expect(client).not.toHaveProperty('client_secret');
    expect(client).toMatchObject({
      client_name: 'Unit-Test-Agent',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    });
    expect(client.client_id_issued_at).toBe(T0 / 1000);
    expect(core.state.clients[client.client_id]).toEqual(client);
    expect(eventsNamed('client.registered')).toEqual([
      { client_id: client.client_id, client_name: 'Unit-Test-Agent', redirect_uris: client.redirect_uris },
    ]);
  });

  it('RFC 7591 §2: unknown fields are ignored', async () => {
    const { core } = await openCore();
    const client = await register(core, { logo_uri: 'https://example.com/logo.png', software_id: 'x', client_uri: 'https://example.com' });
    expect(client).not.toHaveProperty('logo_uri');
    expect(client).not.toHaveProperty('software_id');
    expect(client).not.toHaveProperty('client_uri');
  });

  it.each(['client_name', 'redirect_uris', 'grant_types', 'response_types', 'token_endpoint_auth_method'])(
    'spec 2.1: %s is required (invalid_client_metadata or invalid_redirect_uri), and nothing is stored',
    async (field) => {
      const { core } = await openCore();
      const error = await oauthError(register(core, { [field]: undefined }));
      expect(error).toBe(field === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata');
      expect(core.state.clients).toEqual({});
    },
  );

  it('spec 5.1: token_endpoint_auth_method none is the only method; a secret-based one is refused', async () => {
    const { core } = await openCore();
    expect(await oauthError(register(core, { token_endpoint_auth_method: 'client_secret_basic' }))).toBe('invalid_client_metadata');
  });

  it('spec 2.1: grant types authorization_code and refresh_token only, and authorization_code among them; response type code only', async () => {
    const { core } = await openCore();
    expect(await oauthError(register(core, { grant_types: ['authorization_code', 'client_credentials'] }))).toBe('invalid_client_metadata');
    expect(await oauthError(register(core, { grant_types: ['refresh_token'] }))).toBe('invalid_client_metadata');
    expect(await oauthError(register(core, { response_types: ['token'] }))).toBe('invalid_client_metadata');
    expect((await register(core, { grant_types: ['authorization_code'] })).grant_types).toEqual(['authorization_code']);
  });

  it.each([
    ['a relative URI', '/callback'],
    ['a fragment', 'https://app.example/cb#frag'],
    ['plain http off loopback', 'http://app.example/cb'],
    ['user information', 'https://user:pw@app.example/cb'],
  ])('RFC 7591 §2, OAuth 2.1 §2.3: a redirect URI with %s is invalid_redirect_uri', async (_what, uri) => {
    const { core } = await openCore();
    expect(await oauthError(register(core, { redirect_uris: [uri] }))).toBe('invalid_redirect_uri');
  });

  it('OAuth 2.1 §2.3: https, and http on a loopback address, are accepted redirect URIs', async () => {
    const { core } = await openCore();
    const client = await register(core, {
      redirect_uris: ['https://app.example/cb', 'http://localhost:3000/cb', 'http://[::1]/cb', 'http://127.0.0.1/cb'],
    });
    expect(client.redirect_uris).toHaveLength(4);
  });

  it('RFC 6749 §5.2: the token endpoint names an unknown client invalid_client with status 401', async () => {
    const { core } = await openCore();
    let error: unknown;
    try {
      requireClient(core, 'client_nobody');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(OAuthError);
    expect(error).toMatchObject({ error: 'invalid_client', status: 401 });
  });

  it('spec 2.1: client_name is labelled unverified on the consent screen, so it is kept exactly as sent', async () => {
    const { core } = await openCore();
    expect((await register(core, clientMetadata({ client_name: 'Offizieller Bank-Agent ✓' }))).client_name).toBe(
      'Offizieller Bank-Agent ✓',
    );
  });
});

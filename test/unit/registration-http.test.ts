import { describe, expect, it } from 'vitest';
import { startInProcess } from '../helpers/emulator.js';
import { clientMetadata, http, postForm, postJson } from '../helpers/oauth.js';

describe('spec 4.1 / RFC 7591: POST /oauth/register', () => {
  it('RFC 7591 §3.2.1: success is 201 with client_id, client_id_issued_at and every registered field echoed, no secret, no-store', async () => {
    const emu = await startInProcess();
    const res = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ client_name: 'Mein Agent' }));
    expect(res.status).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toEqual({
      client_id: expect.stringMatching(/^client_/),
      client_id_issued_at: expect.any(Number),
      client_name: 'Mein Agent',
      redirect_uris: ['http://127.0.0.1:9/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
    expect(body).not.toHaveProperty('client_secret');
  });

  it('44.3: application_type (OpenID Registration §2, MCP SEP-837) is stored and echoed; a value other than native or web is invalid_client_metadata', async () => {
    const emu = await startInProcess();
    const res = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ application_type: 'native' }));
    expect(res.status).toBe(201);
    expect(res.json().application_type).toBe('native');
    expect(emu.core.state.clients[res.json().client_id]!.application_type).toBe('native');
    const without = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata());
    expect(without.json()).not.toHaveProperty('application_type');
    const clients = Object.keys(emu.core.state.clients).length;
    const bad = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ application_type: 'desktop' }));
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({
      error: 'invalid_client_metadata',
      error_description: expect.stringMatching(/application_type 'desktop'/),
    });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(clients);
  });

  it('RFC 7591 §2: unknown fields sent by real clients are ignored', async () => {
    const emu = await startInProcess();
    const res = await postJson(
      `${emu.baseUrl}/oauth/register`,
      clientMetadata({ application_type: 'native', software_id: 'x', client_uri: 'https://example.com', logo_uri: 5 }),
    );
    expect(res.status).toBe(201);
    expect(res.json()).not.toHaveProperty('software_id');
  });

  it.each([
    ['a relative URI', '/callback'],
    ['a fragment', 'https://app.example/cb#frag'],
    ['plain http off loopback', 'http://app.example/cb'],
    ['another scheme', 'ftp://127.0.0.1/cb'],
    ['user info', 'https://user:pw@app.example/cb'],
  ])('RFC 7591 §2: a redirect URI with %s → 400 invalid_redirect_uri', async (_why, uri) => {
    const emu = await startInProcess();
    const res = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ redirect_uris: [uri] }));
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_redirect_uri', error_description: expect.stringContaining(uri) });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(0);
  });

  it.each([
    ['CR LF and a header after it', 'http://127.0.0.1:53001/cb\r\nX-Injected: 1', 'the control character U+000D at position 25'],
    ['a tab', 'http://127.0.0.1:53001/c\tb', 'the control character U+0009 at position 24'],
    ['a space', 'http://127.0.0.1:53001/c b', 'a space at position 24'],
    ['a C1 control', 'https://app.example/cb\u0085', 'the control character U+0085 at position 22'],
    ['an upper-case host', 'http://LOCALHOST:8080/cb', 'not in normal form'],
    ['a character outside RFC 3986', 'https://app.example/r\u00fcckruf', 'not in normal form'],
    ['a dot segment', 'https://app.example/a/../cb', 'not in normal form'],
  ])('RFC 3986 §2, §6: a redirect URI with %s → 400 invalid_redirect_uri, nothing stored', async (_why, uri, why) => {
    const emu = await startInProcess();
    const res = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ redirect_uris: ['http://127.0.0.1/ok', uri] }));
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_redirect_uri', error_description: expect.stringContaining(why) });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(0);
  });

  it.each([
    ['a bell', 'Agent\u0007'],
    ['a newline', 'Agent\nX'],
    ['DEL', 'Agent\u007f'],
    ['a C1 control', 'Agent\u009b'],
  ])('spec 2.1: a client_name with %s → 400 invalid_client_metadata, nothing stored', async (_why, name) => {
    const emu = await startInProcess();
    const res = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ client_name: name }));
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({
      error: 'invalid_client_metadata',
      error_description: expect.stringMatching(/^client_name contains the control character U\+/),
    });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(0);
  });

  it.each([
    ['http://127.0.0.1:8080/cb'],
    ['http://[::1]/cb'],
    ['http://localhost:3000/cb'],
    ['https://app.example/cb?x=1'],
    ['http://127.0.0.1:8080'],
    ['https://app.example/r%C3%BCckruf'],
  ])('RFC 8252: %s is accepted', async (uri) => {
    const emu = await startInProcess();
    expect((await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata({ redirect_uris: [uri] }))).status).toBe(201);
  });

  it.each([
    ['client_name missing', { client_name: undefined }, 'client_name'],
    ['client_name empty', { client_name: '  ' }, 'client_name'],
    ['client_name not a string', { client_name: 5 }, 'client_name'],
    ['auth method client_secret_basic', { token_endpoint_auth_method: 'client_secret_basic' }, 'token_endpoint_auth_method'],
    ['auth method missing', { token_endpoint_auth_method: undefined }, 'token_endpoint_auth_method'],
    ['grant type client_credentials', { grant_types: ['authorization_code', 'client_credentials'] }, 'grant_types'],
    ['grant types missing', { grant_types: undefined }, 'grant_types'],
    ['response type token', { response_types: ['token'] }, 'response_types'],
  ])('spec 2.1: %s → 400 invalid_client_metadata naming the field', async (_why, overrides, field) => {
    const emu = await startInProcess();
    const res = await postJson(`${emu.baseUrl}/oauth/register`, clientMetadata(overrides));
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_client_metadata', error_description: expect.stringContaining(field) });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(0);
  });

  it('RFC 7591 §3.1: a body that is not JSON gets a clear 400', async () => {
    const emu = await startInProcess();
    const form = await postForm(`${emu.baseUrl}/oauth/register`, { client_name: 'x' });
    expect(form.status).toBe(400);
    expect(form.json()).toMatchObject({ error: 'invalid_client_metadata', error_description: expect.stringContaining('application/json') });
    const broken = await http(`${emu.baseUrl}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"client_name":',
    });
    expect(broken.status).toBe(400);
    expect(broken.json().error).toBe('invalid_client_metadata');
    const array = await postJson(`${emu.baseUrl}/oauth/register`, [clientMetadata()]);
    expect(array.status).toBe(400);
  });
});

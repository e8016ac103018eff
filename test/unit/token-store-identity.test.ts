import { describe, expect, it } from 'vitest';
import { forServer, identityOf, keyIdOf, MAX_PARKED, type ServerRecord, type StoredLogin } from '../../src/client/token-store.js';

/** A JWT-shaped token whose header names `kid` (the client never verifies it; it only tells servers apart). */
const tokenSignedBy = (kid: string) =>
  `${Buffer.from(JSON.stringify({ alg: 'ES256', kid })).toString('base64url')}.${Buffer.from('{}').toString('base64url')}.sig`;

const loginBy = (kid: string, at = 0): StoredLogin => ({
  client_id: `client-${kid}`,
  redirect_uri: 'http://127.0.0.1/callback',
  scope: 'ask',
  resource: 'http://127.0.0.1:4100/mcp',
  access_token: tokenSignedBy(kid),
  refresh_token: `rt-${kid}`,
  expires_at: at + 900_000,
  token_obtained_at: at,
  refresh_obtained_at: at,
  logged_in_at: at,
  refresh_count: 0,
});

const recordOf = (kid: string): ServerRecord => ({
  base_url: 'http://127.0.0.1:4100',
  issuer: 'http://127.0.0.1:4100',
  clients: { 'http://127.0.0.1/callback': { client_id: `client-${kid}`, redirect_uri: 'http://127.0.0.1/callback', registered_at: 0 } },
  login: loginBy(kid),
  key_id: kid,
});

describe('45.3 the token store keeps one login per emulator on an address', () => {
  it('the server a login belongs to is the kid of its access token; an opaque token tells none', async () => {
    expect(await keyIdOf(tokenSignedBy('key-a'))).toBe('key-a');
    expect(await keyIdOf('opaque-token')).toBeNull();
    expect(await identityOf({ ...recordOf('key-a'), key_id: undefined })).toBe('key-a');
  });

  it('the same server (its keys include the login’s, as after a key is added) changes nothing: logins to one server stay one', async () => {
    expect(await forServer(recordOf('key-a'), new Set(['key-a', 'key-new']), 1)).toBeNull();
  });

  it('a login that cannot be told apart (opaque token, no key id) is never parked', async () => {
    const opaque = { ...recordOf('x'), key_id: null, login: { ...loginBy('x'), access_token: 'opaque' } };
    expect(await forServer(opaque, new Set(['key-b']), 1)).toBeNull();
  });

  it('another server parks the login with its registrations, and brings back the one parked for it', async () => {
    const onB = await forServer(recordOf('key-a'), new Set(['key-b']), 10);
    expect(onB).toMatchObject({ key_id: null, login: null, clients: {} });
    expect(onB!.parked!['key-a']).toMatchObject({ login: loginBy('key-a'), parked_at: 10 });
    const withB = { ...onB!, key_id: 'key-b', login: loginBy('key-b') };
    const backOnA = await forServer(withB, new Set(['key-a']), 20);
    expect(backOnA).toMatchObject({ key_id: 'key-a', login: loginBy('key-a'), clients: recordOf('key-a').clients });
    expect(Object.keys(backOnA!.parked!)).toEqual(['key-b']);
  });

  it(`at most ${MAX_PARKED} logins are parked per address; the one parked longest ago goes first`, async () => {
    let record = recordOf('key-0');
    for (let i = 1; i <= MAX_PARKED + 2; i++)
      record = { ...(await forServer(record, new Set([`key-${i}`]), i))!, key_id: `key-${i}`, login: loginBy(`key-${i}`) };
    const parked = Object.keys(record.parked!);
    expect(parked).toHaveLength(MAX_PARKED);
    expect(parked).not.toContain('key-0');
    expect(parked).not.toContain('key-1');
    expect(parked).toContain(`key-${MAX_PARKED + 1}`);
  });
});

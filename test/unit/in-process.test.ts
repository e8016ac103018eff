/**
 * The emulator that binds nothing (`listen: false`), which the HTTP rules of test/unit run against: its URLs name the
 * ports given, no port is bound, and `inject` serves each origin by its own app.
 */
import { describe, expect, it } from 'vitest';
import { Emulator } from '../../src/server/emulator.js';
import { startInProcess } from '../helpers/emulator.js';

/** The listening TCP servers of this process, as Node counts its handles. */
const listeners = () => process.getActiveResourcesInfo().filter((kind) => kind === 'TCPServerWrap').length;

describe('an emulator without listeners (listen: false)', () => {
  it('names the ports it was given in its URLs and binds neither', async () => {
    const before = listeners();
    const emulator = await startInProcess();
    const [api, auth] = [emulator.baseUrl, emulator.authUrl].map((url) => Number(new URL(url).port));
    expect(auth).toBe(api! + 1);
    expect(emulator.issuer).toBe(emulator.baseUrl);
    expect(listeners()).toBe(before);
  });

  it('inject serves {base_url} by the API and {auth_url} by the authorization pages, with the Host of the URL', async () => {
    const emulator = await startInProcess();
    const metadata = await emulator.inject({ url: `${emulator.baseUrl}/.well-known/oauth-authorization-server` });
    expect(metadata.statusCode).toBe(200);
    expect(metadata.json()).toMatchObject({ issuer: emulator.issuer, authorization_endpoint: `${emulator.authUrl}/oauth/authorize` });
    const settings = await emulator.inject({ url: `${emulator.authUrl}/settings` });
    expect(settings.statusCode).toBe(200);
    expect(settings.headers['content-type']).toMatch(/^text\/html/);
    // The Host guard sees the URL's host: another one is refused as it is on a socket.
    const rebound = await emulator.inject({
      url: `${emulator.baseUrl}/.well-known/oauth-authorization-server`,
      headers: { host: 'evil.example' },
    });
    expect(rebound.statusCode).toBe(421);
  });

  it('inject refuses a URL of another origin, and a start without both ports is a TypeError', async () => {
    const emulator = await startInProcess();
    await expect(emulator.inject({ url: 'http://127.0.0.1:9/callback' })).rejects.toThrow(/is neither/);
    await expect(Emulator.start({ listen: false, inMemory: true, port: 24_000 })).rejects.toThrow(/needs port and authPort/);
  });
});

import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { startEmulator } from './helpers/emulator.js';
import { Browser, authorizeUrl, pkce, register } from './helpers/oauth.js';

describe('41.4: a flood of consent screens never pushes out the screen or session of a person', () => {
  it(
    "41.4: 10 200 cookie-less GET /oauth/authorize between a person's very first consent page and the click: *Zulassen* still works",
    { timeout: 120_000 },
    async () => {
      const emu = await startEmulator();
      const { client_id } = await register(emu.baseUrl);
      // The person's first visit: the browser brings no session, so the screen is opened in a session made for it.
      const browser = new Browser();
      const p = pkce();
      const page = await browser.get(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id }, p.challenge));
      expect(page.status).toBe(200);
      const { action, fields } = Browser.form(page.text);

      // What a page in the developer's browser can send: cross-site requests carry no cookie of {auth_url}.
      // More than the 10 000 open screens that were once kept of each kind: no screen is kept now.
      const flood = 10_200;
      const dispatcher = new Agent({ connections: 8 });
      const statuses = new Map<number, number>();
      try {
        for (let i = 0; i < flood; i += 100) {
          const batch = await Promise.all(
            Array.from({ length: Math.min(100, flood - i) }, async () => {
              const res = await request(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id }, p.challenge), { dispatcher });
              await res.body.dump();
              return res.statusCode;
            }),
          );
          for (const s of batch) statuses.set(s, (statuses.get(s) ?? 0) + 1);
        }
      } finally {
        await dispatcher.close();
      }
      expect(Object.fromEntries(statuses)).toEqual({ 200: flood });

      const answer = await browser.post(new URL(action, emu.authUrl).toString(), {
        ...fields,
        decision: 'approve',
      });
      expect(answer.status).toBe(302);
      expect(new URL(answer.headers.location as string).searchParams.get('code')).toBeTruthy();
    },
  );
});

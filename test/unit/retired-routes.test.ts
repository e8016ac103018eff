import { describe, expect, it } from 'vitest';
import { WORKSPACE_KINDS } from '../../src/core/resources/workspace.js';
import { startInProcess } from '../helpers/emulator.js';
import { Browser, authorizeAndApprove, http } from '../helpers/oauth.js';

describe('spec 4.4 rule 6, 9: the fourteen retired per-kind read routes', () => {
  it('there is a list and an item route for each of the seven kinds, and each refuses an agent token', async () => {
    const emu = await startInProcess();
    const flow = await authorizeAndApprove(emu, { scope: 'ask' });
    let routes = 0;
    for (const kind of WORKSPACE_KINDS) {
      for (const path of [`/${kind}`, `/${kind}/any-id`]) {
        const res = await http(`${emu.baseUrl}${path}`, { headers: { authorization: `Bearer ${flow.tokens!.access_token}` } });
        expect(res.status, path).toBe(403);
        expect(res.json()).toMatchObject({
          type: 'urn:agent-access:error:agent_token_refused',
          detail: expect.stringContaining('/chat/ask'),
        });
        routes++;
      }
    }
    expect(routes).toBe(14);
  });

  it('they serve the browser application with the person\u2019s browser session (signed in on {auth_url})', async () => {
    const emu = await startInProcess();
    const browser = new Browser();
    await browser.get(`${emu.authUrl}/settings`);
    const list = await browser.get(`${emu.baseUrl}/contacts`);
    expect(list.status).toBe(200);
    const { kind, items } = list.json();
    expect(kind).toBe('contacts');
    expect(items.length).toBeGreaterThanOrEqual(10);
    const item = await browser.get(`${emu.baseUrl}/contacts/${items[0].id}`);
    expect(item.json()).toEqual(items[0]);
    expect((await browser.get(`${emu.baseUrl}/contacts/nope`)).status).toBe(404);
  });

  it('without a browser session they are refused too; they are not on the allowlist (no CORS)', async () => {
    const emu = await startInProcess();
    const res = await http(`${emu.baseUrl}/letters`, { headers: { origin: 'http://evil.example' } });
    expect(res.status).toBe(403);
    expect(res.json().type).toBe('urn:agent-access:error:browser_session_required');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});

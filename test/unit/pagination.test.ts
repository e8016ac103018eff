/**
 * 41.5: lists that grow with what clients do come in pages, over HTTP: the person's settings page
 * (SETTINGS_PAGE_SIZE grants a page, a count and links to the others), the admin API's grants and findings (`limit`,
 * `offset`, `total`, `next`), and the admin overview (the newest of each list, with totals).
 */
import { describe, expect, it } from 'vitest';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import { OVERVIEW_LIMITS } from '../../src/core/emulation/overview.js';
import type { Emulator } from '../../src/server/emulator.js';
import { SETTINGS_PAGE_SIZE } from '../../src/server/views.js';
import { startInProcess } from '../helpers/emulator.js';
import { Browser, http } from '../helpers/oauth.js';

/** `count` grants of the default person, each of a client of its own, the newest last. */
async function withGrants(emulator: Emulator, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++)
    ids.push((await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'], client_name: `Agent ${i}` })).grant_id);
  return ids;
}

const grantIds = (page: string) => [...page.matchAll(/data-grant="([^"]+)"/g)].map((m) => m[1]!);
const admin = (emulator: Emulator, path: string) =>
  http(`${emulator.adminUrl}${path}`, { headers: { authorization: `Bearer ${emulator.adminToken}` } });

describe('41.5: pages, with a count and a way to the rest', () => {
  it('the settings page shows SETTINGS_PAGE_SIZE grants a page, active ones first, with the count and links to the others', async () => {
    const emulator = await startInProcess();
    const ids = await withGrants(emulator, 2 * SETTINGS_PAGE_SIZE + 20);
    const browser = new Browser();
    const first = await browser.get(`${emulator.authUrl}/settings`);
    expect(first.status).toBe(200);
    expect(grantIds(first.text)).toHaveLength(SETTINGS_PAGE_SIZE);
    expect(first.text).toContain(`Zugriffe 1–${SETTINGS_PAGE_SIZE} von <span id="grant-total">${ids.length}</span> · Seite 1 von 3`);
    expect(first.text).toContain('<a href="/settings?page=2" rel="next">');

    const seen = new Set<string>();
    for (const page of [1, 2, 3])
      for (const id of grantIds((await browser.get(`${emulator.authUrl}/settings?page=${page}`)).text)) seen.add(id);
    expect([...seen].sort()).toEqual([...ids].sort());
    // A page past the last (grants revoked or expired since the link was made) shows the last.
    expect(grantIds((await browser.get(`${emulator.authUrl}/settings?page=99`)).text)).toHaveLength(20);

    // A revoked grant moves behind the active ones: the last page, folded with the revoked.
    const question = await browser.get(`${emulator.authUrl}${Browser.form(first.text).action}`);
    const { fields, action } = Browser.form(question.text);
    expect((await browser.post(`${emulator.authUrl}${action}`, fields)).status).toBe(303);
    const last = (await browser.get(`${emulator.authUrl}/settings?page=3`)).text;
    expect(last).toContain('Widerrufen am');
    expect(grantIds((await browser.get(`${emulator.authUrl}/settings`)).text)).not.toContain(ids.at(-1));
  });

  it.each(['0', '-1', 'x', '1.5', '9999999'])('settings ?page=%s is refused with a 400 page, not a crash', async (page) => {
    const emulator = await startInProcess();
    const answer = await new Browser().get(`${emulator.authUrl}/settings?page=${page}`);
    expect(answer.status).toBe(400);
    expect(answer.headers['content-type']).toMatch(/^text\/html/);
  });

  it('GET /_admin/grants and /_admin/findings: limit, offset, total and next reach every item once', async () => {
    const emulator = await startInProcess();
    const ids = await withGrants(emulator, 25);
    let path: string | null = '/grants?limit=10';
    const pages: number[] = [];
    const seen: string[] = [];
    while (path) {
      const page = (await admin(emulator, path)).json();
      expect(page).toMatchObject({ total: 25, limit: 10 });
      pages.push(page.grants.length);
      seen.push(...page.grants.map((g: { id: string }) => g.id));
      path = page.next;
    }
    expect(pages).toEqual([10, 10, 5]);
    expect(seen).toEqual([...ids].reverse()); // newest first
    expect((await admin(emulator, '/grants?limit=0')).status).toBe(400);
    expect((await admin(emulator, '/grants?offset=x')).status).toBe(400);

    // Each grant's scope `ask` never used: one scope.unused finding per grant.
    const all = (await admin(emulator, '/findings')).json();
    expect(all.total).toBe(all.findings.length);
    expect(all.total).toBeGreaterThanOrEqual(25);
    const second = (await admin(emulator, '/findings?limit=5&offset=5')).json();
    expect(second).toMatchObject({ total: all.total, offset: 5, limit: 5, next: '/findings?limit=5&offset=10' });
    expect(second.findings).toEqual(all.findings.slice(5, 10));
  });

  it('the admin overview carries the newest grants and clients, and the totals', async () => {
    const emulator = await startInProcess();
    await withGrants(emulator, OVERVIEW_LIMITS.grants + 30);
    const overview = (await admin(emulator, '/overview')).json();
    expect(overview.totals).toEqual({
      clients: OVERVIEW_LIMITS.grants + 30,
      grants: OVERVIEW_LIMITS.grants + 30,
      findings: expect.any(Number),
    });
    expect(overview.grants).toHaveLength(OVERVIEW_LIMITS.grants);
    // The newest registrations, and any other client a row of the overview names (a finding's, say).
    expect(Object.keys(overview.clients).length).toBeGreaterThanOrEqual(OVERVIEW_LIMITS.clients);
    expect(Object.keys(overview.clients).length).toBeLessThan(OVERVIEW_LIMITS.grants + 30);
    expect(overview.findings.length).toBeLessThanOrEqual(OVERVIEW_LIMITS.findings);
    for (const grant of overview.grants) expect(overview.clients[grant.client_id]).toBeDefined();
  });
});

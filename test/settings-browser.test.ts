/**
 * The settings page's layout in a real browser (Debian Chromium through playwright-core), at a phone's width and a
 * laptop's (issue 23): it fits its column, the "Widerrufen" button is on screen, and a person's re-logins show as one
 * application with several grants. Set SETTINGS_SCREENSHOTS=<dir> to keep a screenshot per width there.
 * Skips with a warning when Chromium is not installed; fails instead in CI.
 */
import { join } from 'node:path';
import type { Browser as Chromium, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOUR, ManualClock } from '../src/core/state/clock.js';
import { revokeGrant } from '../src/core/oauth/grants-admin.js';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { SCOPES } from '../src/core/oauth/scopes.js';
import type { Emulator } from '../src/server/emulator.js';
import { chromiumPlan, launchChromium, requireChromium } from './helpers/chromium.js';
import { startEmulator } from './helpers/emulator.js';

const plan = chromiumPlan('settings-browser.test.ts');

const ALL_SCOPES = ['ask', 'workspace.write', 'research', 'training.write'];
/** A client may call itself anything: a long name without a single place to break. */
const UNBROKEN_NAME = `Agent${'X'.repeat(90)}`;

/** The person's grants after three logins of the CLI (the first one revoked) and two other applications. */
async function personWithGrants(): Promise<{ emulator: Emulator; cli: { client_id: string; active: string[]; revoked: string } }> {
  // A day between the logins: the grants are listed newest first, and the page's dates tell them apart.
  const clock = new ManualClock(Date.UTC(2026, 4, 4, 8));
  const emulator = await startEmulator({ clock });
  const later = () => clock.advance(24 * HOUR);
  const first = await issueTokensWithoutConsent(emulator.core, { scopes: ALL_SCOPES, client_name: 'agent-access CLI' });
  later();
  const again = await issueTokensWithoutConsent(emulator.core, { scopes: ALL_SCOPES, client_id: first.client_id });
  await revokeGrant(emulator.core, first.grant_id, 'person');
  later();
  const third = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask', 'research'], client_id: first.client_id });
  later();
  await issueTokensWithoutConsent(emulator.core, { scopes: ['ask', 'research'], client_name: 'Recherche-Assistent für die Hofverwaltung' });
  later();
  await issueTokensWithoutConsent(emulator.core, { scopes: ['ask', 'training.write'], client_name: UNBROKEN_NAME });
  return { emulator, cli: { client_id: first.client_id, active: [third.grant_id, again.grant_id], revoked: first.grant_id } };
}

/** Boxes in CSS pixels: the viewport, the body's content box (the page's column), the grants and each revoke button. */
async function measure(page: Page) {
  return page.evaluate(() => {
    const box = (e: Element) => {
      const r = e.getBoundingClientRect();
      return { left: r.left, right: r.right, top: r.top, bottom: r.bottom };
    };
    const body = document.body.getBoundingClientRect();
    const style = getComputedStyle(document.body);
    const grants = document.querySelector('#grants')!;
    return {
      viewport: { width: window.innerWidth, height: window.innerHeight },
      scrollWidth: document.documentElement.scrollWidth,
      column: { left: body.left + parseFloat(style.paddingLeft), right: body.right - parseFloat(style.paddingRight) },
      grants: box(grants),
      // Every visible box inside the grants: a text or a chip that sticks out shows here, even if the container does not.
      widest: Math.max(
        ...Array.from(grants.querySelectorAll('*'))
          .filter((e) => e.getClientRects().length > 0)
          .map((e) => e.getBoundingClientRect().right),
      ),
      buttons: Array.from(document.querySelectorAll('#grants button')).map(box),
    };
  });
}

describe.skipIf(!plan.run)(`settings page in Chromium${plan.note}`, () => {
  let chromium: Chromium;
  beforeAll(async () => {
    requireChromium();
    chromium = await launchChromium();
  });
  afterAll(async () => {
    await chromium?.close();
  });

  async function open(emulator: Emulator, width: number, height: number): Promise<Page> {
    const context = await chromium.newContext({ viewport: { width, height } });
    context.setDefaultTimeout(10_000);
    const page = await context.newPage();
    await page.goto(`${emulator.authUrl}/settings`);
    const dir = process.env.SETTINGS_SCREENSHOTS;
    if (dir) await page.screenshot({ path: join(dir, `settings-${width}.png`), fullPage: true });
    return page;
  }

  it('issue 23: at 390 px the page does not scroll sideways and every "Widerrufen" button lies inside the viewport', async () => {
    const { emulator } = await personWithGrants();
    const page = await open(emulator, 390, 844);
    const m = await measure(page);
    expect(m.scrollWidth).toBeLessThanOrEqual(m.viewport.width);
    expect(m.widest).toBeLessThanOrEqual(m.viewport.width);
    expect(m.buttons).toHaveLength(4);
    for (const b of m.buttons) {
      expect(b.left).toBeGreaterThanOrEqual(0);
      expect(b.right).toBeLessThanOrEqual(m.viewport.width);
    }
    // Reachable as a person reaches it: scrolled into view, it is inside the viewport vertically too.
    const last = page.getByRole('button', { name: 'Widerrufen', exact: true }).last();
    await last.scrollIntoViewIfNeeded();
    const box = (await last.boundingBox())!;
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y + box.height).toBeLessThanOrEqual(m.viewport.height);
    await page.context().close();
  });

  it('issue 23: at 1280 px the grants and everything in them stay inside the page column', async () => {
    const { emulator } = await personWithGrants();
    const page = await open(emulator, 1280, 800);
    const m = await measure(page);
    expect(m.scrollWidth).toBeLessThanOrEqual(m.viewport.width);
    expect(m.grants.left).toBeGreaterThanOrEqual(m.column.left - 0.5);
    expect(m.grants.right).toBeLessThanOrEqual(m.column.right + 0.5);
    expect(m.widest).toBeLessThanOrEqual(m.column.right + 0.5);
    for (const b of m.buttons) expect(b.right).toBeLessThanOrEqual(m.column.right + 0.5);
    await page.context().close();
  });

  it('issue 23: re-logins of one application show as one group with its grants; active first, revoked folded away', async () => {
    const { emulator, cli } = await personWithGrants();
    const page = await open(emulator, 390, 844);
    const group = page.locator(`section[data-client="${cli.client_id}"]`);
    await expect(group.count()).resolves.toBe(1);
    await expect(page.locator('section[data-client] h2 bdi').allInnerTexts()).resolves.toEqual([
      UNBROKEN_NAME,
      'Recherche-Assistent für die Hofverwaltung',
      'agent-access CLI',
    ]);
    await expect(group.locator('[data-grant]').evaluateAll((items) => items.map((e) => e.getAttribute('data-grant')))).resolves.toEqual([
      ...cli.active,
      cli.revoked,
    ]);
    const described: string[] = [];
    for (const id of cli.active) {
      await expect(group.locator(`[data-grant="${id}"]`).isVisible()).resolves.toBe(true);
      const button = group.locator(`[data-grant="${id}"]`).getByRole('button', { name: 'Widerrufen', exact: true });
      await expect(button.isVisible()).resolves.toBe(true);
      // The same name on every button: its description says which application and which grant it ends.
      described.push(
        await button.evaluate((b) =>
          (b.getAttribute('aria-describedby') ?? '')
            .split(' ')
            .map((ref) => document.getElementById(ref)?.textContent?.trim() ?? `(no element ${ref})`)
            .join(' | '),
        ),
      );
    }
    expect(described).toHaveLength(cli.active.length);
    for (const d of described) expect(d).toMatch(/^agent-access CLI \| Aktiv seit .+ · (zuletzt genutzt|noch nicht genutzt)/);
    const revoked = group.locator(`[data-grant="${cli.revoked}"]`);
    await expect(revoked.isVisible()).resolves.toBe(false);
    await group.locator('details.revoked > summary').click();
    await expect(revoked.isVisible()).resolves.toBe(true);
    await expect(revoked.innerText()).resolves.toContain('Widerrufen am');
    await expect(revoked.locator('button').count()).resolves.toBe(0);
    await page.context().close();
  });

  it('issue 23: a grant lists its permissions by their short labels, each at most two lines tall at 390 px', async () => {
    const { emulator, cli } = await personWithGrants();
    const page = await open(emulator, 390, 844);
    const grant = page.locator(`[data-grant="${cli.active[1]}"]`);
    await expect(grant.locator('li[data-scope]').allInnerTexts()).resolves.toEqual([
      SCOPES.ask.label,
      `${SCOPES['workspace.write'].label} Schreibzugriff`,
      SCOPES.research.label,
      `${SCOPES['training.write'].label} Schreibzugriff`,
    ]);
    const tall = await grant
      .locator('li[data-scope]')
      .evaluateAll((items) =>
        items.filter((e) => e.getBoundingClientRect().height > 2.5 * parseFloat(getComputedStyle(e).lineHeight)).map((e) => e.textContent),
      );
    expect(tall).toEqual([]);
    await page.context().close();
  });
});

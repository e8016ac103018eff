/**
 * The consent and settings pages in a real browser (Debian Chromium through playwright-core): the person clicks,
 * the browser follows the redirect to a loopback callback server this test runs, and the test reads what
 * actually arrived there. Skips with a warning when Chromium is not installed; fails instead in CI.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser as Chromium, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_PRICES } from '../src/protocol/charges.js';
import { SCOPES } from '../src/core/oauth/scopes.js';
import { authenticate } from '../src/core/oauth/resource-guard.js';
import { listGrants } from '../src/core/oauth/grants-admin.js';
import type { Emulator } from '../src/server/emulator.js';
import { chromiumPlan, launchChromium, requireChromium } from './helpers/chromium.js';
import { startEmulator } from './helpers/emulator.js';
import { authorizeUrl, exchangeCode, pkce, refresh, register, type Pkce } from './helpers/oauth.js';

const plan = chromiumPlan('consent-browser.test.ts');

/** A client's loopback redirect target: records every request to /callback, in order. */
interface CallbackServer {
  url: string;
  received: URL[];
  /** The next callback not yet handed out, waiting for it if needed. */
  next(timeoutMs?: number): Promise<URL>;
  close(): Promise<void>;
}

async function startCallbackServer(host: '127.0.0.1' | '::1' = '127.0.0.1'): Promise<CallbackServer> {
  const received: URL[] = [];
  let handedOut = 0;
  let wake: (() => void) | undefined;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
    if (req.method !== 'GET' || url.pathname !== '/callback') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    received.push(url);
    wake?.();
    res
      .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      .end('<!doctype html><title>Client</title><p>Zurück beim Client.</p>');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host === '::1' ? '[::1]' : host}:${port}/callback`,
    received,
    async next(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (received.length <= handedOut) {
        if (Date.now() >= deadline) throw new Error(`no request reached the callback server within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
      return received[handedOut++]!;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe.skipIf(!plan.run)(`consent and settings pages in Chromium${plan.note}`, () => {
  let chromium: Chromium;
  let context: BrowserContext;
  let page: Page;
  let callback: CallbackServer;
  let dialogs: string[];

  beforeAll(async () => {
    requireChromium();
    chromium = await launchChromium();
  });
  afterAll(async () => {
    await chromium?.close();
  });

  beforeEach(async () => {
    callback = await startCallbackServer();
    // A fresh context per test: its own cookies, so its own browser session on {auth_url}.
    context = await chromium.newContext();
    context.setDefaultTimeout(10_000);
    context.setDefaultNavigationTimeout(10_000);
    page = await context.newPage();
    dialogs = [];
    page.on('dialog', (dialog) => {
      dialogs.push(`${dialog.type()}: ${dialog.message()}`);
      void dialog.dismiss();
    });
  });
  afterEach(async () => {
    await context?.close();
    await callback?.close();
  });

  const newState = () => randomBytes(12).toString('base64url');

  /** Registers a public client whose only redirect URI is this test's callback server. */
  const registerClient = (emulator: Emulator, client_name = 'Browser-Agent') =>
    register(emulator.baseUrl, { client_name, redirect_uris: [callback.url] });

  /** Opens the authorization URL in the browser and expects the consent page. */
  async function openConsent(
    emulator: Emulator,
    client_id: string,
    options: { scope?: string; state?: string } = {},
  ): Promise<{ state: string; pkce: Pkce }> {
    const p = pkce();
    const state = options.state ?? newState();
    const response = await page.goto(
      authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, redirect_uri: callback.url, scope: options.scope, state }, p.challenge),
    );
    expect(response?.status()).toBe(200);
    await expect(page.locator('h1').innerText()).resolves.toBe('Zugriff erlauben?');
    return { state, pkce: p };
  }

  /** Clicks a consent button and returns the request that arrived at the redirect URI, once the browser shows it. */
  async function decide(button: 'Zulassen' | 'Ablehnen'): Promise<URL> {
    await page.getByRole('button', { name: button, exact: true }).click();
    const landed = await callback.next();
    await page.waitForURL((u) => u.origin === new URL(callback.url).origin && u.pathname === '/callback');
    expect(page.url()).toBe(landed.toString());
    return landed;
  }

  it('spec 5.6: clicking "Zulassen" sends the browser to the redirect URI with code, the exact state and iss = issuer; the code gives tokens', async () => {
    const emulator = await startEmulator();
    const { client_id } = await registerClient(emulator);
    // A state with characters that need encoding: it must come back byte for byte.
    const sent = `zustand/${newState()}+=&ä ~`;
    const { pkce: p } = await openConsent(emulator, client_id, { state: sent });
    await expect(page.locator('#redirect-host').innerText()).resolves.toBe(new URL(callback.url).host);

    const landed = await decide('Zulassen');
    expect(landed.searchParams.get('code')).toMatch(/^\S{20,}$/);
    expect(landed.searchParams.getAll('state')).toEqual([sent]);
    expect(landed.searchParams.getAll('iss')).toEqual([emulator.issuer]);
    expect(landed.searchParams.get('error')).toBeNull();

    const res = await exchangeCode(emulator.baseUrl, {
      client_id,
      code: landed.searchParams.get('code')!,
      code_verifier: p.verifier,
      redirect_uri: callback.url,
    });
    expect(res.status, res.text).toBe(200);
    const tokens = res.json();
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'ask' });
    await expect(authenticate(emulator.core, `Bearer ${tokens.access_token}`, 'ask')).resolves.toMatchObject({ client_id });
    expect(callback.received).toHaveLength(1);
  });

  it('spec 5.6: consent is shown again for the same client after an approval, even though a grant exists', async () => {
    const emulator = await startEmulator();
    const { client_id } = await registerClient(emulator);
    await openConsent(emulator, client_id);
    const first = await decide('Zulassen');
    expect(listGrants(emulator.core, { client_id }).filter((g) => g.status === 'active')).toHaveLength(1);

    // Same browser session, same client, same scopes: the page must be shown again, not skipped.
    const again = await openConsent(emulator, client_id);
    await expect(page.getByRole('button', { name: 'Zulassen', exact: true }).isVisible()).resolves.toBe(true);
    await expect(page.getByRole('button', { name: 'Ablehnen', exact: true }).isVisible()).resolves.toBe(true);
    expect(new URL(page.url()).pathname).toBe('/oauth/authorize');
    expect(callback.received).toHaveLength(1);

    const second = await decide('Zulassen');
    expect(second.searchParams.get('state')).toBe(again.state);
    expect(second.searchParams.get('code')).not.toBe(first.searchParams.get('code'));
  });

  it('RFC 6749 §4.1.2.1: clicking "Ablehnen" redirects with error=access_denied, the state and iss, and no code', async () => {
    const emulator = await startEmulator();
    const { client_id } = await registerClient(emulator);
    const { state } = await openConsent(emulator, client_id);

    const landed = await decide('Ablehnen');
    expect(landed.searchParams.get('error')).toBe('access_denied');
    expect(landed.searchParams.getAll('state')).toEqual([state]);
    expect(landed.searchParams.getAll('iss')).toEqual([emulator.issuer]);
    expect(landed.searchParams.get('code')).toBeNull();
    expect(listGrants(emulator.core, { client_id })).toHaveLength(0);
  });

  it('spec 4.2: a hostile client_name renders as inert text labelled unverified; scopes are listed in German with writes marked', async () => {
    const emulator = await startEmulator();
    const payload = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">';
    const { client_id } = await registerClient(emulator, payload);
    await openConsent(emulator, client_id, { scope: 'ask training.write' });

    const name = page.locator('#client-name');
    await expect(name.innerText()).resolves.toBe(payload);
    await expect(name.locator('script, img').count()).resolves.toBe(0);
    await expect(page.locator('#client-name + .badge').innerText()).resolves.toBe('nicht verifiziert');
    await expect(page.evaluate(() => (globalThis as { __xss?: unknown }).__xss)).resolves.toBeUndefined();

    const items = page.locator('ul.scopes > li');
    await expect(items.count()).resolves.toBe(2);
    const ask = page.locator('li[data-scope="ask"]');
    await expect(ask.innerText()).resolves.toContain(SCOPES.ask.label);
    await expect(ask.locator('.badge.write').count()).resolves.toBe(0);
    const training = page.locator('li[data-scope="training.write"]');
    await expect(training.innerText()).resolves.toContain(SCOPES['training.write'].label);
    await expect(training.locator('.badge.write').innerText()).resolves.toBe('Schreibzugriff');

    // The settings page shows the same name once a grant exists: inert there too.
    await decide('Zulassen');
    await page.goto(`${emulator.authUrl}/settings`);
    const group = page.locator('section[data-client]');
    await expect(group.locator('h2 bdi').innerText()).resolves.toBe(payload);
    await expect(group.locator('script, img').count()).resolves.toBe(0);
    await expect(page.evaluate(() => (globalThis as { __xss?: unknown }).__xss)).resolves.toBeUndefined();
    expect(dialogs).toEqual([]);
  });

  it('spec 4.2: a right-to-left override in client_name cannot reverse the sentence after the name and its label "nicht verifiziert"', async () => {
    const emulator = await startEmulator();
    // U+202E without its closing U+202C: unisolated, it reverses everything after it up to the end of the paragraph.
    const name = 'Harmlos\u202E';
    const { client_id } = await registerClient(emulator, name);
    await openConsent(emulator, client_id);
    await expect(page.locator('#client-name').innerText()).resolves.toBe(name);

    const layout = await page.evaluate(() => {
      const nameBox = document.querySelector('#client-name')!.getBoundingClientRect();
      const badgeBox = document.querySelector('#client-name + .badge')!.getBoundingClientRect();
      // Where the first and the last letter of "möchte" are drawn.
      const paragraph = document.querySelector('#client-name')!.parentElement!;
      const walker = document.createTreeWalker(paragraph, NodeFilter.SHOW_TEXT);
      let text: Text | null = null;
      for (let node = walker.nextNode(); node !== null; node = walker.nextNode())
        if (node.textContent!.includes('möchte')) text = node as Text;
      const at = text!.textContent.indexOf('möchte');
      const letter = (i: number) => {
        const range = document.createRange();
        range.setStart(text!, i);
        range.setEnd(text!, i + 1);
        return range.getBoundingClientRect().left;
      };
      return { nameRight: nameBox.right, badgeLeft: badgeBox.left, m: letter(at), e: letter(at + 5) };
    });
    expect(layout.badgeLeft).toBeGreaterThanOrEqual(layout.nameRight);
    expect(layout.m).toBeLessThan(layout.e);

    // The settings page sets the name apart the same way.
    await decide('Zulassen');
    await page.goto(`${emulator.authUrl}/settings`);
    await expect(page.locator('section[data-client] h2 > bdi').innerText()).resolves.toBe(name);
  });

  for (const javaScript of [true, false]) {
    it(`spec 5.7, 45.10: "Widerrufen" asks once (JavaScript ${javaScript ? 'on' : 'off'}); "Abbrechen" keeps the grant, the second "Widerrufen" ends it, the result names the application, and the token is refused on the next request`, async () => {
      const emulator = await startEmulator();
      const { client_id } = await registerClient(emulator, 'Widerruf-Agent');
      const { pkce: p } = await openConsent(emulator, client_id);
      const landed = await decide('Zulassen');
      const res = await exchangeCode(emulator.baseUrl, {
        client_id,
        code: landed.searchParams.get('code')!,
        code_verifier: p.verifier,
        redirect_uri: callback.url,
      });
      expect(res.status, res.text).toBe(200);
      const tokens = res.json();
      await expect(authenticate(emulator.core, `Bearer ${tokens.access_token}`, 'ask')).resolves.toMatchObject({ client_id });

      // The settings page in a browser with JavaScript on or off: the question is a page, its answer a form.
      const settings = javaScript ? page : await (await chromium.newContext({ javaScriptEnabled: false })).newPage();
      settings.context().setDefaultTimeout(10_000);
      const [grant] = listGrants(emulator.core, { client_id });
      expect(grant).toBeDefined();
      await settings.goto(`${emulator.authUrl}/settings`);
      const row = settings.locator(`[data-grant="${grant!.id}"]`);
      await expect(settings.locator(`section[data-client="${client_id}"] h2`).innerText()).resolves.toContain('Widerruf-Agent');
      await expect(row.innerText()).resolves.toContain('Aktiv seit');

      // The first click asks; nothing is revoked yet, and "Abbrechen" goes back with the grant active.
      await row.getByRole('button', { name: 'Widerrufen', exact: true }).click();
      await settings.waitForURL((u) => u.pathname === `/settings/grants/${grant!.id}/revoke`);
      await expect(settings.locator('h1').innerText()).resolves.toBe('Zugriff für Widerruf-Agent widerrufen?');
      expect(emulator.core.state.grants[grant!.id]!.status).toBe('active');
      await settings.getByRole('link', { name: 'Abbrechen', exact: true }).click();
      await settings.waitForURL((u) => u.pathname === '/settings');
      expect(emulator.core.state.grants[grant!.id]!.status).toBe('active');
      await expect(authenticate(emulator.core, `Bearer ${tokens.access_token}`, 'ask')).resolves.toMatchObject({ client_id });

      // Asked again and answered: revoked, and the result line says which application lost its access.
      await row.getByRole('button', { name: 'Widerrufen', exact: true }).click();
      await settings.waitForURL((u) => u.pathname === `/settings/grants/${grant!.id}/revoke`);
      await settings.getByRole('button', { name: 'Widerrufen', exact: true }).click();
      await settings.waitForURL((u) => u.pathname === '/settings' && u.searchParams.get('revoked') === grant!.id);
      await expect(settings.getByRole('status').innerText()).resolves.toBe('Der Zugriff von Widerruf-Agent wurde widerrufen.');
      await expect(settings.locator('[role="status"] bdi').innerText()).resolves.toBe('Widerruf-Agent');
      // The client has no active grant left: it moves to the folded list of former applications.
      await settings.locator('details.former > summary').click();
      await expect(settings.locator(`[data-grant="${grant!.id}"]`).innerText()).resolves.toContain('Widerrufen am');
      await expect(settings.locator(`[data-grant="${grant!.id}"] button`).count()).resolves.toBe(0);
      if (!javaScript) await settings.context().close();

      await expect(authenticate(emulator.core, `Bearer ${tokens.access_token}`, 'ask')).rejects.toMatchObject({
        status: 401,
        error: 'invalid_token',
      });
      const refreshed = await refresh(emulator.baseUrl, { client_id, refresh_token: tokens.refresh_token });
      expect(refreshed.status).toBe(400);
      expect(refreshed.json().error).toBe('invalid_grant');
      expect(dialogs).toEqual([]);
    });
  }

  it("45.10: the consent page says what a charged scope costs at this emulator's prices, and what AKh is", async () => {
    for (const [prices, research, ask] of [
      [undefined, `${DEFAULT_PRICES.research} AKh`, `${String(DEFAULT_PRICES.ask).replace('.', ',')} AKh`],
      [{ research: 1.5, ask: 0.25 }, '1,5 AKh', '0,25 AKh'],
    ] as const) {
      const emulator = await startEmulator(prices ? { prices } : {});
      const { client_id } = await registerClient(emulator);
      await openConsent(emulator, client_id, { scope: 'ask research training.write' });
      await expect(page.locator('li[data-scope="research"]').innerText()).resolves.toContain(`Jede Recherche kostet ${research}.`);
      await expect(page.locator('li[data-scope="ask"]').innerText()).resolves.toContain(`Jede Frage kostet ${ask}.`);
      await expect(page.locator('li[data-scope="training.write"] .price').count()).resolves.toBe(0);
      await expect(page.locator('#akh').innerText()).resolves.toMatch(/^AKh ist die Einheit, in der der Agent Access Service abrechnet/);
    }
    // No charged scope asked for: no word about AKh.
    const emulator = await startEmulator();
    const { client_id } = await registerClient(emulator);
    await openConsent(emulator, client_id, { scope: 'training.write' });
    await expect(page.locator('#akh').count()).resolves.toBe(0);
    await expect(page.locator('body').innerText()).resolves.not.toContain('AKh');
  });

  it('RFC 8252 §7.3: an IPv6 loopback redirect URI ([::1]) completes consent in the browser', async () => {
    const emulator = await startEmulator();
    const v6 = await startCallbackServer('::1');
    try {
      const { client_id } = await register(emulator.baseUrl, { client_name: 'IPv6-Agent', redirect_uris: [v6.url] });
      const p = pkce();
      const state = newState();
      const response = await page.goto(
        authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, redirect_uri: v6.url, state }, p.challenge),
      );
      expect(response?.status()).toBe(200);
      await page.getByRole('button', { name: 'Zulassen', exact: true }).click();
      const landed = await v6.next();
      expect(landed.searchParams.get('state')).toBe(state);
      expect(landed.searchParams.get('iss')).toBe(emulator.issuer);
      const res = await exchangeCode(emulator.baseUrl, {
        client_id,
        code: landed.searchParams.get('code')!,
        code_verifier: p.verifier,
        redirect_uri: v6.url,
      });
      expect(res.status, res.text).toBe(200);
    } finally {
      await v6.close();
    }
  });
});

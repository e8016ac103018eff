/**
 * The dashboard attached to a real emulator over its admin stream: a login, a refresh, a replay, a research job
 * and a write action, each seen on screen; keys act through the admin API on the real core.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, render } from 'ink-testing-library';
import { createElement } from 'react';
import { ManualClock, MINUTE, SECOND } from '../src/core/state/clock.js';
import { authenticate } from '../src/core/oauth/resource-guard.js';
import { Dashboard } from '../src/dashboard/app.js';
import { connectDashboard } from '../src/dashboard/run.js';
import { KEYS, frameText, pressKeys, waitForFrame } from './helpers/dashboard.js';
import { startEmulator } from './helpers/emulator.js';
import { authorizeAndApprove, postJson, refresh } from './helpers/oauth.js';

afterEach(() => cleanup());

async function attach(emu: { adminUrl: string; adminToken: string }) {
  const { subscribe, actions } = connectDashboard(async () => ({ adminUrl: emu.adminUrl, token: emu.adminToken }));
  const app = render(createElement(Dashboard, { subscribe, actions, colors: false }));
  const frame = () => frameText(app.lastFrame());
  const waitFor = (test: (frame: string) => boolean, what: string) => waitForFrame(frame, test, what);
  const press = (...keys: string[]) => pressKeys(app.stdin, keys);
  return { app, frame, waitFor, press };
}

describe('dashboard end to end, on a running emulator', () => {
  it('a login, a refresh, a replay and a research job appear as they happen', async () => {
    const clock = new ManualClock();
    const emu = await startEmulator({ clock });
    const ui = await attach(emu);
    await ui.waitFor((f) => f.includes('● live'), 'the stream to connect');

    // A login: registration, consent, code exchange.
    const login = await authorizeAndApprove(emu, { scope: 'ask research' });
    let f = await ui.waitFor((x) => /›active\s+Test Agent\s+Erika Muste/.test(x), 'the grant');
    const grantId = Object.keys(emu.core.state.grants)[0]!;
    expect(f).toContain(`grant ${grantId}`);
    expect(f).toMatch(/scopes\s+ask, research/);

    // A refresh rotates the family: generation 2 is current, generation 1 rotated.
    const first = login.tokens!.refresh_token;
    const rotated = await refresh(emu.baseUrl, { client_id: login.client_id, refresh_token: first });
    expect(rotated.status).toBe(200);
    await ui.press('2');
    f = await ui.waitFor((x) => /gen 2\s+current/.test(x), 'the rotation');
    expect(f).toMatch(/gen 1\s+rotated/);

    // Replaying the first refresh token kills the family, and the dashboard says which token and when.
    const replay = await refresh(emu.baseUrl, { client_id: login.client_id, refresh_token: first });
    expect(replay.status).toBe(400);
    f = await ui.waitFor((x) => x.includes('REPLAY of refresh token gen 1'), 'the replay');
    expect(f).toMatch(/›REPLAYED/);
    expect(f).toMatch(/gen 1\s+rotated.*← replayed/);
    // The footer shows the newest notable event. A replay at once after the rotation is a parallel refresh: the
    // emulator records that finding right after family.invalidated, and the footer ends on it.
    await ui.waitFor((x) => x.includes('error finding refresh.concurrent for Test Agent'), 'the finding in the footer');

    // A research job on a second login (the first family is dead): queued, then succeeded as the clock moves.
    const second = await authorizeAndApprove(emu, { client_id: login.client_id, scope: 'research' });
    const created = await postJson(
      `${emu.baseUrl}/research`,
      { question: 'Dürfen Hunde ins Treppenhaus?' },
      { authorization: `Bearer ${second.tokens!.access_token}` },
    );
    expect(created.status).toBe(202);
    await ui.press('3');
    await ui.waitFor((x) => /research\s+queued/.test(x), 'the queued job');
    clock.advance(10 * MINUTE);
    await emu.resources.settle();
    f = await ui.waitFor((x) => /research\s+(succeeded|failed)/.test(x), 'the finished job');
    expect(f).toMatch(/research\s+succeeded\s+■■■/);

    // The request log saw the research request and the charge is on the ledger.
    await ui.press('5');
    await ui.waitFor((x) => /POST\s+\/research\s+202/.test(x), 'the request in the log');
    await ui.press('/', ...'token', KEYS.enter);
    f = await ui.waitFor((x) => x.includes('[token]'), 'the filtered log');
    expect(f).toMatch(/POST\s+\/oauth\/token\s+400/);
    await ui.press('4');
    f = await ui.waitFor((x) => /POST \/research\s+2 AKh/.test(x), 'the charge');
    expect(f).toContain('total 2 AKh');
  });

  it('two refreshes with one refresh token, seconds apart: a refresh.concurrent finding in the Findings view', async () => {
    const clock = new ManualClock();
    const emu = await startEmulator({ clock });
    const ui = await attach(emu);
    await ui.waitFor((f) => f.includes('● live'), 'the stream to connect');
    const login = await authorizeAndApprove(emu, { scope: 'ask' });
    const token = login.tokens!.refresh_token;
    expect((await refresh(emu.baseUrl, { client_id: login.client_id, refresh_token: token })).status).toBe(200);
    clock.advance(2 * SECOND);
    expect((await refresh(emu.baseUrl, { client_id: login.client_id, refresh_token: token })).status).toBe(400);
    const family = Object.values(emu.core.state.families)[0]!;

    // Seen from the Grants view: the Findings tab counts the error.
    await ui.waitFor((x) => x.includes('│8 Findings 1!'), 'the error badge on the tab');
    await ui.press('8');
    const f = await ui.waitFor((x) => /›ERROR\s+refresh\.concurrent\s+Test Agent\s+1\s+\d+s ago/.test(x), 'the finding');
    const text = f.replace(/\s+/g, ' ');
    expect(text).toContain('ERROR refresh.concurrent seen 1×');
    expect(text).toContain('was presented again 2 s after it was rotated');
    expect(text).toContain('hint Refresh once per token family');
    expect(text).toContain('spec spec 3.2; OAuth 2.1 §4.3.1');
    expect(text).toContain(`grant ${family.grant_id} family ${family.id}`);
    expect(emu.core.findings.list().map((x) => x.code)).toContain('refresh.concurrent');
  });

  it('r revokes the selected grant in the core (after y); the next request with its token is refused', async () => {
    const emu = await startEmulator();
    const login = await authorizeAndApprove(emu, { scope: 'ask' });
    const ui = await attach(emu);
    await ui.waitFor((x) => x.includes('(r revokes it, asks first)'), 'the grant');
    await ui.press('r');
    await ui.waitFor((x) => x.includes('? y/n'), 'the question');
    await ui.press('y');
    await ui.waitFor((x) => x.includes('status   revoked by admin'), 'the revocation');
    const grant = Object.values(emu.core.state.grants)[0]!;
    expect(grant).toMatchObject({ status: 'revoked', revoked_by: 'admin' });
    const ask = await postJson(
      `${emu.baseUrl}/chat/ask`,
      { question: 'Wer ist Luna?' },
      { authorization: `Bearer ${login.tokens!.access_token}` },
    );
    expect(ask.status).toBe(401);
  });

  it('a pending write action is approved from the Approvals view, through the same decision as the approval page', async () => {
    const emu = await startEmulator();
    const login = await authorizeAndApprove(emu, { scope: 'ask workspace.write' });
    const access = await authenticate(emu.core, `Bearer ${login.tokens!.access_token}`, 'workspace.write');
    await emu.plane.ask(access, 'Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678.');
    const ui = await attach(emu);
    await ui.press('6');
    await ui.waitFor((x) => /pending\s+\S+.*contacts\s+create/.test(x), 'the pending action');
    await ui.press('a');
    await ui.waitFor((x) => x.includes('Approve “'), 'the question');
    await ui.press('y');
    await ui.waitFor((x) => /approved\s+\S+.*contacts/.test(x), 'the approval');
    expect(Object.values(emu.core.state.pending_actions)[0]?.status).toBe('approved');
  });

  it('shows when the emulator is gone, and comes back live when it is there again', async () => {
    const first = await startEmulator();
    let target: { adminUrl: string; adminToken: string } = first;
    const { subscribe, actions } = connectDashboard(async () => ({ adminUrl: target.adminUrl, token: target.adminToken }));
    const app = render(createElement(Dashboard, { subscribe, actions, colors: false }));
    const waitFor = (text: string) =>
      waitForFrame(
        () => frameText(app.lastFrame()),
        (f) => f.includes(text),
        text,
      );
    await waitFor('● live');
    await first.stop();
    await waitFor('DISCONNECTED');
    const second = await startEmulator();
    target = second;
    await waitFor(`● live  ${second.baseUrl}`);
    app.stdin.write(KEYS.escape);
  });
});

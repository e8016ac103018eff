/**
 * Issue 7.5: `agent-access snapshot save NAME / restore NAME / reset` (and the admin API, and the programmatic API)
 * bring the state back exactly: the state file and the charge ledger byte for byte, and the API as it was.
 */
import { readFile, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { authenticate } from '../src/core/oauth/resource-guard.js';
import { initialState, reduce } from '../src/dashboard/model.js';
import { dashboardMessages, openAdminStream } from './helpers/admin-stream.js';
import { runCli, startServe } from './helpers/cli.js';
import { readStateAt } from '../src/store/file-persistence.js';
import { scratchDir, startEmulator, startRunning } from './helpers/emulator.js';
import { bearer, http, postJson, refresh } from './helpers/oauth.js';
import { EXAMPLE_SCENARIO, KALENDER, LEGACY } from './helpers/scenario.js';
import { nextEvent, pollUntil } from './helpers/wait.js';

const T0 = Date.UTC(2026, 1, 2, 9, 0, 0);
const adminOf = (emu: { adminUrl: string; adminToken: string }) => ({
  get: (path: string) => http(`${emu.adminUrl}${path}`, { headers: bearer(emu.adminToken) }),
  post: (path: string, body?: unknown) =>
    body === undefined
      ? http(`${emu.adminUrl}${path}`, { method: 'POST', headers: bearer(emu.adminToken) })
      : postJson(`${emu.adminUrl}${path}`, body, bearer(emu.adminToken)),
});

/** The stored state (the state file with its journal replayed, as JSON) and the ledger, as bytes (the ledger null while it does not exist). */
async function files(state: string): Promise<{ state: Buffer; ledger: Buffer | null }> {
  const ledger = state.replace(/\.json$/, '.charges.jsonl');
  return { state: Buffer.from(JSON.stringify(await readStateAt(state))), ledger: existsSync(ledger) ? await readFile(ledger) : null };
}

/**
 * The stored files once the ledger file holds `lines` charges: its lines are appended after the answer that charged
 * them (docs/storage.md, "How a write becomes durable", step 5), so a read right after the answer may come first.
 */
async function filesWithCharges(state: string, lines: number): Promise<{ state: Buffer; ledger: Buffer | null }> {
  const countOf = (ledger: Buffer | null) => (ledger ? ledger.toString().split('\n').filter(Boolean).length : 0);
  let seen: { state: Buffer; ledger: Buffer | null } | null = null;
  return pollUntil(
    async () => {
      seen = await files(state);
      return countOf(seen.ledger) >= lines ? seen : null;
    },
    `${lines} lines in the ledger file`,
    { describe: () => `${countOf(seen?.ledger ?? null)} lines` },
  );
}

const ask = (emu: { baseUrl: string }, token: string, question = 'Wann kommt der Hufschmied?') =>
  postJson(`${emu.baseUrl}/chat/ask`, { question }, bearer(token));

async function fileEmulator(options: { scenario?: string } = {}) {
  const dir = await scratchDir();
  const state = join(dir, 'state.json');
  const clock = new ManualClock(T0);
  const emu = await startEmulator({ state, clock, scenario: options.scenario });
  return { emu, state, clock, dir, admin: adminOf(emu) };
}

describe('docs/emulator-control.md "Scenarios and snapshots": snapshots of the whole state', () => {
  it('snapshot restore is byte-identical (state file and ledger), and the API behaves as at save time', async () => {
    const { emu, state, clock, dir, admin } = await fileEmulator({ scenario: EXAMPLE_SCENARIO });
    // Some history before the save: a refresh, a charged ask.
    const first = (await refresh(emu.baseUrl, KALENDER)).json();
    expect((await ask(emu, first.access_token)).status).toBe(200);

    const saved = await admin.post('/snapshots/vorher');
    expect(saved.status).toBe(201);
    const atSave = await filesWithCharges(state, 4);
    const chargesAtSave = (await admin.get('/charges')).text;
    expect(saved.json()).toMatchObject({
      name: 'vorher',
      charges: 4,
      clock: { mode: 'manual', now: T0 },
      file: join(dir, 'state.snapshots', 'vorher.json'),
    });
    // A snapshot folds the journal into the state file first, and saves that file as it is.
    expect(saved.json().state_sha256).toBe(createHashHex(await readFile(state)));
    expect(saved.json().ledger_sha256).toBe(createHashHex(atSave.ledger!));
    expect((await stat(join(dir, 'state.snapshots', 'vorher.json'))).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'state.snapshots'))).mode & 0o777).toBe(0o700);

    // Everything changes: asks with charges, a refresh (which spends the saved refresh token), a research job, time.
    expect((await ask(emu, first.access_token)).status).toBe(200);
    expect((await ask(emu, first.access_token, 'Wird mit Salz gestreut?')).status).toBe(200);
    const rotated = await refresh(emu.baseUrl, { client_id: KALENDER.client_id, refresh_token: first.refresh_token });
    expect(rotated.status).toBe(200);
    const job = await postJson(
      `${emu.baseUrl}/research`,
      { question: 'Welche Räumzeiten gelten im Winter?' },
      bearer(rotated.json().access_token),
    );
    expect(job.status).toBe(202);
    const jobId = job.json().job_id as string;
    expect((await admin.post('/clock/advance', { by: '20m' })).status).toBe(200);
    // Two asks and a research job after the save's four charges.
    const changed = await filesWithCharges(state, 7);
    expect(changed.state.equals(atSave.state)).toBe(false);
    expect(changed.ledger!.length).toBeGreaterThan(atSave.ledger!.length);

    const restored = await admin.post('/snapshots/vorher/restore');
    expect(restored.status).toBe(200);
    expect(restored.json()).toMatchObject({
      name: 'vorher',
      state_sha256: saved.json().state_sha256,
      ledger_sha256: saved.json().ledger_sha256,
    });
    const afterRestore = await files(state);
    expect(afterRestore.state.equals(atSave.state)).toBe(true);
    expect(afterRestore.ledger!.equals(atSave.ledger!)).toBe(true);

    // The API answers as it did at save time.
    expect(clock.now()).toBe(T0);
    expect((await admin.get('/charges')).text).toBe(chargesAtSave);
    // The access token of the save-time family passes the guard again (the clock is back where it was).
    expect((await http(`${emu.baseUrl}/research/job-streusalz`, { headers: bearer(first.access_token) })).status).toBe(200);
    // The refresh token that was current at save time works again.
    const again = await refresh(emu.baseUrl, { client_id: KALENDER.client_id, refresh_token: first.refresh_token });
    expect(again.status).toBe(200);
    // The job created after the save does not exist.
    expect((await http(`${emu.baseUrl}/research/${jobId}`, { headers: bearer(again.json().access_token) })).status).toBe(404);
    // A later write starts from the restored state: the ledger goes on from the saved line.
    expect((await ask(emu, again.json().access_token)).status).toBe(200);
    const next = await filesWithCharges(state, 5);
    expect(next.ledger!.subarray(0, atSave.ledger!.length).equals(atSave.ledger!)).toBe(true);
    expect(JSON.parse(next.ledger!.toString().trim().split('\n').at(-1)!).seq).toBe(5);
    // A refresh token minted after the save names the same family: presented now, it is a replay and ends the family.
    const stale = await refresh(emu.baseUrl, { client_id: KALENDER.client_id, refresh_token: rotated.json().refresh_token });
    expect(stale.json()).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('replay') });
    expect((await ask(emu, again.json().access_token)).status).toBe(401);
  });

  it('reset returns to the state as loaded from the scenario, not to empty', async () => {
    const { emu, state, admin } = await fileEmulator({ scenario: EXAMPLE_SCENARIO });
    const created = await filesWithCharges(state, 3); // the scenario's three charges
    const createdFile = await readFile(state);
    const legacy = await refresh(emu.baseUrl, LEGACY);
    expect(legacy.json().scope).toBe('ask');
    await ask(emu, legacy.json().access_token);
    await admin.post('/snapshots/zwischenstand');
    expect((await admin.get('/grants?client_id=client_dokumente_alt')).json().grants[0].scopes).toEqual(['ask']);

    const reset = await admin.post('/reset');
    expect(reset.status).toBe(200);
    expect(reset.json()).toMatchObject({ name: '_baseline', charges: 3 });
    const after = await files(state);
    expect(after.state.equals(created.state)).toBe(true);
    expect(after.ledger!.equals(created.ledger!)).toBe(true);
    // The legacy grant carries its retired scopes again, and its scenario refresh token works again.
    expect((await admin.get('/grants?client_id=client_dokumente_alt')).json().grants[0].scopes).toEqual([
      'ask',
      'documents.read',
      'contacts.read',
    ]);
    expect((await refresh(emu.baseUrl, LEGACY)).status).toBe(200);
    expect((await admin.get('/charges')).json().total).toBe(2.2);
    // Snapshots are kept across a reset; the list shows them and the baseline.
    const list = (await admin.get('/snapshots')).json();
    expect(list.snapshots.map((s: { name: string }) => s.name)).toEqual(['zwischenstand']);
    expect(list.baseline).toMatchObject({ name: '_baseline', state_sha256: createHashHex(createdFile) });
  });

  it('without a scenario, reset returns to the state as created from the fixtures', async () => {
    const { emu, state, admin } = await fileEmulator();
    const created = await files(state);
    expect(created.ledger).toBeNull();
    const tokens = (await admin.post('/tokens', { scopes: ['ask'] })).json();
    await ask(emu, tokens.access_token);
    expect((await filesWithCharges(state, 1)).ledger).not.toBeNull();
    expect((await admin.post('/reset')).status).toBe(200);
    const after = await files(state);
    expect(after.state.equals(created.state)).toBe(true);
    // No ledger at creation: none after the reset either.
    expect(after.ledger).toBeNull();
    expect((await ask(emu, tokens.access_token)).status).toBe(401);
  });

  it('the workspace follows a restore: a change applied after the save is gone, search and rate limits start over', async () => {
    const clock = new ManualClock(T0);
    const emu = await startEmulator({ clock, rateLimit: '3/min' });
    const admin = adminOf(emu);
    const tokens = (await admin.post('/tokens', { scopes: ['ask', 'workspace.write'] })).json();
    const access = await authenticate(emu.core, `Bearer ${tokens.access_token}`, null);
    const create = async (name: string) => {
      const asked = (await emu.plane.ask(access, `Lege einen Kontakt „${name}“ an, Telefon: 0171 2345678.`)).value as { action_id: string };
      await emu.plane.decide(access.person_id, asked.action_id, 'approve');
      await emu.plane.continueAsk(access, asked.action_id);
    };
    const titles = async (q: string) => (await emu.resources.search.search(q, { person: access.person_id })).map((h) => h.title);
    await create('Anna Zirbelmeier');
    await admin.post('/snapshots/mit-anna');
    await create('Bernd Zirbelhuber');
    expect(await titles('Zirbelhuber')).toContain('Bernd Zirbelhuber');
    // The grant's rate-limit window is used up.
    for (let i = 0; i < 3; i++) await ask(emu, tokens.access_token);
    expect((await ask(emu, tokens.access_token)).status).toBe(429);

    expect((await admin.post('/snapshots/mit-anna/restore')).status).toBe(200);
    expect(await titles('Zirbelhuber')).not.toContain('Bernd Zirbelhuber');
    expect(await titles('Zirbelmeier')).toContain('Anna Zirbelmeier');
    expect(emu.core.state.workspace_changes).toHaveLength(1);
    expect((await ask(emu, tokens.access_token)).status).toBe(200);
  });

  it('snapshot names are checked, an unknown one is 404, a damaged one 409; none of them changes anything', async () => {
    const { emu, state, dir, admin } = await fileEmulator();
    await admin.post('/snapshots/gut');
    const before = await files(state);
    for (const name of ['..%2Fevil', '.hidden', 'a%20b', 'x'.repeat(65), '_baseline', '-a', 'a%2Fb']) {
      const save = await admin.post(`/snapshots/${name}`);
      expect(save.status, name).toBe(400);
      expect(save.headers['content-type']).toContain('application/problem+json');
      expect((await admin.post(`/snapshots/${name}/restore`)).status, name).toBe(400);
    }
    expect(existsSync(join(dir, 'evil.json'))).toBe(false);
    const missing = await admin.post('/snapshots/nie-gespeichert/restore');
    expect(missing.status).toBe(404);
    expect(missing.json().detail).toContain('no snapshot "nie-gespeichert"');
    // A hand-edited snapshot does not match its SHA-256: refused, nothing restored.
    const file = join(dir, 'state.snapshots', 'gut.json');
    const edited = JSON.parse(await readFile(file, 'utf8'));
    edited.state = edited.state.replace(/"clients":\{\n?\}/, '"clients":{"x":{}}');
    await writeFile(file, JSON.stringify(edited));
    const damaged = await admin.post('/snapshots/gut/restore');
    expect(damaged.status).toBe(409);
    expect(damaged.json().detail).toContain(`snapshot file ${file} is damaged`);
    // A misspelt body on an admin route is refused as ever.
    expect((await postJson(`${emu.adminUrl}/clock/advance`, { by: '1m', snapshot: 'x' }, bearer(emu.adminToken))).status).toBe(400);
    const after = await files(state);
    expect(after.state.equals(before.state)).toBe(true);
    expect(after.ledger).toEqual(before.ledger);
    // The admin token guards these routes like every admin route.
    expect((await http(`${emu.adminUrl}/snapshots/gut`, { method: 'POST' })).status).toBe(401);
  });

  it('a state file that predates snapshots has no baseline: reset is 409 and says why', async () => {
    const { emu, dir } = await fileEmulator();
    await emu.stop();
    await rm(join(dir, 'state.snapshots'), { recursive: true });
    const again = await startEmulator({ state: join(dir, 'state.json') });
    const reset = await adminOf(again).post('/reset');
    expect(reset.status).toBe(409);
    expect(reset.json().detail).toContain('this state has no baseline to reset to');
    expect((await adminOf(again).get('/snapshots')).json()).toMatchObject({ snapshots: [], baseline: null });
  });

  it('a restore amid charged requests leaves the state file and the ledger agreeing line for line', async () => {
    const { emu, state, admin } = await fileEmulator();
    const tokens = (await admin.post('/tokens', { scopes: ['ask'] })).json();
    await admin.post('/snapshots/leer');
    // The restore is asked for as soon as the first of the asks is charged, while the others are still running.
    const firstCharge = nextEvent(emu.core.events, 'charge.recorded');
    const asks = Array.from({ length: 40 }, (_, i) => ask(emu, tokens.access_token, `Frage ${i}: Wann kommt der Hufschmied?`));
    const restore = firstCharge.then(() => admin.post('/snapshots/leer/restore'));
    const answers = await Promise.all([...asks, restore]);
    expect(answers.at(-1)!.status).toBe(200);
    await emu.stop();
    const saved = JSON.parse((await readFile(state)).toString());
    const { ledger } = await files(state);
    const lines = ledger
      ? ledger
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { seq: number; amount: number })
      : [];
    expect(lines.map((l) => l.seq)).toEqual(lines.map((_, i) => i + 1));
    expect(saved.charges.count).toBe(lines.length);
    expect(saved.charges.by_grant[tokens.grant_id] ?? 0).toBeCloseTo(
      lines.reduce((sum, l) => sum + l.amount, 0),
      6,
    );
  });

  it('the dashboard stream sends a fresh overview after a restore, so the dashboard shows the restored state', async () => {
    const { emu, admin } = await fileEmulator();
    const tokens = (await admin.post('/tokens', { scopes: ['ask'] })).json();
    await ask(emu, tokens.access_token);
    await admin.post('/snapshots/eins');
    const stream = await openAdminStream(emu);
    await stream.until((m) => m.some((x) => x.event === 'overview'), 'the first overview');
    await ask(emu, tokens.access_token);
    await ask(emu, tokens.access_token);
    await stream.until((m) => m.filter((x) => x.event === 'charge.recorded').length === 2, 'two charges');
    await admin.post('/snapshots/eins/restore');
    await stream.until((m) => m.filter((x) => x.event === 'overview').length === 2, 'a second overview');
    stream.close();
    const messages = dashboardMessages(stream.messages);
    const names = messages.map((m) => (m.type === 'event' ? m.event.name : m.type));
    const restoredAt = names.indexOf('state.restored');
    expect(restoredAt).toBeGreaterThan(0);
    expect(names.indexOf('overview', restoredAt)).toBeGreaterThan(restoredAt);
    const folded = messages.reduce(reduce, initialState());
    expect(folded.charges.entries.map((e) => e.seq)).toEqual([1]);
    expect(Object.keys(folded.grants)).toHaveLength(1);
    expect(folded.activity.at(-1)?.text).toBe('state restored from snapshot eins');
  });
});

describe('docs/emulator-control.md "Scenarios and snapshots": snapshots from test code and CI', () => {
  it('startEmulator({ scenario }) in memory: snapshots.save, restore, reset and list', async () => {
    const emu = await startRunning({ scenario: EXAMPLE_SCENARIO, clock: T0 });
    const first = (await refresh(emu.baseUrl, KALENDER)).json();
    const saved = await emu.snapshots.save('nach-dem-login');
    expect(saved).toMatchObject({ name: 'nach-dem-login', file: null, charges: 3, clock: { mode: 'manual', now: T0 } });
    const second = (await refresh(emu.baseUrl, { client_id: KALENDER.client_id, refresh_token: first.refresh_token })).json();
    await ask(emu, second.access_token);
    await emu.clock.advance('1h');

    const restored = await emu.snapshots.restore('nach-dem-login');
    expect(restored.state_sha256).toBe(saved.state_sha256);
    expect(restored.ledger_sha256).toBe(saved.ledger_sha256);
    expect(await emu.clock.now()).toBe(T0);
    expect((await refresh(emu.baseUrl, { client_id: KALENDER.client_id, refresh_token: first.refresh_token })).status).toBe(200);
    // Saved again after a change, it differs; restored, it is the same again.
    expect((await emu.snapshots.save('danach')).state_sha256).not.toBe(saved.state_sha256);
    expect((await emu.snapshots.restore('nach-dem-login')).state_sha256).toBe(saved.state_sha256);

    const reset = await emu.snapshots.reset();
    expect(reset.name).toBe('_baseline');
    expect((await refresh(emu.baseUrl, KALENDER)).status).toBe(200);
    expect((await emu.snapshots.list()).snapshots.map((s) => s.name)).toEqual(['danach', 'nach-dem-login']);
    await expect(emu.snapshots.restore('gibt-es-nicht')).rejects.toMatchObject({ status: 404 });
    await expect(emu.snapshots.save('nicht/erlaubt')).rejects.toMatchObject({ status: 400 });
  });

  it('the same through a child `agent-access serve --scenario`', async () => {
    const emu = await startRunning({ mode: 'child', scenario: EXAMPLE_SCENARIO, clock: 'manual' });
    const saved = await emu.snapshots.save('s1');
    const legacy = await refresh(emu.baseUrl, LEGACY);
    expect(legacy.json().scope).toBe('ask');
    await emu.snapshots.restore('s1');
    // Restored: the legacy grant has its retired scopes back, and its refresh token works once more.
    const again = await refresh(emu.baseUrl, LEGACY);
    expect(again.status).toBe(200);
    expect(again.json().scope).toBe('ask');
    expect((await emu.snapshots.list()).snapshots).toEqual([saved]);
  });

  it('agent-access snapshot save / list / restore / reset against a running serve', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const s = await startServe(['--state', state, '--scenario', EXAMPLE_SCENARIO, '--clock', 'manual']);
    try {
      const created = await filesWithCharges(state, 3);
      const admin = adminOf({ adminUrl: s.ready.admin_url, adminToken: s.ready.admin_token });
      const token = (await refresh(s.ready.base_url, KALENDER)).json().access_token as string;
      await ask({ baseUrl: s.ready.base_url }, token);

      const save = await runCli(['snapshot', 'save', 'ci-1', '--state', state]);
      expect(save.code).toBe(0);
      expect(save.stdout).toMatch(/^saved snapshot ci-1: state sha256 [0-9a-f]{12}…, 4 charges, clock \S+ \(manual\)\n {2}.*ci-1\.json\n$/);
      const atSave = await filesWithCharges(state, 4);

      await ask({ baseUrl: s.ready.base_url }, token);
      await admin.post('/clock/advance', { by: '5m' });
      const list = await runCli(['snapshot', 'list', '--state', state, '--json']);
      expect(JSON.parse(list.stdout)).toMatchObject({
        snapshots: [{ name: 'ci-1', charges: 4 }],
        baseline: { name: '_baseline', charges: 3 },
        location: join(dir, 'state.snapshots'),
      });
      expect((await runCli(['snapshot', 'list', '--state', state])).stdout).toMatch(
        /^NAME +SAVED +CLOCK +CHARGES +STATE SHA256\nci-1 .* 4 +[0-9a-f]{12}…\nbaseline \(reset\): saved /,
      );

      const restore = await runCli([
        'snapshot',
        'restore',
        'ci-1',
        '--url',
        s.ready.base_url,
        '--admin-token',
        s.ready.admin_token,
        '--json',
      ]);
      expect(restore.code).toBe(0);
      expect(JSON.parse(restore.stdout)).toMatchObject({ name: 'ci-1', charges: 4 });
      const afterRestore = await files(state);
      expect(afterRestore.state.equals(atSave.state)).toBe(true);
      expect(afterRestore.ledger!.equals(atSave.ledger!)).toBe(true);

      const reset = await runCli(['snapshot', 'reset', '--state', state]);
      expect(reset.code).toBe(0);
      expect(reset.stdout).toMatch(/^reset to the baseline: state sha256 [0-9a-f]{12}…, 3 charges/);
      expect((await files(state)).state.equals(created.state)).toBe(true);

      const missing = await runCli(['snapshot', 'restore', 'nope', '--state', state]);
      expect(missing.code).toBe(7);
      expect(missing.stderr).toContain('no snapshot "nope"');
      const badName = await runCli(['snapshot', 'save', '../x', '--state', state]);
      expect(badName.code).toBe(2);
      expect(badName.stderr).toContain('must match pattern');
    } finally {
      await s.stop();
    }
    // The snapshots stay beside the state file: a restarted emulator restores them.
    const again = await startServe(['--state', state, '--scenario', EXAMPLE_SCENARIO]);
    try {
      expect((await runCli(['snapshot', 'restore', 'ci-1', '--state', state])).code).toBe(0);
    } finally {
      await again.stop();
    }
    const none = await runCli(['snapshot', 'save', 'x', '--state', join(dir, 'other.json')]);
    expect(none.code).toBe(6);
    expect(none.stderr).toContain('no emulator serves');
  });
});

function createHashHex(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

import { appendFile, lstat, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { Emulator, type EmulatorOptions } from '../src/server/emulator.js';
import { readStateAt } from '../src/store/file-persistence.js';
import { leaveJournalBehind, scratchDir, startEmulator } from './helpers/emulator.js';
import { authorizeAndApprove, postJson } from './helpers/oauth.js';
import { ask, loggedIn } from './helpers/rest.js';

const withToken = (options: EmulatorOptions = {}, scope = 'ask') => loggedIn(startEmulator, options, scope);

describe('spec 4.4 rule 5 / 8: idempotency', () => {
  it('expired records and used codes are pruned from the state file, so it does not grow without bound', async () => {
    const clock = new ManualClock();
    const state = join(await scratchDir(), 'state.json');
    const { emu, token } = await withToken({ clock, state });
    for (const key of ['p-1', 'p-2', 'p-3']) expect((await ask(emu, token, 'Kaution', { 'idempotency-key': key })).status).toBe(200);
    const stored = async () => (await readStateAt(state)) as unknown as { idempotency: object; codes: object; families: object };
    const before = await stored();
    expect(Object.keys(before.idempotency)).toHaveLength(3);
    expect(Object.keys(before.codes)).toHaveLength(1);
    // Past the 24-hour window and the code's lifetime plus a day; the refresh token (30 days) still lives.
    const advance = await postJson(`${emu.adminUrl}/clock/advance`, { by: '49h' }, { authorization: `Bearer ${emu.adminToken}` });
    expect(advance.status).toBe(200);
    const after = await stored();
    expect(after.idempotency).toEqual({});
    expect(after.codes).toEqual({});
    expect(Object.keys(after.families)).toEqual(Object.keys(before.families));
    expect(JSON.stringify(await stored()).length).toBeLessThan(JSON.stringify(before).length);
  });

  it('two Idempotency-Key headers on one request → 400 invalid_idempotency_key, nothing run or charged', async () => {
    const { emu, token } = await withToken();
    // Sent as written: a header list keeps both (Node would otherwise join them into one "a, b" value).
    const res = await request(`${emu.baseUrl}/chat/ask`, {
      method: 'POST',
      headers: ['authorization', `Bearer ${token}`, 'content-type', 'application/json', 'idempotency-key', 'a', 'Idempotency-Key', 'b'],
      body: JSON.stringify({ question: 'Kaution' }),
    });
    expect(res.statusCode).toBe(400);
    expect(await res.body.json()).toMatchObject({
      type: 'urn:agent-access:error:invalid_idempotency_key',
      detail: 'the request carries 2 Idempotency-Key headers; send exactly one',
      hint: expect.stringMatching(/^Set the Idempotency-Key header once per request/),
    });
    expect(emu.core.state.charges.count).toBe(0);
  });
});

describe('spec 1: charges', () => {
  it('the ledger file is written from the charges in the state: a line beyond them (a crash, its journal left behind) is rewritten away', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const first = await Emulator.start({ port: 0, authPort: 0, state });
    const flow = await authorizeAndApprove(first);
    await ask(first, flow.tokens!.access_token, 'Kaution');
    await first.stop();
    const ledgerFile = join(dir, 'state.charges.jsonl');
    expect((await readFile(ledgerFile, 'utf8')).trim().split('\n')).toHaveLength(1);
    await appendFile(ledgerFile, '{"seq":2,"torn":true}\n');
    await leaveJournalBehind(state);
    const second = await startEmulator({ state });
    expect(await second.core.persistence.readCharges()).toHaveLength(1);
    expect((await readFile(ledgerFile, 'utf8')).trim().split('\n')).toHaveLength(1);
  });

  it('rewriting it never writes through a symlinked ledger: the file it points to is left as it was', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const first = await Emulator.start({ port: 0, authPort: 0, state });
    const flow = await authorizeAndApprove(first);
    await ask(first, flow.tokens!.access_token, 'Kaution');
    await first.stop();
    const ledgerFile = join(dir, 'state.charges.jsonl');
    // The one committed line, then one a crash left: the link's target holds both.
    const precious = `${await readFile(ledgerFile, 'utf8')}line two\n`;
    const elsewhere = join(dir, 'precious.txt');
    await writeFile(elsewhere, precious);
    await rm(ledgerFile, { force: true });
    await symlink(elsewhere, ledgerFile);
    await leaveJournalBehind(state);
    const second = await startEmulator({ state });
    expect(await second.core.persistence.readCharges()).toHaveLength(1);
    expect(await readFile(elsewhere, 'utf8')).toBe(precious);
    expect((await lstat(ledgerFile)).isSymbolicLink()).toBe(false);
  });
});

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { Emulator, type EmulatorOptions } from '../src/server/emulator.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { authorizeAndApprove } from './helpers/oauth.js';
import { get, loggedInOnClock, post } from './helpers/rest.js';

const setup = (options: EmulatorOptions = {}, scope = 'ask research training.write') => loggedInOnClock(startEmulator, options, scope);

describe('spec 2.5, 3.1, 4.4 rule 3: research jobs', () => {
  it('jobs survive a restart of serve: a running job resumes and finishes', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const clock = new ManualClock();
    const first = await Emulator.start({ port: 0, authPort: 0, state, clock });
    const flow = await authorizeAndApprove(first, { scope: 'research' });
    const { poll } = (await post(first, flow.tokens!.access_token, '/research', { question: 'Hufschmied' })).json();
    clock.advance(1_500);
    expect((await get(first, flow.tokens!.access_token, poll)).json().status).toBe('running');
    await first.stop();
    const second = await startEmulator({ state, clock });
    clock.advance(4_000);
    // A new access token for the same client: the old one names the old issuer port.
    const fresh = await authorizeAndApprove(second, { scope: 'research', client_id: flow.client_id });
    expect((await get(second, fresh.tokens!.access_token, poll)).json().status).toBe('succeeded');
  });
});

describe('spec 2.5: a finished job after a restart', () => {
  it('its report, read back from the state file after a restart and again after a compaction, answers exactly as before', async () => {
    const state = join(await scratchDir(), 'state.json');
    const clock = new ManualClock();
    const { emu, token } = await setup({ state, clock });
    const { job_id, poll } = (await post(emu, token, '/research', { question: 'Wann kommt der Hufschmied?' })).json();
    clock.advance(5_000);
    const done = await get(emu, token, poll);
    expect(done.json().status).toBe('succeeded');
    const [port, authPort] = [emu.baseUrl, emu.authUrl].map((url) => Number(new URL(url).port));
    await emu.stop();
    // The same ports: the token's audience names them.
    const again = await startEmulator({ state, clock, port, authPort });
    // Plain data (46.3): no getter that reads the state file when the job is read or spread.
    expect(Object.getOwnPropertyDescriptor(again.core.repo.get('research_jobs', job_id), 'report')).toHaveProperty('value');
    const afterRestart = await get(again, token, poll);
    expect(afterRestart.status).toBe(200);
    expect(afterRestart.text).toBe(done.text);
    await again.core.exportState();
    expect((await get(again, token, poll)).text).toBe(done.text);
  });
});

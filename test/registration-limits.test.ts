import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { describe, expect, it } from 'vitest';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { authorizeAndApprove, clientMetadata, register } from './helpers/oauth.js';

describe('41.1: open registration is bounded (a rate per source address, a number of clients, unused clients expire)', () => {
  it('41.1: a flood of maximal registrations stays within the cap and its bytes, and a client registered before keeps its login', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const cap = 40;
    const emu = await startEmulator({ state, maxClients: cap, journalLimit: 64 * 1024 * 1024 });
    const normal = await register(emu.baseUrl);
    const before = (await stat(state)).size;
    // The largest a registration may be: 20 redirect URIs of 2000 characters, a name of 200.
    const maximal = (i: number) =>
      JSON.stringify(
        clientMetadata({
          client_name: `${i}`.padEnd(200, 'x'),
          redirect_uris: Array.from({ length: 20 }, (_, j) => `https://flood.example/${i}/${j}/`.padEnd(2000, 'a')),
        }),
      );
    const dispatcher = new Agent({ connections: 8 });
    const statuses = new Map<number, number>();
    try {
      const flood = 400;
      for (let i = 0; i < flood; i += 20) {
        const batch = await Promise.all(
          Array.from({ length: 20 }, async (_, k) => {
            const res = await request(`${emu.baseUrl}/oauth/register`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: maximal(i + k),
              dispatcher,
            });
            await res.body.dump();
            return res.statusCode;
          }),
        );
        for (const s of batch) statuses.set(s, (statuses.get(s) ?? 0) + 1);
      }
    } finally {
      await dispatcher.close();
    }
    // The one normal client took a place: the flood got the rest, and every other request a 503 (within the rate).
    expect(Object.fromEntries(statuses)).toEqual({ 201: cap - 1, 503: 400 - (cap - 1) });
    expect(Object.keys(emu.core.state.clients)).toHaveLength(cap);
    // The state file and its journal grow by at most the cap's worth of maximal clients (about 41 KB each).
    const journal = await stat(join(dir, 'state.journal.jsonl')).then(
      (s) => s.size,
      () => 0,
    );
    expect((await stat(state)).size + journal - before).toBeLessThan(cap * 45 * 1024);
    // The client registered before the flood still logs in.
    const flow = await authorizeAndApprove(emu, { client_id: normal.client_id });
    expect(flow.tokens?.access_token).toBeTruthy();
  });
});

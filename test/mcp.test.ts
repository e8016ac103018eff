/**
 * The agent plane's write actions over a state file (spec 2.7 workspace.write): an applied change is in the file,
 * and a restarted emulator finds it. The rest of `/mcp` is held in process by test/unit/mcp.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { MCP_VERSIONS, call, connectWithOAuth, decide, type Structured } from './helpers/mcp-client.js';

describe.each(MCP_VERSIONS)('write actions wait for the person (spec 2.7 workspace.write, 4.4 rule 1), MCP %s', (version) => {
  it('approved: ask prepares one action and changes nothing; continue_ask waits, then applies it; later asks see it; the state file keeps it', async () => {
    const state = join(await scratchDir(), 'state.json');
    const emulator = await startEmulator({ state });
    const { client } = await connectWithOAuth(emulator, 'ask workspace.write', undefined, version);
    const asked = await call(client, 'ask', {
      question: 'Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678, Firma: Schmidt Gartenbau, Ort: Lenggries.',
    });
    expect(asked.data).toMatchObject({ outcome: 'pending_approval', status: 'pending', kind: 'contacts', operation: 'create' });
    expect(asked.data.description).toBe(
      'Neuen Eintrag der Art Kontakt „Anna Schmidt“ anlegen mit Telefon „0171 2345678“, Firma „Schmidt Gartenbau“, Ort „Lenggries“.',
    );
    expect(asked.text).toMatch(/noch nichts geändert/);
    expect(
      (await call(client, 'ask', { question: 'Welche Telefonnummer hat Anna Schmidt?' })).data.sources.some(
        (s: Structured) => s.title === 'Anna Schmidt',
      ),
    ).toBe(false);

    const waiting = await call(client, 'continue_ask', { action_id: asked.data.action_id });
    expect(waiting.data).toMatchObject({ outcome: 'pending_approval' });
    expect(waiting.text).toMatch(/wartet noch auf die Freigabe/);
    // One action at a time: a second change is refused while this one is open.
    const second = await call(client, 'ask', { question: 'Lege einen Kontakt „Bernd Maier“ an.' });
    expect(second.data).toMatchObject({ outcome: 'refused', action_id: asked.data.action_id });

    const page = await decide(asked.data.approve_url, 'approve');
    expect(page).toContain('Freigegeben.');
    const applied = await call(client, 'continue_ask', { action_id: asked.data.action_id });
    expect(applied.data).toMatchObject({
      outcome: 'applied',
      status: 'applied',
      record: { title: 'Anna Schmidt', phone: '0171 2345678', company: 'Schmidt Gartenbau', city: 'Lenggries' },
    });
    expect(applied.text).toMatch(/^Erledigt: /);
    const found = await call(client, 'ask', { question: 'Welche Telefonnummer hat Anna Schmidt?' });
    expect(found.data.sources.map((s: Structured) => s.title)).toContain('Anna Schmidt');
    expect(found.text).toContain('0171 2345678');
    // Applied once: continuing again reports it without a second change.
    expect((await call(client, 'continue_ask', { action_id: asked.data.action_id })).data.outcome).toBe('applied');
    await client.close();
    await emulator.stop();

    const saved = JSON.parse(await readFile(state, 'utf8'));
    expect(saved.workspace_changes).toHaveLength(1);
    const restarted = await startEmulator({ state });
    const hits = await restarted.resources.search.search('Anna Schmidt Telefon', { person: 'person_erika' });
    expect(hits.map((h) => h.title)).toContain('Anna Schmidt');
  });
});

/**
 * Issue 7.5: `serve --scenario FILE` preloads clients, grants (a legacy one with retired scopes among them),
 * knowledge, research jobs and charges from a documented JSON file, checked completely before anything is created.
 */
import { moveAwayCommand } from '../src/store/state-files.js';
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { StateFileError } from '../src/core/state/errors.js';
import { ScenarioError } from '../src/loaders/scenario.js';
import { runCli } from './helpers/cli.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { bearer, decodeJwt, http, postJson, refresh } from './helpers/oauth.js';
import { EXAMPLE_SCENARIO, KALENDER, LEGACY } from './helpers/scenario.js';

const EXAMPLE = EXAMPLE_SCENARIO;

async function writeScenario(content: unknown): Promise<string> {
  const file = join(await scratchDir(), 'scenario.json');
  await writeFile(file, typeof content === 'string' ? content : JSON.stringify(content, null, 2));
  return file;
}

const minimal = {
  version: 1,
  clients: [{ client_id: 'client_a', client_name: 'Agent A', redirect_uris: ['http://127.0.0.1/cb'] }],
  grants: [
    { id: 'grant_a', client_id: 'client_a', scopes: ['ask'], resource: 'mcp', refresh_token: `aa1.${'A'.repeat(22)}.${'s'.repeat(43)}` },
  ],
};

describe('docs/emulator-control.md "Scenarios and snapshots": serve --scenario preloads every kind of record', () => {
  it('the example scenario loads clients, grants, knowledge, research jobs and charges, and each works through the API', async () => {
    const emu = await startEmulator({ scenario: EXAMPLE, clock: new ManualClock(Date.UTC(2026, 1, 1, 9)) });
    const admin = { authorization: `Bearer ${emu.adminToken}` };
    expect(Object.keys(emu.core.state.clients).sort()).toEqual(['client_dokumente_alt', 'client_kalender', 'client_wetter']);
    expect(emu.core.state.clients.client_kalender).toMatchObject({
      client_name: 'Kalender-Assistent',
      redirect_uris: ['http://127.0.0.1/callback'],
      token_endpoint_auth_method: 'none',
    });

    // Charges: ledger lines and totals, as if they had been charged.
    const charges = (await http(`${emu.adminUrl}/charges`, { headers: admin })).json();
    expect(charges.total).toBe(2.2);
    expect(charges.entries).toEqual([
      {
        seq: 1,
        at: Date.parse('2026-01-15T09:00:00Z'),
        client_id: 'client_kalender',
        grant_id: 'grant_kalender',
        route: 'POST /research',
        amount: 2,
        unit: 'AKh',
        idempotency_key: 'recherche-streusalz',
      },
      {
        seq: 2,
        at: Date.parse('2026-01-16T07:12:00Z'),
        client_id: 'client_kalender',
        grant_id: 'grant_kalender',
        route: 'POST /chat/ask',
        amount: 0.1,
        unit: 'AKh',
        idempotency_key: null,
      },
      {
        seq: 3,
        at: Date.parse('2026-01-18T11:30:00Z'),
        client_id: 'client_dokumente_alt',
        grant_id: 'grant_dokumente_alt',
        route: 'tool ask',
        amount: 0.1,
        unit: 'AKh',
        idempotency_key: null,
      },
    ]);
    expect(charges.clients).toEqual([
      { client_id: 'client_kalender', client_name: 'Kalender-Assistent', total: 2.1, charges: 2 },
      { client_id: 'client_dokumente_alt', client_name: 'Dokumenten-Agent (alte Version)', total: 0.1, charges: 1 },
    ]);
    const grants = (await http(`${emu.adminUrl}/grants`, { headers: admin })).json().grants as Array<{
      id: string;
      scopes: string[];
      status: string;
      person_id: string;
      created_at: number;
    }>;
    const byId = Object.fromEntries(grants.map((g) => [g.id, g]));
    expect(byId.grant_kalender).toMatchObject({
      scopes: ['ask', 'research', 'training.write'],
      status: 'active',
      person_id: 'person_erika',
      created_at: Date.parse('2026-01-12T08:30:00Z'),
    });
    expect(byId.grant_wetter).toMatchObject({ status: 'revoked', person_id: 'person_max' });

    // Spec 9: the legacy grant works, and loses its retired scopes at its first refresh.
    expect(byId.grant_dokumente_alt!.scopes).toEqual(['ask', 'documents.read', 'contacts.read']);
    const legacy = await refresh(emu.baseUrl, LEGACY);
    expect(legacy.status).toBe(200);
    expect(legacy.json().scope).toBe('ask');
    expect(decodeJwt(legacy.json().access_token).payload).toMatchObject({
      aud: `${emu.baseUrl}/mcp`,
      client_id: LEGACY.client_id,
      grant_id: 'grant_dokumente_alt',
    });
    expect((await http(`${emu.adminUrl}/grants?client_id=${LEGACY.client_id}`, { headers: admin })).json().grants[0].scopes).toEqual([
      'ask',
    ]);

    const kalender = await refresh(emu.baseUrl, KALENDER);
    expect(kalender.status).toBe(200);
    const token = kalender.json().access_token as string;

    // Shared knowledge is found by everyone's asks; the grant's own training document by its person.
    const salt = await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Wird im Winter mit Salz oder Splitt gestreut?' }, bearer(token));
    expect(salt.status).toBe(200);
    expect(salt.json().sources.map((s: { id: string }) => s.id)).toContain('kb-winterdienst');
    expect(salt.json().answer).toContain('Splitt');
    const farrier = await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Wann kommt der Hufschmied zu Flocke?' }, bearer(token));
    expect(farrier.json().sources.map((s: { id: string }) => s.id)).toContain('doc-stallbuch');
    const doc = await http(`${emu.baseUrl}/training/doc-stallbuch`, { headers: bearer(token) });
    expect(doc.json()).toMatchObject({ document_id: 'doc-stallbuch', processing_step: 'indexed', title: 'Stallbuch-Notizen Januar' });
    expect((await http(`${emu.authUrl}/documents/kb-winterdienst`)).status).toBe(200);

    // A succeeded job is pollable with its report; a queued one runs its course on the clock.
    const job = await http(`${emu.baseUrl}/research/job-streusalz`, { headers: bearer(token) });
    expect(job.json()).toMatchObject({
      job_id: 'job-streusalz',
      status: 'succeeded',
      citations: [{ id: 'kb-winterdienst', file_name: 'winterdienst.md' }],
    });
    expect(job.json().report).toContain('Splitt');
    expect((await http(`${emu.baseUrl}/research/job-heizung`, { headers: bearer(token) })).json().status).toBe('queued');
    (emu.core.clock as ManualClock).advance(10 * 60_000);
    const later = (await http(`${emu.baseUrl}/research/job-heizung`, { headers: bearer(token) })).json();
    expect(['succeeded', 'failed']).toContain(later.status);

    // The state remembers where it came from.
    expect(emu.core.state.scenario).toMatchObject({ file: EXAMPLE, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it('a shared document belongs to no person: another person finds it; a training document only its own person', async () => {
    const file = await writeScenario({
      ...minimal,
      grants: [
        ...minimal.grants,
        {
          id: 'grant_max',
          client_id: 'client_a',
          person_id: 'person_max',
          scopes: ['ask'],
          resource: 'mcp',
          refresh_token: `aa1.${'M'.repeat(22)}.${'s'.repeat(43)}`,
        },
      ],
      knowledge: [
        { file_name: 'geteilt.md', content: '# Geteilt\n\nDer Zirbelkiefernweg wird im März geteert.' },
        { file_name: 'privat.md', content: '# Privat\n\nDer Zirbelkiefernhain gehört Erika.', grant: 'grant_a' },
      ],
    });
    const emu = await startEmulator({ scenario: file });
    const max = (await refresh(emu.baseUrl, { client_id: 'client_a', refresh_token: `aa1.${'M'.repeat(22)}.${'s'.repeat(43)}` })).json()
      .access_token;
    const ask = async (question: string) => (await postJson(`${emu.baseUrl}/chat/ask`, { question }, bearer(max))).json();
    expect((await ask('Zirbelkiefernweg')).sources.map((s: { title: string }) => s.title)).toEqual(['Geteilt']);
    // One question about both would be half covered, and so answered with nothing (docs/retrieval.md): asked apart.
    expect((await ask('Zirbelkiefernhain')).sources).toEqual([]);
  });
});

describe('docs/emulator-control.md "Scenarios and snapshots": a scenario with mistakes is refused before anything is created', () => {
  it('each mistake is named by its JSON path, in a message that names the file', async () => {
    const file = await writeScenario({
      version: 1,
      clients: [{ client_id: 'client_a', client_name: 'Agent A', redirect_uris: ['http://127.0.0.1/cb'], clientSecret: 'x' }],
      grants: [{ id: 'grant_a', client_id: 'client_a', scopes: ['ask', 'documents.write'], resource: 'mcp', refresh_token: 'rt-123' }],
    });
    const error = await startEmulator({ scenario: file }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ScenarioError);
    const message = (error as Error).message;
    expect(message).toContain(file);
    expect(message).toContain('$.clients[0].clientSecret: unknown field (allowed: client_id, client_name, redirect_uris)');
    expect(message).toMatch(/\$\.grants\[0\]\.scopes\[1\]: must be one of "ask", .*"letters\.read" \(found "documents\.write"\)/);
    expect(message).toContain('$.grants[0].refresh_token: must have the form aa1.<handle>.<secret> (base64url parts) (found "rt-123")');
  });

  it.each([
    [
      'an unknown client',
      { ...minimal, grants: [{ ...minimal.grants[0], client_id: 'client_b' }] },
      '$.grants[0].client_id: no client "client_b" in $.clients',
    ],
    [
      'an unknown grant of a charge',
      { ...minimal, charges: [{ grant: 'grant_b', route: 'POST /chat/ask', amount: 0.1 }] },
      '$.charges[0].grant: no grant "grant_b" in $.grants',
    ],
    [
      'an unknown grant of a job',
      { ...minimal, research_jobs: [{ grant: 'grant_x', question: 'Was?', status: 'queued' }] },
      '$.research_jobs[0].grant: no grant "grant_x" in $.grants',
    ],
    [
      'an unknown person',
      { ...minimal, grants: [{ ...minimal.grants[0], person_id: 'person_nobody' }] },
      '$.grants[0].person_id: no person "person_nobody" in the fixtures (person_erika, person_max)',
    ],
    [
      'a succeeded job without report',
      { ...minimal, research_jobs: [{ grant: 'grant_a', question: 'Was?', status: 'succeeded' }] },
      '$.research_jobs[0].report: is required when status is "succeeded"',
    ],
    [
      'a grant id used twice',
      { ...minimal, grants: [minimal.grants[0], { ...minimal.grants[0], refresh_token: undefined }] },
      '$.grants[1].id: grant id "grant_a" is used twice',
    ],
    [
      'a refresh-token handle used twice',
      { ...minimal, grants: [minimal.grants[0], { ...minimal.grants[0], id: 'grant_b' }] },
      '$.grants[1].refresh_token: its handle "AAAAAAAAAAAAAAAAAAAAAA" is used by $.grants[0].refresh_token too',
    ],
    [
      'a shared document in ingest',
      { ...minimal, knowledge: [{ file_name: 'a.md', content: '# A', processing_step: 'parsing' }] },
      '$.knowledge[0].processing_step: a document without "grant" is shared knowledge',
    ],
    [
      'a file name with a path',
      { ...minimal, knowledge: [{ file_name: '../a.md', content: '# A' }] },
      '$.knowledge[0].file_name: must be a plain file name, not a path',
    ],
    [
      'a time without zone',
      { ...minimal, charges: [{ grant: 'grant_a', route: 'POST /chat/ask', amount: 0.1, at: '2026-01-01 10:00' }] },
      '$.charges[0].at: must be an ISO 8601 time with its zone',
    ],
    [
      'an unknown route',
      { ...minimal, charges: [{ grant: 'grant_a', route: 'POST /training', amount: 1 }] },
      '$.charges[0].route: must be one of "POST /chat/ask", "POST /research", "tool ask", "tool start_research"',
    ],
    ['another version', { ...minimal, version: 2 }, '$.version: must be 1 (found 2)'],
    ['a missing field', { version: 1, clients: [{ client_id: 'c', client_name: 'C' }] }, '$.clients[0].redirect_uris: is required'],
    ['not JSON', '{"version": 1,', 'is not valid JSON'],
  ])('%s', async (_what, content, expected) => {
    const file = await writeScenario(content);
    const error = await startEmulator({ scenario: file }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ScenarioError);
    expect((error as Error).message).toContain(`scenario ${file}`);
    expect((error as Error).message).toContain(expected);
  });

  it('serve --scenario with a bad file exits 2 with the path of the mistake; a missing file too', async () => {
    const file = await writeScenario({ ...minimal, charges: [{ grant: 'grant_b', route: 'POST /chat/ask', amount: 0.1 }] });
    const bad = await runCli(['serve', '--in-memory', '--port', '0', '--auth-port', '0', '--scenario', file]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain(`agent-access: scenario ${file} is not valid:`);
    expect(bad.stderr).toContain('$.charges[0].grant: no grant "grant_b" in $.grants');
    const missing = await runCli(['serve', '--in-memory', '--port', '0', '--auth-port', '0', '--scenario', join(file, '..', 'nope.json')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nope.json cannot be read (ENOENT)');
  });
});

describe('docs/emulator-control.md "Scenarios and snapshots": a scenario fills a new state only', () => {
  it('a state file created from the scenario continues as it is; the scenario is not loaded again', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const first = await startEmulator({ state, scenario: EXAMPLE });
    const res = await refresh(first.baseUrl, KALENDER);
    expect(res.status).toBe(200);
    await first.stop();
    const second = await startEmulator({ state, scenario: EXAMPLE });
    // The refresh rotated the scenario's token: it is spent, not set up again.
    expect((await refresh(second.baseUrl, { ...KALENDER, refresh_token: res.json().refresh_token })).status).toBe(200);
    expect(second.core.state.charges.count).toBe(3);
  });

  it('a state file created otherwise stops the server with a message naming it and the fix; the file is left untouched', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const plain = await startEmulator({ state });
    await plain.stop();
    const before = await readFile(state);
    const error = await startEmulator({ state, scenario: EXAMPLE }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateFileError);
    expect((error as Error).message).toContain(`state file ${state} was not created from scenario ${EXAMPLE}`);
    expect((error as Error).message).toContain('it was created without a scenario');
    expect((error as Error).message).toContain(moveAwayCommand(state));
    expect((error as Error).message).toContain('start without --scenario');
    expect(await readFile(state)).toEqual(before);

    // Another version of the scenario is another scenario.
    const changed = await writeScenario({ ...JSON.parse(await readFile(EXAMPLE, 'utf8')), description: 'geändert' });
    const fromExample = join(dir, 'example.json');
    await (await startEmulator({ state: fromExample, scenario: EXAMPLE })).stop();
    const bytes = await readFile(fromExample);
    const refused = await startEmulator({ state: fromExample, scenario: changed }).catch((e: unknown) => e);
    expect((refused as Error).message).toContain(`it was created from ${EXAMPLE}`);
    expect(await readFile(fromExample)).toEqual(bytes);

    // Through the CLI: exit 3, the state file named.
    const cli = await runCli(['serve', '--state', state, '--port', '0', '--auth-port', '0', '--scenario', EXAMPLE]);
    expect(cli.code).toBe(3);
    expect(cli.stderr).toContain(`state file ${resolve(state)} was not created from scenario`);
  });

  it('a state file written before scenarios and snapshots existed still loads', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    await (await startEmulator({ state })).stop();
    const old = JSON.parse(await readFile(state, 'utf8'));
    delete old.shared_knowledge;
    await writeFile(state, JSON.stringify(old));
    const emu = await startEmulator({ state });
    expect(emu.core.state.shared_knowledge).toEqual({});
  });
});

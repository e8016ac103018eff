import { describe, expect, it } from 'vitest';
import { Emulator, type EmulatorOptions } from '../../src/server/emulator.js';
import { startInProcess } from '../helpers/emulator.js';
import { authorizeAndApprove, Browser } from '../helpers/oauth.js';
import { get, loggedInOnClock, post } from '../helpers/rest.js';

const ledger = (emu: Emulator) => emu.core.persistence.readCharges();

const setup = (options: EmulatorOptions = {}, scope = 'ask research training.write') => loggedInOnClock(startInProcess, options, scope);

describe('spec 2.5, 3.1, 4.4 rule 3: research jobs', () => {
  it('POST /research answers 202 at once with job_id, status queued and poll; it is charged once, polling is free', async () => {
    const { emu, token } = await setup();
    const res = await post(emu, token, '/research', { question: 'Wie oft kommt der Hufschmied?' });
    expect(res.status).toBe(202);
    const body = res.json();
    expect(body).toEqual({ job_id: expect.stringMatching(/^job_/), status: 'queued', poll: `/research/${body.job_id}` });
    for (let i = 0; i < 3; i++) expect((await get(emu, token, body.poll)).status).toBe(200);
    const charges = await ledger(emu);
    expect(charges).toEqual([expect.objectContaining({ route: 'POST /research', amount: 2, unit: 'AKh' })]);
  });

  it('a job is observed queued, running, then succeeded with a German Markdown report citing the knowledge base only', async () => {
    const { emu, clock, token } = await setup();
    const { poll } = (await post(emu, token, '/research', { question: 'Wie läuft der Weidegang und wann kommt der Hufschmied?' })).json();
    expect((await get(emu, token, poll)).json().status).toBe('queued');
    clock.advance(1_000);
    expect((await get(emu, token, poll)).json().status).toBe('running');
    clock.advance(4_000);
    const done = (await get(emu, token, poll)).json();
    expect(done.status).toBe('succeeded');
    expect(done.report).toMatch(/^# Recherche: /);
    // Three sections, and [n] in the report is citations[n - 1].
    expect(done.report.split('\n').filter((l: string) => l.startsWith('## '))).toEqual([
      '## Zusammenfassung',
      '## Ergebnisse',
      '## Quellen',
    ]);
    expect(done.report).toMatch(/## Zusammenfassung\n\n.*mittwochs ab 8 Uhr \[1\]\./);
    const numbers = [...new Set([...done.report.matchAll(/\[(\d+)\]/g)].map((m: RegExpMatchArray) => Number(m[1])))];
    expect(numbers).toEqual(done.citations.map((_: unknown, i: number) => i + 1));
    done.citations.forEach((c: { title: string }, i: number) => expect(done.report).toContain(`### ${c.title} [${i + 1}]`));
    expect(done.citations.length).toBeGreaterThan(0);
    for (const c of done.citations) {
      expect(c).toEqual({
        id: expect.stringMatching(/^kb-/),
        title: expect.any(String),
        file_name: expect.stringMatching(/\.md$/),
        snippet: expect.any(String),
      });
    }
  });

  it('a question the knowledge base has nothing on fails with an error', async () => {
    const { emu, clock, token } = await setup();
    const { poll } = (await post(emu, token, '/research', { question: 'Quantenchromodynamik Gluonen' })).json();
    clock.advance(5_000);
    const job = (await get(emu, token, poll)).json();
    expect(job).toMatchObject({ status: 'failed', error: { code: 'no_sources', message: expect.any(String) } });
    expect(job.report).toBeUndefined();
  });

  it("another client's job id → 404; an unknown one too", async () => {
    const { emu, token } = await setup();
    const { poll } = (await post(emu, token, '/research', { question: 'Hufschmied' })).json();
    const other = await authorizeAndApprove(emu, { scope: 'research' });
    expect((await get(emu, other.tokens!.access_token, poll)).status).toBe(404);
    expect((await get(emu, token, '/research/job_unknown')).status).toBe(404);
  });

  it('rule 5: the same key and body give the same job_id and one charge', async () => {
    const { emu, token } = await setup();
    const a = await post(emu, token, '/research', { question: 'Hufschmied' }, { 'idempotency-key': 'r-1' });
    const b = await post(emu, token, '/research', { question: 'Hufschmied' }, { 'idempotency-key': 'r-1' });
    expect(b.status).toBe(202);
    expect(b.text).toBe(a.text);
    expect(Object.keys(emu.core.state.research_jobs)).toHaveLength(1);
    expect(await ledger(emu)).toHaveLength(1);
  });

  it('scope research is required: an ask token → 403', async () => {
    const { emu, token } = await setup({}, 'ask');
    expect((await post(emu, token, '/research', { question: 'x' })).status).toBe(403);
  });
});

describe('spec 2.6, 4.4 rule 4: training documents', () => {
  const doc = { file_name: 'quokka.md', content: '# Quokkabrücke\n\nDie Quokkabrücke über den Mühlbach wird am 2026-05-02 gesperrt.\n' };

  it('POST /training answers 202; processing_step moves received → parsing → chunking → indexing → indexed on the clock', async () => {
    const { emu, clock, token } = await setup();
    const res = await post(emu, token, '/training', doc);
    expect(res.status).toBe(202);
    const body = res.json();
    expect(body).toEqual({
      document_id: expect.stringMatching(/^doc_/),
      job_id: body.document_id,
      processing_step: 'received',
      status: `/training/${body.document_id}`,
    });
    const steps: string[] = [];
    for (let i = 0; i < 5; i++) {
      steps.push((await get(emu, token, body.status)).json().processing_step);
      clock.advance(500);
    }
    expect(steps).toEqual(['received', 'parsing', 'chunking', 'indexing', 'indexed']);
    expect(await ledger(emu)).toHaveLength(0);
  });

  it('the document is invisible to ask and research before indexed, and found after', async () => {
    const { emu, clock, token } = await setup();
    const { document_id } = (await post(emu, token, '/training', doc)).json();
    const mentions = (body: { sources?: Array<{ id: string }>; citations?: Array<{ id: string }> }) =>
      [...(body.sources ?? []), ...(body.citations ?? [])].some((s) => s.id === document_id);
    const askBefore = (await post(emu, token, '/chat/ask', { question: 'Quokkabrücke Mühlbach' })).json();
    expect(mentions(askBefore)).toBe(false);
    const { poll } = (await post(emu, token, '/research', { question: 'Quokkabrücke Mühlbach' })).json();
    clock.advance(1_500);
    expect((await get(emu, token, `/training/${document_id}`)).json().processing_step).toBe('indexing');
    expect(mentions((await post(emu, token, '/chat/ask', { question: 'Quokkabrücke Mühlbach' })).json())).toBe(false);
    clock.advance(500);
    await emu.resources.settle();
    // The question asked before: its ranking was remembered, and the indexed document must replace it.
    expect(mentions((await post(emu, token, '/chat/ask', { question: 'Quokkabrücke Mühlbach' })).json())).toBe(true);
    const after = (await post(emu, token, '/chat/ask', { question: 'Wann wird die Quokkabrücke gesperrt?' })).json();
    expect(after.sources[0]).toMatchObject({ kind: 'knowledge', id: document_id, title: 'Quokkabrücke' });
    expect(after.answer).toContain('2026-05-02');
    clock.advance(5_000);
    expect(mentions((await get(emu, token, poll)).json())).toBe(true);
  });

  it('GET /training/{id}/url links to {auth_url}, where the person opens the document, escaped', async () => {
    const { emu, token } = await setup();
    const { document_id } = (
      await post(emu, token, '/training', { file_name: 'x.md', content: '# Titel\n\n<script>alert(1)</script>' })
    ).json();
    const { url } = (await get(emu, token, `/training/${document_id}/url`)).json();
    expect(url).toBe(`${emu.authUrl}/documents/${document_id}`);
    const page = await new Browser().get(url);
    expect(page.status).toBe(200);
    expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page.text).not.toContain('<script>alert(1)');
  });

  it.each([
    ['a path', '../etc/passwd.md', 400],
    ['a sub-directory', 'a/b.md', 400],
    ['no text extension', 'bild.png', 400],
    ['a control character', 'a\u0007.md', 400],
    ['an empty name', '', 400],
    ['a 256-character name', `${'a'.repeat(253)}.md`, 400],
  ])('a file name with %s (%j) → %i, nothing stored', async (_why, file_name, status) => {
    const { emu, token } = await setup();
    const res = await post(emu, token, '/training', { file_name, content: 'Text' });
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(Object.keys(emu.core.state.training_documents)).toHaveLength(0);
  });

  it('empty content → 400; over 256 KiB → 413; nothing stored', async () => {
    const { emu, token } = await setup();
    expect((await post(emu, token, '/training', { file_name: 'a.md', content: '   ' })).status).toBe(400);
    expect((await post(emu, token, '/training', { file_name: 'a.md', content: 'x'.repeat(256 * 1024 + 1) })).status).toBe(413);
    expect(Object.keys(emu.core.state.training_documents)).toHaveLength(0);
  });

  it('content that is not text fails at parsing with an error', async () => {
    const { emu, clock, token } = await setup();
    const { status } = (await post(emu, token, '/training', { file_name: 'bin.txt', content: 'PK\u0003\u0004 binary' })).json();
    clock.advance(600);
    expect((await get(emu, token, status)).json()).toMatchObject({ processing_step: 'failed', error: { code: 'unreadable_content' } });
  });

  it("scope training.write is required, and another client's document is 404", async () => {
    const { emu, token } = await setup();
    const { status } = (await post(emu, token, '/training', doc)).json();
    const askOnly = await authorizeAndApprove(emu, { scope: 'ask' });
    expect((await post(emu, askOnly.tokens!.access_token, '/training', doc)).status).toBe(403);
    const other = await authorizeAndApprove(emu, { scope: 'training.write' });
    expect((await get(emu, other.tokens!.access_token, status)).status).toBe(404);
  });
});

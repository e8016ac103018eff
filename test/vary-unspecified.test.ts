/**
 * Issue 7.6: `serve --vary-unspecified` over real HTTP. Each variant of each dimension is produced within a short
 * run, the spec's promises hold in every one, the same seed repeats a run, idempotent replays stay byte for byte,
 * a job keeps its variant across polls and restarts, the MCP tools vary as their REST twins, and the mode is off
 * by default.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock, SECOND } from '../src/core/state/clock.js';
import { CATALOGUE, type VariedKind } from '../src/core/emulation/variation.js';
import { PROCESSING_STEPS } from '../src/core/resources/variants.js';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../src/index.js';
import { runCli, startServe, type ServeProcess } from './helpers/cli.js';
import { clientEnv, decideInBrowser, memoryContext, runInProcess } from './helpers/client.js';
import { scratchDir, startEmulator as startInProcess } from './helpers/emulator.js';
import { http, postJson, type HttpResult } from './helpers/oauth.js';

const running: RunningEmulator[] = [];
const servers: ServeProcess[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
  for (const s of servers.splice(0)) {
    await s.stop();
  }
});

async function start(options: StartEmulatorOptions = {}) {
  const emu = await startEmulator({ clock: 'manual', ...options });
  running.push(emu);
  const { access_token, client_id } = await emu.issueTokens({ scopes: ['ask', 'research', 'training.write'] });
  const headers = { authorization: `Bearer ${access_token}` };
  return {
    emu,
    client_id,
    get: (path: string) => http(`${emu.baseUrl}${path}`, { headers }),
    post: (path: string, body: unknown, extra: Record<string, string> = {}) =>
      postJson(`${emu.baseUrl}${path}`, body, { ...headers, ...extra }),
    mcp: (name: string, args: Record<string, unknown>) =>
      postJson(
        `${emu.baseUrl}/mcp`,
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
        { ...headers, accept: 'application/json, text/event-stream' },
      ),
  };
}

/** The Agent-Access-Variant header as a map: seed, ordinal and `<kind>.<dimension>` → variant. */
function variantOf(res: HttpResult): Record<string, string> {
  const header = res.headers['agent-access-variant'];
  if (typeof header !== 'string') throw new Error(`no Agent-Access-Variant header on ${res.status} ${res.text.slice(0, 200)}`);
  return Object.fromEntries(header.split(', ').map((member) => member.split('=') as [string, string]));
}

/** Every variant of every dimension of `kind` appears among `seen`. */
function expectEveryVariant(kind: VariedKind, seen: Array<Record<string, string>>, dimensions = Object.keys(CATALOGUE[kind])) {
  for (const dimension of dimensions) {
    const variants = (CATALOGUE[kind] as Record<string, readonly string[]>)[dimension]!;
    expect(new Set(seen.map((v) => v[`${kind}.${dimension}`])), `${kind}.${dimension}`).toEqual(new Set(variants));
  }
}

const ID_FORMS: Record<string, RegExp> = {
  prefixed: /^(msg|job|doc)_[A-Za-z0-9_-]+$/,
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  numeric: /^[1-9]\d{17}$/,
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const unknownKeys = (body: Record<string, unknown>, known: string[]) => Object.keys(body).filter((k) => !known.includes(k));

/** Checks one element of sources or citations against the shape its variant names. */
function expectElementShape(
  element: unknown,
  variant: string,
  fields: { objects: string[]; renamed: string[]; nested: string[] },
  unknown: boolean,
) {
  if (variant === 'strings') return expect(element).toEqual(expect.any(String));
  expect(isObject(element)).toBe(true);
  const keys = Object.keys(element as object);
  const expected = fields[variant as keyof typeof fields];
  expect(keys.filter((k) => !k.startsWith('x_'))).toEqual(expected);
  expect(keys.filter((k) => k.startsWith('x_'))).toHaveLength(unknown ? 1 : 0);
}

const SOURCE_FIELDS = {
  objects: ['kind', 'id', 'title', 'snippet'],
  renamed: ['type', 'ref', 'name', 'excerpt'],
  nested: ['record', 'quote'],
};
const CITATION_FIELDS = {
  objects: ['id', 'title', 'file_name', 'snippet'],
  renamed: ['source_id', 'name', 'file', 'excerpt'],
  nested: ['ref', 'document', 'quote'],
};

describe('docs/emulator-control.md "Varying what the spec leaves open": serve --vary-unspecified, end to end over HTTP', () => {
  it('ask — each sources shape, extra fields and message_id form within five asks; answer, sources and message_id keep their types', async () => {
    const { post } = await start({ varyUnspecified: { seed: 11 } });
    const seen: Array<Record<string, string>> = [];
    for (let i = 0; i < 5; i++) {
      const res = await post('/chat/ask', { question: 'Wann kommt der Hufschmied?' });
      expect(res.status).toBe(200);
      const variant = variantOf(res);
      expect(variant).toMatchObject({ seed: '11', ordinal: String(i) });
      seen.push(variant);
      const body = res.json();
      // Spec 2.4.
      expect(body).toMatchObject({
        answer: expect.stringContaining('Hufschmied'),
        sources: expect.any(Array),
        message_id: expect.any(String),
      });
      expect(body.message_id).toMatch(ID_FORMS[variant['ask.ids']!]!);
      const unknown = variant['ask.extra_fields'] === 'unknown';
      expect(unknownKeys(body, ['answer', 'sources', 'message_id'])).toHaveLength(unknown ? 2 : 0);
      if (variant['ask.sources'] === 'empty') expect(body.sources).toEqual([]);
      else {
        expect(body.sources.length).toBeGreaterThan(0);
        for (const source of body.sources) expectElementShape(source, variant['ask.sources']!, SOURCE_FIELDS, unknown);
      }
    }
    expectEveryVariant('ask', seen);
  });

  it('research — status values vary among the unlisted ones while queued→succeeded stays; report, citations and error take each shape', async () => {
    const { emu, post, get } = await start({ varyUnspecified: { seed: 23 } });
    // Five jobs the knowledge base has nothing on (they fail), then four it can answer: consecutive ordinals show each variant.
    const questions = [
      ...Array(5).fill('Quantenchromodynamik Gluonen'),
      ...Array(4).fill('Wie läuft der Weidegang und wann kommt der Hufschmied?'),
    ];
    const jobs: Array<{ poll: string; job_id: string; variant: Record<string, string>; fails: boolean }> = [];
    for (const [i, question] of questions.entries()) {
      const res = await post('/research', { question });
      // Spec 4.4: 202 with job_id, status queued and poll /research/<job_id>, whatever else comes along.
      expect(res.status).toBe(202);
      const body = res.json();
      expect(body).toMatchObject({ job_id: expect.any(String), status: 'queued', poll: `/research/${body.job_id}` });
      const variant = variantOf(res);
      expect(body.job_id).toMatch(ID_FORMS[variant['research.ids']!]!);
      expect(unknownKeys(body, ['job_id', 'status', 'poll'])).toHaveLength(variant['research.extra_fields'] === 'unknown' ? 2 : 0);
      jobs.push({ poll: body.poll, job_id: body.job_id, variant, fails: i < 5 });
    }
    expect(new Set(jobs.map((j) => j.job_id)).size).toBe(jobs.length);

    const poll = async (job: (typeof jobs)[number]) => {
      const res = await get(job.poll);
      expect(res.status).toBe(200);
      // The job keeps the variant it was created with, on every poll.
      expect(res.headers['agent-access-variant']).toBe(
        Object.entries(job.variant)
          .map(([k, v]) => `${k}=${v}`)
          .join(', '),
      );
      const body = res.json();
      expect(body.job_id).toBe(job.job_id);
      const extras = job.variant['research.extra_fields'];
      if (extras === 'spec_only') expect(body).not.toHaveProperty('poll');
      else expect(body).toMatchObject({ poll: job.poll, question: expect.any(String), created_at: expect.any(String) });
      expect(Object.keys(body).filter((k) => /^(x_|[a-z]+_)[0-9a-f]{6}$/.test(k))).toHaveLength(extras === 'unknown' ? 2 : 0);
      return body;
    };
    const absent = (job: (typeof jobs)[number], body: Record<string, unknown>, fields: string[]) => {
      for (const field of fields) {
        if (job.variant['research.absent_fields'] === 'null') expect(body[field], field).toEqual(field === 'citations' ? [] : null);
        else expect(body, field).not.toHaveProperty(field);
      }
    };

    for (const job of jobs) {
      const body = await poll(job);
      expect(body.status).toBe('queued');
      absent(job, body, ['report', 'citations', 'error']);
    }
    await emu.clock.advance('1s');
    for (const job of jobs) {
      const body = await poll(job);
      // Spec 3.1: unlisted in-progress values, never succeeded; `queued` shows none at all.
      expect(body.status).toBe(job.variant['research.status.running']);
      absent(job, body, ['report', 'citations', 'error']);
    }
    await emu.clock.advance('4s');
    for (const job of jobs) {
      const body = await poll(job);
      const unknown = job.variant['research.extra_fields'] === 'unknown';
      if (job.fails) {
        // Spec 2.5, 3.1, 7: a failed job carries error; its status is not named, and is neither queued nor succeeded.
        expect(body.status).toBe(job.variant['research.status.failed']);
        expect(['queued', 'succeeded']).not.toContain(body.status);
        const error = body.error;
        expect(error ?? null).not.toBeNull();
        const shape = { code_message: ['code', 'message'], problem: ['type', 'title', 'detail'], renamed: ['reason', 'details'] }[
          job.variant['research.error'] as string
        ];
        if (shape) expect(Object.keys(error)).toEqual(shape);
        else expect(error).toEqual(expect.stringContaining('Wissensdatenbank'));
        absent(job, body, ['report', 'citations']);
        continue;
      }
      // Spec 2.5: succeeded, with report and citations (an array).
      expect(body.status).toBe('succeeded');
      absent(job, body, ['error']);
      expect(Array.isArray(body.citations) && body.citations.length > 0).toBe(true);
      for (const citation of body.citations) expectElementShape(citation, job.variant['research.citations']!, CITATION_FIELDS, unknown);
      const report = body.report;
      switch (job.variant['research.report']) {
        case 'markdown':
          expect(report).toMatch(/^# Recherche: /);
          break;
        case 'markdown_object':
          expect(report).toEqual({ format: 'markdown', text: expect.stringMatching(/^# Recherche: /) });
          break;
        case 'sections':
          expect(report).toEqual(expect.arrayContaining([expect.objectContaining({ heading: 'Quellen', level: 2 })]));
          break;
        case 'structured':
          expect(report).toMatchObject({
            title: expect.stringMatching(/^Recherche: /),
            sections: expect.arrayContaining([expect.objectContaining({ heading: 'Zusammenfassung' })]),
          });
          break;
        default:
          throw new Error(`unexpected report variant ${job.variant['research.report']}`);
      }
    }
    const variants = jobs.map((j) => j.variant);
    expectEveryVariant('research', variants, ['status.running', 'absent_fields', 'extra_fields', 'ids']);
    expectEveryVariant(
      'research',
      jobs.filter((j) => j.fails).map((j) => j.variant),
      ['status.failed', 'error'],
    );
    expectEveryVariant(
      'research',
      jobs.filter((j) => !j.fails).map((j) => j.variant),
      ['report', 'citations'],
    );
  });

  it('training — each processing_step vocabulary, 202 field names, url response and extra fields; processing_step is always there', async () => {
    const { emu, post, get } = await start({ varyUnspecified: { seed: 5 } });
    // Four readable documents (indexed), then four that are not text (they fail at parsing).
    const docs: Array<{ id: string; variant: Record<string, string>; fails: boolean; steps: string[] }> = [];
    for (let i = 0; i < 8; i++) {
      const fails = i >= 4;
      const res = await post('/training', {
        file_name: `notiz-${i}.md`,
        content: fails ? `# Kaputt\u0001\u0002 ${i}` : `# Notiz ${i}\n\nDie Quokkabrücke ${i} ist gesperrt.\n`,
      });
      expect(res.status).toBe(202);
      const variant = variantOf(res);
      const body = res.json();
      // Spec 4.4: the 202 carries a job id (the emulator's job id is the document id), under a name that varies.
      const names = {
        emulator: ['document_id', 'job_id', 'processing_step', 'status'],
        job_id: ['job_id'],
        id: ['id', 'status'],
        document_id: ['document_id', 'processing_step'],
      }[variant['training.accepted']!]!;
      expect(Object.keys(body).filter((k) => !/_[0-9a-f]{6}$/.test(k))).toEqual(names);
      const id = [body.document_id, body.job_id, body.id].find((v): v is string => typeof v === 'string');
      expect(id).toMatch(ID_FORMS[variant['training.ids']!]!);
      docs.push({ id: id!, variant, fails, steps: [] });
    }
    for (let t = 0; t < 5; t++) {
      for (const doc of docs) {
        const res = await get(`/training/${encodeURIComponent(doc.id)}`);
        expect(res.status).toBe(200);
        expect(variantOf(res)).toEqual(doc.variant);
        const body = res.json();
        // Spec 2.6: holds processing_step.
        expect(body.processing_step).toEqual(expect.any(String));
        if (doc.variant['training.extra_fields'] === 'spec_only') expect(unknownKeys(body, ['processing_step', 'error'])).toEqual([]);
        else expect(body).toMatchObject({ document_id: doc.id, file_name: expect.any(String) });
        if (doc.steps.at(-1) !== body.processing_step) doc.steps.push(body.processing_step);
      }
      await emu.clock.advance('500ms');
    }
    for (const doc of docs) {
      const vocabulary = PROCESSING_STEPS[doc.variant['training.processing_step'] as keyof typeof PROCESSING_STEPS];
      if (doc.fails) expect(doc.steps).toEqual([vocabulary.received, vocabulary.failed]);
      else
        expect(doc.steps).toEqual([
          ...new Set([vocabulary.received, vocabulary.parsing, vocabulary.chunking, vocabulary.indexing, vocabulary.indexed]),
        ]);
      const link = await get(`/training/${encodeURIComponent(doc.id)}/url`);
      expect(link.status).toBe(200);
      const body = link.json();
      const url = { emulator: body.url, url: body.url, href: body.href }[doc.variant['training.url']!];
      expect(url).toBe(`${emu.authUrl}/documents/${encodeURIComponent(doc.id)}`);
    }
    expectEveryVariant(
      'training',
      docs.map((d) => d.variant),
    );
  });

  it('the same seed gives the same sequence of variants and shapes; another seed another one', async () => {
    const runOnce = async (seed: number) => {
      const { post, emu } = await start({ varyUnspecified: { seed } });
      const out: string[] = [];
      const record = (res: HttpResult, ids: string[]) =>
        out.push(`${String(res.headers['agent-access-variant'])}\n${ids.reduce((text, id) => text.split(id).join('<id>'), res.text)}`);
      for (const question of ['Wann kommt der Hufschmied?', 'Wie hoch ist die Kaution?', 'Wann kommt der Hufschmied?']) {
        const res = await post('/chat/ask', { question });
        record(res, [res.json().message_id]);
      }
      for (const question of ['Hufschmied', 'Weidegang']) {
        const res = await post('/research', { question });
        record(res, [res.json().job_id]);
      }
      const res = await post('/training', { file_name: 'a.md', content: '# A\n\nText' });
      const body = res.json();
      record(res, [body.document_id ?? body.job_id ?? body.id]);
      await emu.stop();
      return out;
    };
    const first = await runOnce(1234);
    expect(await runOnce(1234)).toEqual(first);
    expect(await runOnce(4321)).not.toEqual(first);
  });

  it('idempotent replays stay byte for byte in variation mode, with the same variant header, and take no new variant', async () => {
    const { post } = await start({ varyUnspecified: { seed: 3 } });
    for (const [path, body] of [
      ['/chat/ask', { question: 'Wann kommt der Hufschmied?' }],
      ['/research', { question: 'Hufschmied' }],
      ['/training', { file_name: 'a.md', content: '# A\n\nText' }],
    ] as const) {
      const key = { 'idempotency-key': `k-${path}` };
      const first = await post(path, body, key);
      const again = await post(path, body, key);
      expect(first.status).toBeLessThan(300);
      expect(again.status).toBe(first.status);
      expect(again.text).toBe(first.text);
      expect(again.headers['agent-access-variant']).toBe(first.headers['agent-access-variant']);
      expect(variantOf(first).ordinal).toBe('0');
      // The replay did not run the operation, so the next fresh answer of the kind is the second one.
      expect(variantOf(await post(path, body)).ordinal).toBe('1');
    }
  });

  it('the MCP tools vary as their REST twins and name the variant in _meta', async () => {
    const { emu, mcp, get } = await start({ varyUnspecified: { seed: 9 } });
    const call = async (name: string, args: Record<string, unknown>) => {
      const res = await mcp(name, args);
      expect(res.status).toBe(200);
      const result = res.json().result;
      expect(result.isError).toBeUndefined();
      return { content: result.structuredContent, variant: result._meta?.['agent-access/variant'] as string };
    };
    const asked = await call('ask', { question: 'Wann kommt der Hufschmied?' });
    expect(asked.variant).toMatch(/^seed=9, ordinal=0, ask\.sources=/);
    expect(asked.content).toMatchObject({
      outcome: 'answered',
      answer: expect.any(String),
      sources: expect.any(Array),
      message_id: expect.any(String),
    });
    const started = await call('start_research', { question: 'Hufschmied' });
    expect(started.content).toMatchObject({ status: 'queued', poll: `/research/${started.content.job_id}` });
    await emu.clock.advance('5s');
    const viaTool = await call('get_research', { job_id: started.content.job_id });
    const viaRest = await get(started.content.poll);
    expect(viaTool.content).toEqual(viaRest.json());
    expect(viaTool.variant).toBe(viaRest.headers['agent-access-variant']);
    expect(viaTool.variant).toBe(started.variant);
  });

  it('a job keeps its variant across a restart, also when the emulator comes back without the mode', async () => {
    const state = join(await scratchDir(), 'state.json');
    const first = await start({ state, varyUnspecified: { seed: 77 } });
    // Ordinal 1, so that what it got is not simply the seed's first choice.
    await first.post('/research', { question: 'Hufschmied' });
    const created = await first.post('/research', { question: 'Hufschmied' });
    const { poll } = created.json();
    // Finished before the restart, so that the new emulator's clock cannot move it on.
    await first.emu.clock.advance('5s');
    const before = await first.get(poll);
    expect(before.json().status).toBe('succeeded');
    await first.emu.stop();
    running.splice(running.indexOf(first.emu), 1);
    const second = await startEmulator({ state, clock: 'manual' });
    running.push(second);
    const { access_token } = await second.issueTokens({ scopes: ['research'], clientId: first.client_id });
    const after = await http(`${second.baseUrl}${poll}`, { headers: { authorization: `Bearer ${access_token}` } });
    expect(after.headers['agent-access-variant']).toBe(created.headers['agent-access-variant']);
    expect(after.text).toBe(before.text);
    expect(variantOf(after)).toMatchObject({ seed: '77', ordinal: '1' });
  });

  it('off by default — no variant header, the emulator’s own shapes, varyUnspecified false', async () => {
    const { emu, post, get } = await start();
    expect(emu.varyUnspecified).toBe(false);
    const asked = await post('/chat/ask', { question: 'Wann kommt der Hufschmied?' });
    expect(asked.headers['agent-access-variant']).toBeUndefined();
    expect(asked.json()).toEqual({ answer: expect.any(String), sources: expect.any(Array), message_id: expect.stringMatching(/^msg_/) });
    for (const source of asked.json().sources) expect(Object.keys(source)).toEqual(['kind', 'id', 'title', 'snippet']);
    const { poll } = (await post('/research', { question: 'Hufschmied' })).json();
    await emu.clock.advance('1s');
    const runningJob = await get(poll);
    expect(runningJob.headers['agent-access-variant']).toBeUndefined();
    expect(runningJob.json().status).toBe('running');
    await emu.clock.advance('4s');
    expect(typeof (await get(poll)).json().report).toBe('string');
    const trained = await post('/training', { file_name: 'a.md', content: '# A\n\nText' });
    expect(trained.headers['agent-access-variant']).toBeUndefined();
    expect(Object.keys(trained.json())).toEqual(['document_id', 'job_id', 'processing_step', 'status']);
  });

  it('a child emulator and `serve` take the flag: a given seed, a random one announced, a bad one refused (exit 2)', async () => {
    const child = await startEmulator({ mode: 'child', varyUnspecified: { seed: 99 } });
    running.push(child);
    expect(child.varyUnspecified).toEqual({ seed: 99 });
    const { access_token } = await child.issueTokens({ scopes: ['ask'] });
    const asked = await postJson(`${child.baseUrl}/chat/ask`, { question: 'Hufschmied' }, { authorization: `Bearer ${access_token}` });
    expect(variantOf(asked)).toMatchObject({ seed: '99', ordinal: '0' });

    const served = await startServe(['--in-memory', '--vary-unspecified']);
    servers.push(served);
    const seed: unknown = (served.ready as { vary_unspecified?: { seed: unknown } }).vary_unspecified?.seed;
    expect(Number.isInteger(seed)).toBe(true);
    const bad = await runCli(['serve', '--in-memory', '--port', '0', '--auth-port', '0', '--vary-unspecified=abc']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('seed');
  });

  it('the emulator’s own client (ask, research --wait, train --wait) gets through every variant', async () => {
    const clock = new ManualClock();
    // Polls count against the rate limit; this test is about shapes, not limits.
    const emulator = await startInProcess({ clock, rateLimit: '10000/min', varyUnspecified: { seed: 8 } });
    // Each poll moves the clock on, whether or not the status it showed changed (the `queued` variant never changes until done).
    emulator.core.events.subscribe((e) => {
      if (e.name === 'request.served' && e.data.method === 'GET' && /^\/(research|training)\//.test(e.data.path)) clock.advance(SECOND);
    });
    const ctx = memoryContext({
      clock,
      env: clientEnv(await scratchDir()),
      openUrl: async (url) => void (await decideInBrowser(url, 'approve')),
    });
    const cli = (...args: string[]) => runInProcess([...args, '--base-url', emulator.baseUrl], ctx);
    expect((await cli('login', '--scope', 'ask research training.write')).code).toBe(0);
    for (let i = 0; i < 5; i++) {
      const res = await cli('ask', 'Wann kommt der Hufschmied?');
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toContain('Hufschmied');
    }
    // Five that succeed (every in-progress status, report and citation shape), then four that fail (every failed status and error shape).
    for (let i = 0; i < 5; i++) {
      const res = await cli('research', 'Wie läuft der Weidegang?', '--wait', '--interval', '0.01');
      expect(res.code, res.stderr).toBe(0);
      expect(res.stderr).toMatch(/succeeded after/);
      expect(res.stdout).toContain('Weidegang');
      expect(res.stdout).toMatch(/\nCitations:\n {2}\[1\] /);
    }
    for (let i = 0; i < 4; i++) {
      const res = await cli('research', 'Quantenchromodynamik Gluonen', '--wait', '--interval', '0.01');
      expect(res.code, res.stderr).toBe(1);
      expect(res.stderr).toMatch(/research job \S+ failed: .*Wissensdatenbank/);
    }
    const dir = await scratchDir();
    for (let i = 0; i < 8; i++) {
      const file = join(dir, `notiz-${i}.md`);
      const readable = i < 4;
      await writeFile(file, readable ? `# Notiz ${i}\n\nDie Quokkabrücke ${i} ist gesperrt.\n` : `# Kaputt\u0001 ${i}\n`);
      const res = await cli('train', file, '--wait', '--interval', '0.01');
      expect(res.code, res.stderr).toBe(readable ? 0 : 1);
      // The link is found whatever the url response names its field (url, href, ...).
      expect(res.stderr).toMatch(
        readable
          ? /^document \S+ is (indexed|ready|done|completed); open it at http:\/\/127\.0\.0\.1:\d+\/documents\//m
          : /failed at processing: unreadable_content/,
      );
    }
    // What the client got through: every variant of every research and training dimension (asks: seen above).
    const selections = (records: Array<{ variation?: { kind: string; choices: object } }>) =>
      records.map((r) =>
        Object.fromEntries(Object.entries(r.variation!.choices).map(([d, v]) => [`${r.variation!.kind}.${d}`, v as string])),
      );
    const jobs = Object.values(emulator.core.state.research_jobs);
    expectEveryVariant('research', selections(jobs.filter((j) => j.status === 'succeeded')), ['status.running', 'report', 'citations']);
    expectEveryVariant('research', selections(jobs.filter((j) => j.status === 'failed')), ['status.failed', 'error']);
    expectEveryVariant(
      'training',
      selections(Object.values(emulator.core.state.training_documents).filter((d) => d.processing_step === 'indexed')),
    );
  });
});

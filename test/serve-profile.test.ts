/**
 * Issue 43.3 and 43.4: `serve --profile FILE` and `startEmulator({ profile })` answer what the spec leaves open as a
 * real server was seen to answer, over real HTTP; a bad profile stops serve before anything listens; and the round
 * trip: a profile recorded from an emulator under --vary-unspecified names its variants, and an emulator started with
 * that profile records the same profile again. The classifier's own rules: test/unit/variant-profile.test.ts.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { CATALOGUE } from '../src/core/emulation/variation.js';
import { recordProfile, type ObservedResponse, type VariantProfile } from '../src/core/emulation/variant-profile.js';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../src/index.js';
import { BIN, runCli } from './helpers/cli.js';
import { scratchDir } from './helpers/emulator.js';
import { http, postJson, type HttpResult } from './helpers/oauth.js';

const running: RunningEmulator[] = [];
afterEach(async () => {
  while (running.length) await running.pop()!.stop();
});

/** A profile as `conformance server --record-profile` writes it: three dimensions pinned, one it cannot mimic. */
const PROFILE = {
  version: 1,
  server: 'https://api.example.test',
  recorded_at: '2026-11-28T04:00:00.000Z',
  dimensions: {
    ask: { sources: { variant: 'strings' } },
    research: { 'status.running': { variant: 'in_progress' } },
    training: {
      accepted: { variant: 'job_id' },
      url: { variant: null, example: { link: 'https://files.example.test/1' }, note: 'the emulator cannot mimic this shape yet' },
    },
  },
  observations: { 'RateLimit-Limit': '60' },
};

async function profileFile(profile: unknown = PROFILE, name = 'service.json'): Promise<string> {
  const file = join(await scratchDir(), name);
  await writeFile(file, typeof profile === 'string' ? profile : JSON.stringify(profile, null, 2));
  return file;
}

async function start(options: StartEmulatorOptions) {
  const emu = await startEmulator({ clock: 'manual', ...options });
  running.push(emu);
  const { access_token } = await emu.issueTokens({ scopes: ['ask', 'research', 'training.write'] });
  const headers = { authorization: `Bearer ${access_token}` };
  return {
    emu,
    headers,
    get: (path: string) => http(`${emu.baseUrl}${path}`, { headers }),
    post: (path: string, body: unknown) => postJson(`${emu.baseUrl}${path}`, body, headers),
  };
}

/** The Agent-Access-Variant header as a map: seed, profile, ordinal and `<kind>.<dimension>` → variant. */
function variantOf(res: HttpResult): Record<string, string> {
  const header = res.headers['agent-access-variant'];
  if (typeof header !== 'string') throw new Error(`no Agent-Access-Variant header on ${res.status} ${res.text.slice(0, 200)}`);
  return Object.fromEntries(header.split(', ').map((member) => member.split('=') as [string, string]));
}

/**
 * What a `conformance server` run does with ask, research and training, recorded as it sees them: one ask, one research
 * job polled from queued to done, one document polled until indexed and its url.
 */
async function exercise(s: Awaited<ReturnType<typeof start>>) {
  const responses: ObservedResponse[] = [];
  const variants: Record<string, Record<string, string>> = {};
  const seen = (step: ObservedResponse['step'], res: HttpResult) => {
    responses.push({ step, status: res.status, body: res.json() });
    variants[step.split('.')[0]!] = variantOf(res);
    return res.json();
  };
  seen('ask', await s.post('/chat/ask', { question: 'Wann kommt der Hufschmied?' }));
  const job = seen('research.created', await s.post('/research', { question: 'Hufschmied' }));
  for (const by of ['0s', '1s', '4s']) {
    await s.emu.clock.advance(by);
    seen('research.poll', await s.get(`/research/${encodeURIComponent(job.job_id)}`));
  }
  const accepted = seen(
    'training.accepted',
    await s.post('/training', { file_name: 'notiz.md', content: '# Notiz\n\nDie Quokkabrücke ist gesperrt.\n' }),
  );
  const id = [accepted.document_id, accepted.job_id, accepted.id].find((v): v is string => typeof v === 'string')!;
  for (const by of ['0s', '10s']) {
    await s.emu.clock.advance(by);
    seen('training.status', await s.get(`/training/${encodeURIComponent(id)}`));
  }
  seen('training.url', await s.get(`/training/${encodeURIComponent(id)}/url`));
  return { responses, variants };
}

describe('43.3 serve --profile: the emulator answers a profile', () => {
  it("43.3 serve --profile pins ask.sources=strings, research.status.running=in_progress, training.accepted=job_id; the rest is the emulator's own", async () => {
    const file = await profileFile();
    const s = await start({ mode: 'child', profile: file });
    // The ready line names the profile, what it pins and what it cannot.
    expect(s.emu.profile).toEqual({
      name: 'service.json',
      file,
      server: 'https://api.example.test',
      pinned: ['ask.sources', 'research.status.running', 'training.accepted'],
      not_pinned: ['training.url'],
    });
    expect(s.emu.varyUnspecified).toBe(false);

    const ask = await s.post('/chat/ask', { question: 'Wann kommt der Hufschmied?' });
    expect(ask.status).toBe(200);
    const answer = ask.json();
    expect(answer.sources.length).toBeGreaterThan(0);
    for (const source of answer.sources) expect(source).toEqual(expect.any(String));
    // Unpinned: the emulator's own message_id and no fields beyond the spec's.
    expect(answer.message_id).toMatch(/^msg_[A-Za-z0-9_-]+$/);
    expect(Object.keys(answer)).toEqual(['answer', 'sources', 'message_id']);
    // The header names the profile, no seed (no --vary-unspecified), and every dimension of the object.
    expect(variantOf(ask)).toEqual({
      profile: '"service.json"',
      ordinal: '0',
      'ask.sources': 'strings',
      'ask.extra_fields': 'emulator',
      'ask.ids': 'prefixed',
    });

    const created = (await s.post('/research', { question: 'Hufschmied' })).json();
    expect(created).toEqual({ job_id: expect.stringMatching(/^job_/), status: 'queued', poll: `/research/${created.job_id}` });
    await s.emu.clock.advance('1s');
    const runningJob = (await s.get(`/research/${created.job_id}`)).json();
    expect(runningJob.status).toBe('in_progress');
    await s.emu.clock.advance('4s');
    const done = (await s.get(`/research/${created.job_id}`)).json();
    expect(done.status).toBe('succeeded');
    // Unpinned: the report a Markdown string, citations objects, the emulator's fields.
    expect(done.report).toEqual(expect.any(String));
    expect(Object.keys(done.citations[0])).toEqual(['id', 'title', 'file_name', 'snippet']);
    expect(done).toMatchObject({ poll: `/research/${created.job_id}`, question: 'Hufschmied' });

    const accepted = await s.post('/training', { file_name: 'a.md', content: '# A\n\nText' });
    expect(accepted.status).toBe(202);
    expect(accepted.json()).toEqual({ job_id: expect.stringMatching(/^doc_/) });
    const id = accepted.json().job_id as string;
    await s.emu.clock.advance('10s');
    // Unpinned (its variant in the profile is null): the emulator's own url answer and vocabulary.
    expect((await s.get(`/training/${id}`)).json()).toMatchObject({ document_id: id, processing_step: 'indexed' });
    expect((await s.get(`/training/${id}/url`)).json()).toEqual({ document_id: id, url: `${s.emu.authUrl}/documents/${id}` });

    // The MCP twin of the ask answers the same way and names the profile in `_meta`.
    const tool = await postJson(
      `${s.emu.baseUrl}/mcp`,
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ask', arguments: { question: 'Wann kommt der Hufschmied?' } } },
      { ...s.headers, accept: 'application/json, text/event-stream' },
    );
    const result = tool.json().result;
    expect(result._meta['agent-access/variant']).toMatch(/^profile="service\.json", ordinal=1, ask\.sources=strings, /);
    for (const source of result.structuredContent.sources) expect(source).toEqual(expect.any(String));
  });

  it('43.3 --profile with --vary-unspecified: the profiled dimensions stay pinned, the others vary; the ready line names both', async () => {
    const file = await profileFile();
    const s = await start({ mode: 'child', varyUnspecified: { seed: 7 }, profile: file });
    expect(s.emu.varyUnspecified).toEqual({ seed: 7 });
    expect(s.emu.profile).toMatchObject({ name: 'service.json', file, not_pinned: ['training.url'] });
    const ids = new Set<string>();
    for (let i = 0; i < CATALOGUE.ask.ids.length; i++) {
      const res = await s.post('/chat/ask', { question: 'Wann kommt der Hufschmied?' });
      const variant = variantOf(res);
      expect(variant).toMatchObject({ seed: '7', profile: '"service.json"', ordinal: String(i), 'ask.sources': 'strings' });
      ids.add(variant['ask.ids']!);
      for (const source of res.json().sources) expect(source).toEqual(expect.any(String));
    }
    // Round-robin from the seed: as many asks as id forms show each form once.
    expect(ids).toEqual(new Set(CATALOGUE.ask.ids));
  });

  it('43.3 the banner names the profile and the dimensions it does not pin', async () => {
    const file = await profileFile();
    const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--auth-port', '0', '--in-memory', '--profile', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    const exit = once(child, 'exit');
    try {
      for await (const line of createInterface({ input: child.stdout })) {
        lines.push(line);
        if (line.includes('Ctrl+C stops it.')) break;
      }
    } finally {
      child.kill('SIGTERM');
      await exit;
    }
    const banner = lines.join('\n');
    expect(banner).toContain(`profile   ${file} (recorded from https://api.example.test): 3 dimensions answered as observed`);
    expect(banner).toContain('not pinned (a shape the emulator cannot mimic yet): training.url');
  });

  it('43.3 a profile file that cannot be read or is not a profile stops serve with exit 2, naming the file and what is wrong', async () => {
    const dir = await scratchDir();
    const cases: Array<[string, string | null, RegExp]> = [
      ['missing.json', null, /cannot be read \(ENOENT\)/],
      ['broken.json', '{ "version": 1,', /is not valid JSON/],
      ['old.json', JSON.stringify({ ...PROFILE, version: 2 }), /is not valid: version must be 1, not 2/],
      [
        'links.json',
        JSON.stringify({ ...PROFILE, dimensions: { ask: { sources: { variant: 'links' } } } }),
        /is not valid: dimensions\.ask\.sources\.variant "links" is not a variant of ask\.sources/,
      ],
    ];
    for (const [name, content, problem] of cases) {
      const file = join(dir, name);
      if (content !== null) await writeFile(file, content);
      const result = await runCli(['serve', '--port', '0', '--auth-port', '0', '--in-memory', '--json', '--profile', file]);
      expect(result.code, name).toBe(2);
      expect(result.stderr, name).toContain(`profile ${file}`);
      expect(result.stderr, name).toMatch(problem);
      // Nothing listened: no ready line.
      expect(result.stdout, name).toBe('');
    }
  });
});

describe('43.4 round trip: a recorded profile names the variants, and an emulator with it records the same profile', () => {
  it('43.4 round trip: under --vary-unspecified=SEED the profile names what the header named; serve --profile with it records the same', async () => {
    for (const seed of [3, 11]) {
      const varied = await exercise(await start({ varyUnspecified: { seed } }));
      const profile = recordProfile(varied.responses, { server: 'http://127.0.0.1', recordedAt: new Date(0).toISOString() });
      // Every dimension the run saw is named as the object's header named it, with no note of disagreement.
      for (const [kind, byDimension] of Object.entries(profile.dimensions))
        for (const [dimension, profiled] of Object.entries(byDimension))
          expect(profiled, `seed ${seed}: ${kind}.${dimension}`).toEqual({ variant: varied.variants[kind]![`${kind}.${dimension}`] });
      // All but the failed job's status and error, which a job that succeeded never shows.
      const named = Object.entries(profile.dimensions).flatMap(([kind, dims]) => Object.keys(dims).map((d) => `${kind}.${d}`));
      const expected = Object.entries(CATALOGUE)
        .flatMap(([kind, dims]) => Object.keys(dims).map((d) => `${kind}.${d}`))
        .filter((d) => d !== 'research.status.failed' && d !== 'research.error');
      expect(new Set(named), `seed ${seed}`).toEqual(new Set(expected));

      const file = await profileFile(profile, `seed-${seed}.json`);
      const again = await exercise(await start({ profile: file }));
      expect(again.variants.ask).toMatchObject({ profile: `"seed-${seed}.json"` });
      const recorded: VariantProfile = recordProfile(again.responses, {
        server: 'http://127.0.0.1',
        recordedAt: new Date(0).toISOString(),
      });
      expect(recorded, `seed ${seed}`).toEqual(profile);
    }
  });
});

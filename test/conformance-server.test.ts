/**
 * Issue 43: `agent-access conformance server` against real emulators on loopback. With a consent policy and every
 * --allow-* flag every check passes; without flags no charge and no write reaches the server; behind a proxy that
 * breaks one rule at a time, the check for that rule fails and names it.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ConformanceReport } from '../src/index.js';
import { runCli } from './helpers/cli.js';
import { clientEnv, runClient } from './helpers/client.js';
import { startContractProxy, type Mutation } from './helpers/contract-proxy.js';
import { scratchDir, startRunning } from './helpers/emulator.js';

const ALL_FLAGS = ['--allow-charges', '--allow-writes', '--allow-extra-logins'];
/**
 * Jobs that end soon, where the run's research and training are not what a test is about: the checks poll them each
 * second until done, and only the profile tests (43.3) record the statuses a job shows on its way.
 */
const QUICK_JOBS = { emulator: { timings: { researchQueueMs: 100, researchRunMs: 400, trainingStepMs: 100 } } };

/**
 * `conformance server --json --headless` against `baseUrl`, with its own token store, run in this process as the
 * binary runs it (helpers/client.ts); the exit code of the binary itself is checked once, below (exits 6).
 */
async function checkServer(baseUrl: string, flags: string[], extra: string[] = []) {
  const run = await runClient(['conformance', 'server', '--base-url', baseUrl, '--headless', '--json', ...flags, ...extra], {
    env: clientEnv(await scratchDir()),
  });
  let report: ConformanceReport | undefined;
  try {
    report = JSON.parse(run.stdout) as ConformanceReport;
  } catch {
    throw new Error(`no JSON report (exit ${run.code}):\n${run.stdout}\n${run.stderr}`);
  }
  const checks = report.scenarios.flatMap((s) => s.checks);
  return { ...run, report, checks, check: (id: string) => checks.find((c) => c.id === id) };
}

const notPassed = (checks: ConformanceReport['scenarios'][number]['checks']) =>
  checks.filter((c) => c.verdict !== 'pass').map((c) => `${c.id} ${c.verdict}: ${c.message}${c.received ? ` <- ${c.received}` : ''}`);

async function adminGet(emu: { adminUrl: string; adminToken: string }, path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${emu.adminUrl}${path}`, { headers: { authorization: `Bearer ${emu.adminToken}` } });
  return (await res.json()) as Record<string, unknown>;
}

describe('43.4 against the emulator', () => {
  it('43.4 with --consent approve and --allow-charges --allow-writes --allow-extra-logins every check passes', async () => {
    const emu = await startRunning({ consent: 'approve', ...QUICK_JOBS });
    const started = Date.now();
    const { code, report, checks, stderr } = await checkServer(emu.baseUrl, ALL_FLAGS);
    console.log(`conformance server against the emulator: ${checks.length} checks in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(notPassed(checks), stderr).toEqual([]);
    expect(code).toBe(0);
    expect(report.summary).toEqual({ pass: checks.length, fail: 0, skipped: 0 });
    expect(report.charges).toMatchObject({ calls: 3, routes: { 'POST /chat/ask': 2, 'POST /research': 1 } });
    expect(report.charges!.note).toContain('at most 2.2 AKh, 2.1 AKh where the reused key is refused with 409');
    // One line on stderr per extra consent screen, saying why.
    expect(stderr.match(/a consent screen of its own opens: .+/g)).toHaveLength(4);
    // The emulator charged one ask and one research job: the replay and the 409 cost nothing.
    const charges = await adminGet(emu, '/charges');
    expect((charges.entries as unknown[]).length).toBe(2);
  }, 120_000);

  it('43.1 safety: without flags no charge and no write reaches the server, and the checks that need them say which flag', async () => {
    const emu = await startRunning({ consent: 'approve' });
    const { code, report, check } = await checkServer(emu.baseUrl, []);
    expect(code).toBe(0);
    expect(report.summary.fail).toBe(0);
    expect(check('ask.answer')).toMatchObject({ verdict: 'skipped', message: 'skipped (needs --allow-charges)' });
    expect(check('research.created')).toMatchObject({ verdict: 'skipped', message: 'skipped (needs --allow-charges)' });
    expect(check('training.accepted')).toMatchObject({ verdict: 'skipped', message: 'skipped (needs --allow-writes)' });
    expect(check('guard.revoked-grant')).toMatchObject({ verdict: 'skipped', message: 'skipped (needs --allow-extra-logins)' });
    expect(report.charges).toMatchObject({ calls: 0 });
    const charges = await adminGet(emu, '/charges');
    expect(charges).toMatchObject({ total: 0, entries: [] });
    const state = await adminGet(emu, '/overview');
    expect(state).toMatchObject({ research: [], training: [], charges: { entries: [] } });
    // Only the run's own login made a grant: no extra consent screen without --allow-extra-logins.
    expect((state.grants as unknown[]).length).toBe(1);
  }, 60_000);

  it('43.1 the stored login is used when it has the scopes, and one that ended (revoked) is replaced by a fresh login, not failed', async () => {
    const emu = await startRunning({ consent: 'approve' });
    const env = clientEnv(await scratchDir());
    expect((await runClient(['login', '--base-url', emu.baseUrl, '--headless'], { env })).code).toBe(0);
    const reused = await runClient(['conformance', 'server', '--base-url', emu.baseUrl, '--headless', '--json'], { env });
    expect(reused.code, reused.stderr).toBe(0);
    expect(reused.stderr).not.toContain('logging in to');
    const grants = (await adminGet(emu, '/grants')).grants as Array<{ id: string }>;
    for (const g of grants)
      await fetch(`${emu.adminUrl}/grants/${g.id}/revoke`, { method: 'POST', headers: { authorization: `Bearer ${emu.adminToken}` } });
    const again = await runClient(['conformance', 'server', '--base-url', emu.baseUrl, '--headless', '--json'], { env });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(/logging in to .*: the stored login is no longer valid/);
  }, 60_000);

  it('43.1 a consent screen the person declines skips the checks that needed it (it says nothing about the server)', async () => {
    const emu = await startRunning({ consent: 'deny' });
    const { code, check, report } = await checkServer(emu.baseUrl, ['--allow-extra-logins']);
    expect(check('refresh.rotates')).toMatchObject({
      verdict: 'skipped',
      message: expect.stringMatching(/^skipped \(its consent screen was not approved: access denied/),
    });
    expect(check('guard.identity-token')).toMatchObject({ verdict: 'skipped' });
    expect(check('guard.no-token')).toMatchObject({ verdict: 'pass' });
    expect(report.summary.fail).toBe(0);
    expect(code).toBe(0);
  }, 60_000);

  it('43.1 --junit writes one testcase per check, skipped ones as skipped; a server not reachable exits 6', async () => {
    const emu = await startRunning({ consent: 'approve' });
    const dir = await scratchDir();
    const file = join(dir, 'server.xml');
    const { report } = await checkServer(emu.baseUrl, [], ['--junit', file]);
    const xml = await readFile(file, 'utf8');
    const total = report.scenarios.flatMap((s) => s.checks).length;
    expect(xml).toContain(`tests="${total}" failures="0" skipped="${report.summary.skipped}"`);
    expect(xml).toMatch(/<testcase classname="ask" name="ask.answer">\s*<skipped message="skipped \(needs --allow-charges\)" \/>/);
    await emu.stop();
    const config = await scratchDir();
    const gone = await runCli(['conformance', 'server', '--base-url', emu.baseUrl, '--headless'], {
      env: { AGENT_ACCESS_CONFIG_DIR: config },
    });
    expect(gone.code).toBe(6);
    expect(gone.stderr).toMatch(/cannot reach/);
  }, 60_000);
});

const isRefresh = (req: { url: URL; body: string }) => req.url.pathname === '/oauth/token' && /grant_type=refresh_token/.test(req.body);
const json = (res: { body: string }) => JSON.parse(res.body) as Record<string, unknown>;

/** One row per broken rule: what the proxy changes, the flags the check needs, the check that must fail and why. */
const MUTATIONS: Array<{ name: string; flags: string[]; check: string; message: RegExp; mutation: () => Mutation }> = [
  {
    name: 'no rotation: a refresh answers without a new refresh token',
    flags: [],
    check: 'refresh.rotates',
    message: /did not rotate/,
    mutation: () => ({
      answer(req, res) {
        if (!isRefresh(req) || res.status !== 200) return;
        const tokens = json(res);
        delete tokens.refresh_token;
        res.body = JSON.stringify(tokens);
      },
    }),
  },
  {
    name: '200 on a reused key with another body',
    flags: ['--allow-charges'],
    check: 'ask.key-conflict',
    message: /answered 200, not 409/,
    mutation: () => ({
      answer(req, res) {
        if (req.url.pathname !== '/chat/ask' || res.status !== 409) return;
        res.status = 200;
        res.headers['content-type'] = 'application/json';
        res.body = JSON.stringify({ answer: 'Noch einmal.', sources: [], message_id: 'msg_other' });
      },
    }),
  },
  {
    name: '401 without WWW-Authenticate',
    flags: [],
    check: 'guard.no-token',
    message: /the 401 has no Bearer WWW-Authenticate/,
    mutation: () => ({
      answer(_req, res) {
        if (res.status === 401) delete res.headers['www-authenticate'];
      },
    }),
  },
  {
    name: 'a retired scope accepted',
    flags: [],
    check: 'authorize.retired-scope',
    message: /accepted the request and issued a code/,
    mutation: () => ({
      request(req) {
        if (req.url.pathname === '/oauth/authorize' && req.url.searchParams.get('scope') === 'documents.read')
          req.url.searchParams.set('scope', 'ask');
      },
    }),
  },
  {
    name: 'aud without /mcp',
    flags: [],
    check: 'access-token.claims',
    message: /aud is "http:\/\/127\.0\.0\.1:\d+", not "http:\/\/127\.0\.0\.1:\d+\/mcp"/,
    mutation: () => ({
      claims(claims) {
        claims.aud = String(claims.aud).replace(/\/mcp$/, '');
      },
    }),
  },
  {
    name: 'a replay that does not end the family (the proxy refuses it without telling the server)',
    flags: ['--allow-extra-logins'],
    check: 'refresh.replay-ends-family',
    message: /the newest refresh token still works .*the family lives on/,
    mutation: () => {
      const spent = new Set<string>();
      return {
        request(req) {
          if (!isRefresh(req)) return;
          const token = new URLSearchParams(req.body).get('refresh_token') ?? '';
          if (!spent.has(token)) return void spent.add(token);
          return {
            status: 400,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ error: 'invalid_grant', error_description: 'refresh token already used' }),
          };
        },
      };
    },
  },
  {
    name: 'expires_in other than 900',
    flags: [],
    check: 'token.response',
    message: /expires_in is 3600, not 900/,
    mutation: () => ({
      answer(req, res) {
        if (req.url.pathname !== '/oauth/token' || res.status !== 200) return;
        res.body = JSON.stringify({ ...json(res), expires_in: 3600 });
      },
    }),
  },
];

describe('43.4 against servers that break a rule', () => {
  it('43.4 the proxy without a mutation passes every check it runs (the mutations below are all that differs)', async () => {
    const emu = await startRunning({ consent: 'approve', ...QUICK_JOBS });
    const proxy = await startContractProxy(emu);
    const { checks } = await checkServer(proxy.baseUrl, ['--allow-charges', '--allow-extra-logins']);
    expect(notPassed(checks).filter((c) => !/skipped \(needs --allow-writes\)/.test(c))).toEqual([]);
  }, 60_000);

  it.each(MUTATIONS)(
    '43.4 $name: $check fails and names it',
    async ({ flags, check: id, message, mutation }) => {
      const emu = await startRunning({ consent: 'approve', ...QUICK_JOBS });
      const proxy = await startContractProxy(emu, mutation());
      const { code, check, stdout } = await checkServer(proxy.baseUrl, flags);
      expect(check(id), stdout).toMatchObject({ verdict: 'fail', message: expect.stringMatching(message) });
      expect(code).toBe(1);
    },
    60_000,
  );
});

describe('43.3 --record-profile', () => {
  it('43.3 against an emulator under --vary-unspecified=SEED the profile names the variants that emulator used for the objects the run saw; serve --profile with it records the same profile', async () => {
    const emu = await startRunning({ consent: 'approve', varyUnspecified: { seed: 7 } });
    // The emulator names what it varied in Agent-Access-Variant (its diagnostics): read here on the way, never by the run.
    const used = new Map<string, Set<string>>();
    const proxy = await startContractProxy(emu, {
      answer(_req, res) {
        for (const item of (res.headers['agent-access-variant'] ?? '').split(/,\s*/)) {
          const [name, value] = item.split('=');
          if (name && value && name.includes('.')) used.set(name, (used.get(name) ?? new Set()).add(value));
        }
      },
    });
    const file = join(await scratchDir(), 'service.json');
    const { checks, stderr } = await checkServer(proxy.baseUrl, ['--allow-charges', '--allow-writes'], ['--record-profile', file]);
    expect(notPassed(checks).filter((c) => !/needs --allow-extra-logins/.test(c))).toEqual([]);
    expect(stderr).toContain(`Wrote the profile ${file}`);
    const profile = JSON.parse(await readFile(file, 'utf8')) as {
      version: number;
      server: string;
      dimensions: Record<string, Record<string, { variant: string | null }>>;
      observations: Record<string, unknown>;
    };
    expect(profile).toMatchObject({ version: 1, server: proxy.baseUrl, observations: { ratelimit_limit: '60' } });
    const named = Object.entries(profile.dimensions).flatMap(([kind, dims]) =>
      Object.entries(dims).map(([dimension, p]) => [`${kind}.${dimension}`, p.variant] as const),
    );
    // The objects the run saw: an ask, a research job that succeeded, a training document, each with its dimensions.
    for (const dimension of [
      'ask.sources',
      'research.report',
      'research.citations',
      'training.accepted',
      'training.url',
      'training.processing_step',
    ])
      expect(named.map(([d]) => d)).toContain(dimension);
    const compared = named.filter(([dimension]) => used.has(dimension));
    expect(compared.length).toBeGreaterThanOrEqual(8);
    const differing = named.filter(([dimension, variant]) => used.has(dimension) && !used.get(dimension)!.has(String(variant)));
    expect(differing, JSON.stringify([...used].map(([d, v]) => [d, [...v]]))).toEqual([]);
    console.log(`profile of seed 7: ${compared.map(([d, v]) => `${d}=${v}`).join(', ')}`);

    // The loop's step 4: an emulator that answers with the profile, checked again, records the same profile.
    const pinned = await startRunning({ consent: 'approve', profile: file });
    const again = join(await scratchDir(), 'again.json');
    const second = await checkServer(pinned.baseUrl, ['--allow-charges', '--allow-writes'], ['--record-profile', again]);
    expect(notPassed(second.checks).filter((c) => !/needs --allow-extra-logins/.test(c))).toEqual([]);
    const recorded = JSON.parse(await readFile(again, 'utf8')) as typeof profile;
    expect(recorded.dimensions).toEqual(profile.dimensions);
    // Observations that name fields: an unknown extra field's name is random per answer, so only these compare.
    expect(recorded.observations.errors).toEqual(profile.observations.errors);
    expect(recorded.observations.ratelimit_limit).toEqual(profile.observations.ratelimit_limit);
  }, 90_000);
});

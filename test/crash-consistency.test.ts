/**
 * Issue 18, point 6: an acknowledged response is on disk; kill -9 at any moment (during a commit, during a
 * compaction) loses no acknowledged write; a reader of the state file never sees a torn file.
 *
 * One campaign runs a real `serve --state FILE --journal-limit 64kb` under mixed load from this process, SIGKILLs
 * it at a moment drawn from a seed (when a compaction starts its temp file, right after an answer was read, or at a
 * plain delay), checks the files it left, starts it again on them and checks what every acknowledged (2xx) answer
 * promised; ROUNDS times. Each test below checks one rule over the whole campaign. A failure names the seed:
 * `CRASH_SEED=<seed> npx vitest run test/crash-consistency.test.ts` draws the same kill moments and mix again (the
 * exact interleaving of requests still depends on timing).
 *
 * SIGKILL ends the process, not the machine: what was written reaches the page cache and survives. So this checks
 * the order of write and answer (and of the compaction's steps), not whether fdatasync is called; that would need
 * a power cut (a VM, or a block device that drops unsynced writes).
 */
import { randomInt } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { startServe, type ServeProcess } from './helpers/cli.js';
import { bearer, decodeJwt, form } from './helpers/oauth.js';
import { readStateAt } from '../src/store/file-persistence.js';
import { storedResult } from '../src/core/state/idempotency.js';

const SEED = process.env.CRASH_SEED !== undefined ? Number(process.env.CRASH_SEED) : randomInt(2 ** 31);
const ROUNDS = 6;
const FAMILIES = 4;
/** Concurrent ask/research loops per family (its rotations run in one more loop, one after another). */
const WORKERS_PER_FAMILY = 2;
/** Bounds: every loop stops at one of them even if the kill never comes. */
const ROUND_LOAD_MAX_MS = 4_000;
const REQUESTS_PER_LOOP_MAX = 4_000;
const CAMPAIGN_MAX_MS = 75_000;
const REQUEST_TIMEOUT_MS = 10_000;
const SCOPES = ['ask', 'research'];

/** mulberry32: small, seeded, good enough to spread kill moments. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rule = 'restart' | 'load' | 'disk' | 'families' | 'ledger' | 'research' | 'replay' | 'reader';

interface Family {
  client_id: string;
  grant_id: string;
  person_id: string;
  family_id: string;
  /** The newest acknowledged refresh token, its generation, and the access token that came with it. */
  refresh_token: string;
  generation: number;
  access_token: string;
  /** A rotation was sent and no answer came back (the server was killed). */
  rotation_unanswered: boolean;
}

interface KeyedRequest {
  key: string;
  route: 'POST /chat/ask' | 'POST /research';
  grant_id: string;
  client_id: string;
  person_id: string;
  body: string;
  /** The answer's id (message_id or job_id), for the replay check. */
  answer_id: string;
  round: number;
}

interface Job {
  job_id: string;
  client_id: string;
  round: number;
}

interface KillReport {
  round: number;
  plan: string;
  afterMs: number;
  /** What the files showed right after the kill. */
  onDisk: string;
  notices: string[];
  acked: number;
  startMs?: number;
  checkMs?: number;
}

interface Campaign {
  violations: Record<Rule, string[]>;
  rounds: KillReport[];
  checkedRestarts: number;
  ackedRotations: number;
  ackedKeyed: number;
  ackedKeyless: number;
  ackedJobs: number;
  durableUnanswered: number;
  reads: number;
  ms: number;
  keptFiles?: string;
}

interface HttpAnswer {
  status: number;
  text: string;
  json: () => any;
}

async function send(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<HttpAnswer> {
  if (!url.startsWith('http://127.0.0.1:')) throw new Error(`not a loopback URL: ${url}`);
  const res = await request(url, {
    method: (init.method ?? 'GET') as 'GET',
    headers: init.headers,
    body: init.body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await res.body.text();
  return { status: res.statusCode, text, json: () => JSON.parse(text) };
}

const jsonHeaders = (token: string, key?: string) =>
  bearer(token, { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) });

const QUESTIONS = [
  'Wird mit Salz gestreut?',
  'Wann wird geräumt?',
  'Wer räumt den Hof?',
  'Wann kommt der Hufschmied?',
  'Was gilt am Sonntag?',
];
const RESEARCH = ['Streusalz oder Splitt auf den Wegen', 'Räumzeiten am Wochenende', 'Winterdienst am Mustermannhof'];

function scenario(): unknown {
  return {
    version: 1,
    description: 'crash-consistency: several grants with refresh tokens, ask + research',
    clients: Array.from({ length: FAMILIES }, (_, i) => ({
      client_id: `client_crash_${i}`,
      client_name: `Crash-Agent ${i}`,
      redirect_uris: ['http://127.0.0.1/callback'],
    })),
    grants: Array.from({ length: FAMILIES }, (_, i) => ({
      id: `grant_crash_${i}`,
      client_id: `client_crash_${i}`,
      scopes: SCOPES,
      resource: 'mcp',
      refresh_token: `aa1.crashFamily${i}handle${'x'.repeat(8)}.crashSecret${i}${'s'.repeat(40)}`,
    })),
    knowledge: [
      {
        id: 'kb-winter',
        file_name: 'winterdienst.md',
        content:
          '# Winterdienst\n\nWerktags bis 7 Uhr geräumt, sonntags bis 9 Uhr. Gestreut wird mit Splitt, nicht mit Salz.\n\n## Hof\n\nDen Mustermannhof räumt Georg mit dem Traktor.',
      },
    ],
  };
}

/** What the files beside the state show right after a kill: where in a commit or compaction it landed. */
async function describeDisk(dir: string): Promise<string> {
  const names = await readdir(dir);
  const parts: string[] = [];
  if (names.some((n) => /^\.state\.json\.[A-Za-z0-9_-]{12}\.tmp$/.test(n))) parts.push('compaction: state file half written');
  if (names.some((n) => /^\.state\.journal\.jsonl\.[A-Za-z0-9_-]{12}\.tmp$/.test(n))) parts.push('compaction: journal being rewritten');
  let stateSeq = -1;
  try {
    stateSeq = JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')).journal_seq;
  } catch (e) {
    parts.push(`state file unreadable: ${(e as Error).message}`);
  }
  const journal = await readFile(join(dir, 'state.journal.jsonl'), 'utf8').catch(() => null);
  if (journal !== null) {
    const torn = !journal.endsWith('\n') && journal.length > 0;
    const first = journal.length > 0 ? Number(/^\{"seq":(\d+)/.exec(journal)?.[1] ?? NaN) : NaN;
    if (first <= stateSeq) parts.push('compaction: state file renamed, journal not yet cut');
    if (torn) parts.push('commit: last journal record torn');
    parts.push(`journal ${journal.length} bytes from record ${Number.isNaN(first) ? '-' : first}, state file at record ${stateSeq}`);
  } else parts.push(`no journal, state file at record ${stateSeq}`);
  return parts.join('; ');
}

async function runCampaign(): Promise<Campaign> {
  const started = Date.now();
  const deadline = started + CAMPAIGN_MAX_MS;
  const violations: Record<Rule, string[]> = {
    restart: [],
    load: [],
    disk: [],
    families: [],
    ledger: [],
    research: [],
    replay: [],
    reader: [],
  };
  const flag = (rule: Rule, what: string) => {
    if (violations[rule].length < 50) violations[rule].push(what);
  };
  /** A loss is reported after the first restart that shows it, not again after every later one. */
  const reported = new Set<string>();
  const flagOnce = (rule: Rule, item: string, what: string) => {
    if (reported.has(`${rule} ${item}`)) return;
    reported.add(`${rule} ${item}`);
    flag(rule, what);
  };
  const campaign: Campaign = {
    violations,
    rounds: [],
    checkedRestarts: 0,
    ackedRotations: 0,
    ackedKeyed: 0,
    ackedKeyless: 0,
    ackedJobs: 0,
    durableUnanswered: 0,
    reads: 0,
    ms: 0,
  };
  const schedule = rng(SEED);
  const mix = rng(SEED ^ 0x5bd1e995);

  const dir = await mkdtemp(join(tmpdir(), 'agent-access-crash-'));
  const stateFile = join(dir, 'state.json');
  const ledgerFile = join(dir, 'state.charges.jsonl');
  const scenarioFile = join(dir, 'scenario.json');
  await writeFile(scenarioFile, JSON.stringify(scenario()));
  const serveArgs = [
    '--state',
    stateFile,
    '--scenario',
    scenarioFile,
    '--journal-limit',
    '64kb',
    '--rate-limit',
    '1000000/min',
    '--research-duration',
    '300',
  ];

  // The reader: the state file, read whole over and over for the whole campaign, must parse every time.
  let readerStop = false;
  const reader = (async () => {
    let seen = false;
    let lastSeq = -1;
    for (let n = 0; !readerStop && Date.now() < deadline && n < 200_000; n++) {
      let text: string;
      try {
        text = await readFile(stateFile, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') flag('reader', `read #${n}: ${(e as Error).message}`);
        else if (seen) flag('reader', `read #${n}: the state file was missing (ENOENT) after it had existed`);
        await sleep(2);
        continue;
      }
      seen = true;
      campaign.reads++;
      try {
        const seq = JSON.parse(text).journal_seq as number;
        if (typeof seq !== 'number' || seq < lastSeq) flag('reader', `read #${n}: journal_seq ${seq} after ${lastSeq}`);
        lastSeq = seq;
      } catch (e) {
        flag(
          'reader',
          `read #${n}: ${text.length} bytes that are not JSON (${(e as Error).message}); ends with ${JSON.stringify(text.slice(-40))}`,
        );
      }
      await sleep(3);
    }
  })();

  const families: Family[] = Array.from({ length: FAMILIES }, (_, i) => ({
    client_id: `client_crash_${i}`,
    grant_id: `grant_crash_${i}`,
    person_id: '',
    family_id: '',
    refresh_token: `aa1.crashFamily${i}handle${'x'.repeat(8)}.crashSecret${i}${'s'.repeat(40)}`,
    generation: 1,
    access_token: '',
    rotation_unanswered: false,
  }));
  const keyed: KeyedRequest[] = [];
  const attemptedKeys = new Set<string>();
  /** Key-less charged requests per grant and route: answered 2xx, and sent at all. */
  const keylessAcked = new Map<string, number>();
  const keylessSent = new Map<string, number>();
  const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);
  const jobs: Job[] = [];
  let serve: ServeProcess | null = null;
  let keySerial = 0;

  // ---- after a kill, before the restart: the files alone (the state file with its journal replayed) -----
  const checkDisk = async (when: string): Promise<void> => {
    let state: Awaited<ReturnType<typeof readStateAt>>;
    try {
      state = await readStateAt(stateFile);
    } catch (e) {
      flag('disk', `${when}: the files cannot be read: ${(e as Error).message}`);
      return;
    }
    if (!state) return flag('disk', `${when}: no state on disk`);
    for (const r of keyed) {
      const record = state.idempotency[JSON.stringify([r.client_id, r.person_id, r.route, r.key])];
      const id = record
        ? (storedResult(record).value as Record<string, unknown>)[r.route === 'POST /chat/ask' ? 'message_id' : 'job_id']
        : undefined;
      if (id !== r.answer_id)
        flagOnce(
          'disk',
          `idempotency ${r.key}`,
          `${when}: acknowledged ${r.route} with Idempotency-Key ${r.key} (round ${r.round}): stored answer ${typeof id === 'string' ? id : 'missing'}, acknowledged ${r.answer_id}`,
        );
    }
    for (const job of jobs)
      if (!state.research_jobs[job.job_id])
        flagOnce('disk', `job ${job.job_id}`, `${when}: acknowledged research job ${job.job_id} (round ${job.round}) is not on disk`);
    for (const [i, f] of families.entries()) {
      const generation = state.families[f.family_id]?.current.generation;
      if (generation !== f.generation && !(f.rotation_unanswered && generation === f.generation + 1)) {
        flag(
          'disk',
          `${when}: family ${i} is at generation ${generation} on disk; acknowledged: ${f.generation}${f.rotation_unanswered ? ' (one rotation unanswered)' : ''}`,
        );
      }
    }
    const charged = campaign.ackedKeyed + campaign.ackedKeyless;
    if (state.charges.count < charged) flag('disk', `${when}: ${state.charges.count} charges counted on disk, ${charged} acknowledged`);
  };

  try {
    for (let round = 0; round <= ROUNDS && Date.now() < deadline; round++) {
      // ---- start (again) on the same files -------------------------------------------------------------
      const startAt = Date.now();
      try {
        serve = await startServe(serveArgs, { ownedByCaller: true });
      } catch (e) {
        flag('restart', `round ${round}: serve did not start again on the files the kill left: ${(e as Error).message}`);
        break;
      }
      const base = serve.ready.base_url;
      const admin = serve.ready.admin_url;
      const adminHeaders = bearer(serve.ready.admin_token);
      const token = (f: Family) => f.access_token;

      // ---- after a kill: what every acknowledged answer promised ----------------------------------------
      const startMs = Date.now() - startAt;
      if (round > 0) {
        const report = campaign.rounds[round - 1]!;
        report.startMs = startMs;
        report.notices = serve
          .stderr()
          .split('\n')
          .filter((l) => l.startsWith('agent-access: '))
          .map((l) => l.slice('agent-access: '.length).replace(dir, '…'));

        // Ledger: read as the restarted server left it (it cuts lines of commits that never completed).
        const ledgerText = await readFile(ledgerFile, 'utf8').catch(() => '');
        const lines = ledgerText.split('\n').filter((l) => l.length > 0);
        const byKey = new Map<string, number>();
        const keyless = new Map<string, number>();
        for (const [i, line] of lines.entries()) {
          let entry: { seq: number; grant_id: string; route: string; idempotency_key: string | null };
          try {
            entry = JSON.parse(line);
          } catch {
            flag('ledger', `after kill ${round}: ledger line ${i + 1} is not JSON: ${line.slice(0, 80)}`);
            continue;
          }
          if (entry.seq !== i + 1) flag('ledger', `after kill ${round}: ledger line ${i + 1} has seq ${entry.seq}`);
          if (entry.idempotency_key === null) bump(keyless, `${entry.grant_id} ${entry.route}`);
          else {
            const k = `${entry.route} ${entry.idempotency_key}`;
            byKey.set(k, (byKey.get(k) ?? 0) + 1);
            if (!attemptedKeys.has(k)) flag('ledger', `after kill ${round}: a charge for key ${entry.idempotency_key} that was never sent`);
          }
        }
        for (const r of keyed) {
          const n = byKey.get(`${r.route} ${r.key}`) ?? 0;
          if (n !== 1)
            flagOnce(
              'ledger',
              `${r.route} ${r.key}`,
              `after kill ${round}: acknowledged ${r.route} with Idempotency-Key ${r.key} (round ${r.round}) has ${n} ledger lines, not 1`,
            );
        }
        for (const [k, acked] of keylessAcked) {
          const n = keyless.get(k) ?? 0;
          if (n < acked)
            flagOnce('ledger', `${k} ${acked}`, `after kill ${round}: ${k} without a key: ${acked} acknowledged, only ${n} ledger lines`);
        }
        for (const [k, n] of keyless) {
          if (n > (keylessSent.get(k) ?? 0))
            flag(
              'ledger',
              `after kill ${round}: ${k} without a key: ${n} ledger lines, but only ${keylessSent.get(k) ?? 0} requests were sent`,
            );
        }

        // Families: the newest acknowledged refresh token works, or one rotation was durable but never answered.
        const grants = (await send(`${admin}/grants`, { headers: adminHeaders })).json().grants as Array<{
          id: string;
          families: Array<{ id: string; status: string; generation: number }>;
        }>;
        const generations = new Map(grants.flatMap((g) => g.families.map((f) => [f.id, f] as const)));
        // A family the client can no longer use: it starts a new grant, as a client does after invalid_grant.
        const replace = async (f: Family) => {
          const t = (
            await send(`${admin}/tokens`, {
              method: 'POST',
              headers: { ...adminHeaders, 'content-type': 'application/json' },
              body: JSON.stringify({ scopes: SCOPES, client_id: f.client_id, person_id: f.person_id }),
            })
          ).json();
          Object.assign(f, {
            grant_id: t.grant_id,
            family_id: decodeJwt(t.access_token).payload.family_id,
            refresh_token: t.refresh_token,
            access_token: t.access_token,
            generation: 1,
            rotation_unanswered: false,
          });
        };
        await Promise.all(
          families.map(async (f, i) => {
            const stored = generations.get(f.family_id);
            const broken = (what: string) => {
              flag('families', `after kill ${round}: family ${i} (${f.family_id}) ${what}`);
              return replace(f);
            };
            if (!stored) return broken('is gone');
            if (stored.status !== 'active') return broken(`is ${stored.status}`);
            if (stored.generation === f.generation) {
              const res = await send(`${base}/oauth/token`, {
                method: 'POST',
                headers: { 'content-type': 'application/x-www-form-urlencoded' },
                body: form({ grant_type: 'refresh_token', client_id: f.client_id, refresh_token: f.refresh_token }),
              });
              if (res.status !== 200)
                return broken(`: the newest acknowledged refresh token (generation ${f.generation}) answered ${res.status} ${res.text}`);
              const t = res.json();
              Object.assign(f, {
                refresh_token: t.refresh_token,
                access_token: t.access_token,
                generation: f.generation + 1,
                rotation_unanswered: false,
              });
            } else if (stored.generation === f.generation + 1 && f.rotation_unanswered) {
              // Durable, never answered: the client cannot know the new token.
              campaign.durableUnanswered++;
              await replace(f);
            } else {
              await broken(
                `is at generation ${stored.generation}; acknowledged: ${f.generation}${f.rotation_unanswered ? ' (one rotation unanswered)' : ''}`,
              );
            }
          }),
        );

        // Research: every acknowledged job, of every round so far, can be polled.
        const clientToken = new Map(families.map((f) => [f.client_id, f.access_token]));
        for (let i = 0; i < jobs.length; i += 16) {
          await Promise.all(
            jobs.slice(i, i + 16).map(async (job) => {
              const res = await send(`${base}/research/${job.job_id}`, { headers: bearer(clientToken.get(job.client_id)!) });
              if (res.status !== 200 || res.json().job_id !== job.job_id)
                flagOnce(
                  'research',
                  job.job_id,
                  `after kill ${round}: acknowledged job ${job.job_id} (round ${job.round}) polls ${res.status} ${res.text.slice(0, 120)}`,
                );
            }),
          );
        }

        // Idempotent answers: a sample of the last round's keyed requests, sent again, get the stored answer.
        const lastRound = keyed.filter((r) => r.round === round - 1);
        for (let n = 0; n < 8 && lastRound.length > 0; n++) {
          const r = lastRound[Math.floor(mix() * lastRound.length)]!;
          const f = families.find((x) => x.client_id === r.client_id)!;
          const res = await send(`${base}${r.route.slice('POST '.length)}`, {
            method: 'POST',
            headers: jsonHeaders(f.access_token, r.key),
            body: r.body,
          });
          const id = res.status < 300 ? (res.json().message_id ?? res.json().job_id) : null;
          if (id !== r.answer_id)
            flag(
              'replay',
              `after kill ${round}: ${r.route} with Idempotency-Key ${r.key} sent again answered ${res.status} ${id ?? res.text.slice(0, 120)}, first answer ${r.answer_id}`,
            );
        }
        campaign.checkedRestarts++;
        report.checkMs = Date.now() - startAt - startMs;
      } else {
        // The first start: the families' ids and person, then their first acknowledged tokens.
        const grants = (await send(`${admin}/grants`, { headers: adminHeaders })).json().grants as Array<{ id: string; person_id: string }>;
        for (const f of families) {
          f.person_id = grants.find((g) => g.id === f.grant_id)!.person_id;
          const res = await send(`${base}/oauth/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: form({ grant_type: 'refresh_token', client_id: f.client_id, refresh_token: f.refresh_token }),
          });
          if (res.status !== 200) throw new Error(`the scenario's refresh token answered ${res.status} ${res.text}`);
          const t = res.json();
          Object.assign(f, {
            refresh_token: t.refresh_token,
            access_token: t.access_token,
            generation: 2,
            family_id: decodeJwt(t.access_token).payload.family_id,
          });
        }
      }
      if (round === ROUNDS) break;

      // ---- load, then the kill -------------------------------------------------------------------------
      const child = serve.child;
      let killSent = false;
      let killed = false;
      let acked = 0;
      /** Set when the kill is to come with the next answer the test reads. */
      let killOnAnswer = false;
      let sentKill!: () => void;
      const killDone = new Promise<void>((resolve) => (sentKill = resolve));
      const kill = () => {
        if (killSent) return;
        killSent = true;
        child.kill('SIGKILL');
        sentKill();
      };
      /** An answer was read and recorded: with `killOnAnswer`, the kill goes out before anything else runs. */
      const answered = () => {
        acked++;
        if (killOnAnswer) kill();
      };
      const loadDeadline = Date.now() + ROUND_LOAD_MAX_MS;
      const running = () => !killed && Date.now() < loadDeadline;
      const unexpected = (what: string, res: HttpAnswer) =>
        flag('load', `round ${round}: ${what} answered ${res.status} ${res.text.slice(0, 160)}`);
      /** A request that got no answer: expected once the kill was sent, a failure before. */
      const unanswered = (what: string, e: unknown) => {
        if (!killSent) flag('load', `round ${round}: ${what} got no answer before the kill: ${(e as Error).message}`);
      };

      const rotations = families.map(async (f) => {
        for (let n = 0; running() && n < REQUESTS_PER_LOOP_MAX; n++) {
          let res: HttpAnswer;
          f.rotation_unanswered = true;
          try {
            res = await send(`${base}/oauth/token`, {
              method: 'POST',
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: form({ grant_type: 'refresh_token', client_id: f.client_id, refresh_token: f.refresh_token }),
            });
          } catch (e) {
            unanswered(`refresh of ${f.family_id}`, e);
            return; // rotation_unanswered stays set
          }
          f.rotation_unanswered = false;
          if (res.status !== 200) return unexpected(`refresh of ${f.family_id}`, res);
          const t = res.json();
          Object.assign(f, { refresh_token: t.refresh_token, access_token: t.access_token, generation: f.generation + 1 });
          campaign.ackedRotations++;
          answered();
          await sleep(mix() * 5);
        }
      });
      const workers = families.flatMap((f) =>
        Array.from({ length: WORKERS_PER_FAMILY }, async () => {
          for (let n = 0; running() && n < REQUESTS_PER_LOOP_MAX; n++) {
            const pick = mix();
            const route = pick < 0.7 ? ('POST /chat/ask' as const) : ('POST /research' as const);
            const withKey = route === 'POST /chat/ask' ? pick < 0.45 : pick < 0.92;
            const key = withKey ? `crash-${SEED}-${++keySerial}` : undefined;
            const body = JSON.stringify({
              question: route === 'POST /chat/ask' ? QUESTIONS[n % QUESTIONS.length] : `${RESEARCH[n % RESEARCH.length]} (${keySerial})`,
            });
            const grant = f.grant_id;
            if (key) attemptedKeys.add(`${route} ${key}`);
            else bump(keylessSent, `${grant} ${route}`);
            let res: HttpAnswer;
            try {
              res = await send(`${base}${route.slice('POST '.length)}`, { method: 'POST', headers: jsonHeaders(token(f), key), body });
            } catch (e) {
              unanswered(`${route}${key ? ` (key ${key})` : ''}`, e);
              return;
            }
            if (res.status >= 300) return unexpected(`${route}${key ? ` (key ${key})` : ''}`, res);
            const answer = res.json();
            const answerId = route === 'POST /chat/ask' ? answer.message_id : answer.job_id;
            if (key) {
              keyed.push({ key, route, grant_id: grant, client_id: f.client_id, person_id: f.person_id, body, answer_id: answerId, round });
              campaign.ackedKeyed++;
            } else {
              bump(keylessAcked, `${grant} ${route}`);
              campaign.ackedKeyless++;
            }
            if (route === 'POST /research') {
              jobs.push({ job_id: answer.job_id, client_id: f.client_id, round });
              campaign.ackedJobs++;
            }
            answered();
          }
        }),
      );

      // The kill moment, drawn from the seed after a delay drawn from it too:
      // - compaction: the moment a compaction creates its temp file, plus 0-2 ms (it lands while the state file is
      //   written, renamed, or the journal cut);
      // - answer: right after the test has read an answer, before it sends anything else (an answer that went out
      //   before its record was written would be lost);
      // - timer: whenever the delay ends.
      const plan = (['compaction', 'answer', 'compaction', 'timer', 'compaction', 'answer'] as const)[round % 6]!;
      const waitMs = plan === 'compaction' ? 100 + Math.floor(schedule() * 400) : 150 + Math.floor(schedule() * 1_800);
      const extraMs = Math.floor(schedule() * 3);
      const loadStart = Date.now();
      await sleep(waitMs);
      if (plan === 'compaction') {
        let watcher: FSWatcher | null = null;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 3_000);
          watcher = watch(dir, (_event, name) => {
            if (name && /^\.state\.json\.[A-Za-z0-9_-]{12}\.tmp$/.test(name)) {
              clearTimeout(timer);
              resolve();
            }
          });
        });
        (watcher as FSWatcher | null)?.close();
        if (extraMs > 0) await sleep(extraMs);
      } else if (plan === 'answer') {
        killOnAnswer = true;
        await Promise.race([killDone, sleep(2_000)]);
      }
      const afterMs = Date.now() - loadStart;
      if (!killSent && (child.exitCode !== null || child.signalCode !== null))
        flag('load', `round ${round}: serve exited by itself (${child.exitCode ?? child.signalCode}): ${serve.stderr().slice(-400)}`);
      kill();
      await serve.exit;
      killed = true;
      serve = null;
      const onDisk = await describeDisk(dir);
      await Promise.all([...rotations, ...workers]);
      await checkDisk(`kill ${round + 1}`);
      campaign.rounds.push({ round, plan, afterMs, onDisk, notices: [], acked });
      // The restart takes the dead holder's lock at once: its admin file names a pid that is gone (crash-restart.test.ts).
    }
    if (serve) {
      const code = await serve.stop();
      if (code !== 0) flag('restart', `the last serve stopped with ${code}: ${serve.stderr().slice(-400)}`);
      serve = null;
      // After a clean stop the state file alone holds everything: the journal was folded into it.
      await checkDisk('after the clean stop');
      const journal = await readFile(join(dir, 'state.journal.jsonl'), 'utf8').catch(() => '');
      if (journal.length > 0) flag('disk', `after the clean stop the journal still holds ${journal.length} bytes`);
    }
  } catch (e) {
    flag('restart', `the campaign stopped: ${(e as Error).stack ?? String(e)}`);
  } finally {
    serve?.child.kill('SIGKILL');
    readerStop = true;
    await reader;
    // The files of a failed run stay for a look; a clean run leaves nothing behind.
    if (Object.values(violations).some((v) => v.length > 0)) campaign.keptFiles = dir;
    else await rm(dir, { recursive: true, force: true });
  }
  campaign.ms = Date.now() - started;
  return campaign;
}

describe('kill -9 at any moment loses no acknowledged write (docs/serve.md "How the state is stored": a crash loses nothing that was answered)', () => {
  let campaign: Campaign;
  beforeAll(async () => {
    campaign = await runCampaign();
    const summary = campaign.rounds.map(
      (r) =>
        `  kill ${r.round + 1} (${r.plan}, ${r.afterMs} ms, ${r.acked} acked; start ${r.startMs} ms, check ${r.checkMs} ms): ${r.onDisk}${r.notices.length ? `\n    restart: ${r.notices.join(' | ')}` : ''}`,
    );
    console.log(
      [
        `crash campaign, seed ${SEED}: ${campaign.ms} ms, ${campaign.checkedRestarts} restarts checked, ${campaign.ackedRotations} rotations, ${campaign.ackedKeyed} keyed and ${campaign.ackedKeyless} key-less charged answers, ${campaign.ackedJobs} jobs, ${campaign.durableUnanswered} rotations durable but unanswered, ${campaign.reads} reads of the state file`,
        ...summary,
        ...(campaign.keptFiles ? [`  files kept in ${campaign.keptFiles}`] : []),
      ].join('\n'),
    );
  }, CAMPAIGN_MAX_MS + 30_000);

  /** A rule holds: the campaign ran all its rounds, and nothing broke the rule. The message names the seed. */
  const holds = (rule: Rule) => {
    const repeat = `seed ${SEED} (repeat: CRASH_SEED=${SEED} npx vitest run test/crash-consistency.test.ts)`;
    expect(campaign.violations[rule], repeat).toEqual([]);
    expect(campaign.violations.restart.length, `${repeat}: the campaign stopped early (see the restart test)`).toBe(0);
    expect(campaign.checkedRestarts, `${repeat}: restarts checked`).toBe(ROUNDS);
  };

  it('the server starts again on whatever files a kill -9 left, every round', () => holds('restart'));

  it('under load every request is answered 2xx until the kill', () => holds('load'));

  it('what a kill leaves on disk (the state file with its journal replayed) holds every acknowledged write', () => holds('disk'));

  it('the newest acknowledged refresh token still works after a kill, or its family is exactly one generation ahead because a rotation was durable but unanswered', () => {
    holds('families');
    expect(campaign.ackedRotations).toBeGreaterThan(ROUNDS * FAMILIES);
  });

  it('every acknowledged charge has its ledger line: one per Idempotency-Key, and at least as many key-less lines per grant as key-less answers', () => {
    holds('ledger');
    expect(campaign.ackedKeyed).toBeGreaterThan(0);
    expect(campaign.ackedKeyless).toBeGreaterThan(0);
  });

  it('every acknowledged research job can be polled after a kill', () => {
    holds('research');
    expect(campaign.ackedJobs).toBeGreaterThan(0);
  });

  it('an acknowledged idempotent answer is stored: the same key and body after a kill get the same answer', () => holds('replay'));

  it('a reader of the state file never sees a torn file, and its journal_seq never goes back', () => {
    holds('reader');
    expect(campaign.reads).toBeGreaterThan(100);
  });

  it('the kills landed during commits and during compactions', () => {
    holds('restart');
    const during = (what: RegExp) => campaign.rounds.filter((r) => what.test(r.onDisk)).length;
    expect(during(/compaction/), `seed ${SEED}: no kill landed during a compaction`).toBeGreaterThan(0);
    expect(
      campaign.rounds.filter((r) => r.notices.some((n) => n.startsWith('replayed'))).length,
      `seed ${SEED}: no restart replayed the journal`,
    ).toBeGreaterThan(0);
  });
});

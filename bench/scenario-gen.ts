// Generates `serve --scenario` files of a given size for the storage bench: clients, grants with refresh tokens,
// finished research jobs with reports of realistic size, and charges, split evenly. Content comes from a seeded
// generator (the same size gives the same records); times are spread over the day before `now` (within every retention).
//
//   node build/bench/scenario-gen.js --records 100000 --out /tmp/scenario-100k.json [--seed 1]
import { closeSync, openSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/** One scenario grant the bench can refresh: its client, and the refresh token the scenario presets. */
export interface BenchGrant {
  grantId: string;
  clientId: string;
  refreshToken: string;
}

export interface GeneratedScenario {
  file: string;
  bytes: number;
  counts: { clients: number; grants: number; research_jobs: number; charges: number };
  /** every grant, in file order; all are active, with scopes ask and research and resource "mcp" */
  grants: BenchGrant[];
}

/** The scenario schema's cap on each list (src/loaders/scenario.ts). */
export const MAX_LIST_ITEMS = 100_000;

// ---------- seeded randomness (mulberry32) ----------

type Rng = () => number;

function rng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
const between = (r: Rng, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const b64url = (r: Rng, n: number): string => Array.from({ length: n }, () => B64URL[Math.floor(r() * 64)]).join('');

// ---------- text ----------

const TOPICS = [
  { q: 'Wann kommt der Hufschmied zu den Pensionspferden?', file: 'pferdepension-leitfaden.md', title: 'Leitfaden für Einsteller' },
  { q: 'Wer räumt und streut im Winter die Wege am Lindenweg 4?', file: 'hausordnung.md', title: 'Hausordnung: Winterdienst' },
  { q: 'Bis wann muss die Nebenkostenabrechnung für 2025 zugestellt sein?', file: 'nebenkosten-faq.md', title: 'Nebenkosten: Fristen' },
  { q: 'Wen rufe ich bei einem Wasserrohrbruch im Keller an?', file: 'notfallplan.md', title: 'Notfallplan: Wasserschaden' },
  { q: 'Welche Ruhezeiten gelten im Haus Isarstraße 21?', file: 'hausordnung.md', title: 'Hausordnung: Ruhezeiten' },
  { q: 'Wie werden die Heizkosten auf die Mieter umgelegt?', file: 'nebenkosten-faq.md', title: 'Nebenkosten: Heizkosten' },
  { q: 'Was ist bei einer Kolik eines Pferdes zu tun?', file: 'notfallplan.md', title: 'Notfallplan: Tierarzt' },
  { q: 'Wann dürfen die Pferde auf die Sommerweide?', file: 'pferdepension-leitfaden.md', title: 'Leitfaden: Weidegang' },
] as const;

const SENTENCES = [
  'Die Hausverwaltung Mustermann hat die Regelung zuletzt im Januar mit allen Mietparteien abgestimmt.',
  'Für die Häuser Lindenweg 4 und Isarstraße 21 in Bad Tölz sowie Bergweg 7 in Lenggries gilt dieselbe Vorgabe.',
  'Der Hausmeisterservice Bauer übernimmt die Arbeiten werktags bis 7 Uhr, an Sonn- und Feiertagen bis 9 Uhr.',
  'Abweichungen sind nur nach Rücksprache mit Erika Mustermann im Büro Marktstraße 12 möglich.',
  'Im Stall ist Georg Mustermann der Ansprechpartner; an Wochenenden übernimmt Tobias Rieger die Abendfütterung.',
  'Die Kosten werden nach der Wohnfläche umgelegt, soweit der Mietvertrag nichts anderes bestimmt.',
  'Belege können nach Terminvereinbarung im Büro eingesehen werden; Kopien werden gegen eine Gebühr erstellt.',
  'Bei Gefahr für Leben oder Gesundheit ist zuerst der Notruf 112 zu wählen, danach die Verwaltung.',
  'Die Quelle nennt keine Ausnahme für Feiertage; im Zweifel gilt die strengere Regel der Hausordnung.',
  'Die Angaben wurden mit dem aktuellen Stand der Wissensdatenbank abgeglichen und sind belegt.',
  'Der Tierarzt Dr. Seidl ist für Notfälle auch nachts erreichbar, Routinetermine werden vorab vereinbart.',
  'Weidegang ist von Mai bis Oktober vorgesehen, abhängig vom Zustand der Koppeln nach dem Regen.',
  'Eine frühere Fassung der Regel aus dem Jahr 2023 ist überholt und wird hier nicht mehr berücksichtigt.',
  'Mehrere Quellen stimmen in diesem Punkt überein, sie unterscheiden sich nur in der Formulierung.',
] as const;

function paragraph(r: Rng, min: number, max: number): string {
  return Array.from({ length: between(r, min, max) }, () => pick(r, SENTENCES)).join(' ');
}

/**
 * A finished research report: German Markdown of about 1 KB with 2–3 citations, so that 100k records make about the
 * 50 MB state the storage targets were set on.
 */
function researchJob(r: Rng, i: number, grant: string, createdAt: string): Record<string, unknown> {
  const topic = pick(r, TOPICS);
  const citations = Array.from({ length: between(r, 2, 3) }, (_, k) => ({
    id: `kb-${topic.file.replace(/\.md$/, '')}-${k + 1}`,
    title: `${topic.title} (${k + 1})`,
    file_name: topic.file,
    snippet: paragraph(r, 1, 1),
  }));
  const findings = citations.map((c, k) => `### ${c.title} [${k + 1}]\n\n${paragraph(r, 1, 2)}`).join('\n\n');
  const report = [
    `# Recherche: ${topic.q}`,
    '## Zusammenfassung',
    paragraph(r, 1, 2),
    '## Ergebnisse',
    findings,
    '## Quellen',
    citations.map((c, k) => `${k + 1}. ${c.title} (${c.file_name})`).join('\n'),
  ].join('\n\n');
  return { id: `job-${i}`, grant, question: topic.q, status: 'succeeded', created_at: createdAt, report, citations };
}

/** Questions the packaged knowledge base has answers to (asks are answered, research jobs succeed). */
export const BENCH_QUESTIONS: readonly string[] = TOPICS.map((t) => t.q);

// ---------- the file ----------

/** Buffered synchronous writer: a 100k-record file is written in ~1 MB chunks, never built as one string. */
class FileWriter {
  #fd: number;
  #parts: string[] = [];
  #size = 0;
  constructor(file: string) {
    this.#fd = openSync(file, 'w', 0o600);
  }
  write(s: string): void {
    this.#parts.push(s);
    this.#size += s.length;
    if (this.#size > 1 << 20) this.flush();
  }
  flush(): void {
    if (this.#parts.length > 0) writeSync(this.#fd, this.#parts.join(''));
    this.#parts = [];
    this.#size = 0;
  }
  close(): void {
    this.flush();
    closeSync(this.#fd);
  }
}

/**
 * Writes a scenario with about `records` records (a quarter each: clients, grants, research jobs, charges) to `file`.
 * Every client has one grant (scopes ask and research, resource "mcp", its own refresh token); jobs and charges go
 * round-robin over the grants.
 */
export function writeBenchScenario(file: string, records: number, opts: { seed?: number; now?: number } = {}): GeneratedScenario {
  const n = Math.max(1, Math.round(records / 4));
  if (n > MAX_LIST_ITEMS) throw new Error(`${records} records need ${n} items per list, over the scenario cap of ${MAX_LIST_ITEMS}`);
  const r = rng(opts.seed ?? 1);
  const now = opts.now ?? Date.now();
  const day = 24 * 3600 * 1000;
  // Whole seconds, oldest first, all within the last day before `now`: retention (7 days) keeps every record during the run.
  const timeAt = (i: number): string => new Date(Math.floor((now - day + (i / n) * (day - 60_000)) / 1000) * 1000).toISOString();
  const pad = (i: number): string => String(i).padStart(6, '0');
  const grants: BenchGrant[] = [];
  const w = new FileWriter(file);
  const list = (name: string, first: boolean, item: (i: number) => unknown): void => {
    w.write(`${first ? '' : ','}\n"${name}":[`);
    for (let i = 0; i < n; i++) w.write(`${i === 0 ? '' : ','}\n${JSON.stringify(item(i))}`);
    w.write('\n]');
  };
  try {
    w.write(`{"version":1,"description":${JSON.stringify(`agent-access storage bench: ${n * 4} records (seed ${opts.seed ?? 1})`)}`);
    list('clients', false, (i) => ({
      client_id: `client-${pad(i)}`,
      client_name: `Bench-Agent ${i}`,
      redirect_uris: ['http://127.0.0.1/callback'],
    }));
    list('grants', false, (i) => {
      // The handle carries the index, so it is unique; the secret is 43 base64url characters, like a minted one.
      const g: BenchGrant = {
        grantId: `grant-${pad(i)}`,
        clientId: `client-${pad(i)}`,
        refreshToken: `aa1.bench${i.toString(36)}${b64url(r, 12)}.${b64url(r, 43)}`,
      };
      grants.push(g);
      return {
        id: g.grantId,
        client_id: g.clientId,
        scopes: ['ask', 'research'],
        resource: 'mcp',
        refresh_token: g.refreshToken,
        created_at: timeAt(i),
      };
    });
    list('research_jobs', false, (i) => researchJob(r, i, `grant-${pad(i % n)}`, timeAt(i)));
    list('charges', false, (i) => {
      const research = r() < 0.3;
      return {
        grant: `grant-${pad((i * 7) % n)}`,
        route: research ? 'POST /research' : pick(r, ['POST /chat/ask', 'tool ask'] as const),
        amount: research ? 2 : 0.1,
        at: timeAt(i),
        ...(r() < 0.5 ? { idempotency_key: `bench-${pad(i)}-${b64url(r, 8)}` } : {}),
      };
    });
    w.write('\n}\n');
  } finally {
    w.close();
  }
  return { file, bytes: statSync(file).size, counts: { clients: n, grants: n, research_jobs: n, charges: n }, grants };
}

// ---------- command line ----------

function cli(argv: string[]): void {
  const usage = 'usage: scenario-gen --records N --out FILE [--seed 1]';
  const { values } = parseArgs({
    args: argv,
    options: { records: { type: 'string', default: '1000' }, out: { type: 'string' }, seed: { type: 'string', default: '1' } },
  });
  const records = Number(values.records);
  if (values.out === undefined || !Number.isInteger(records) || records < 4) throw new Error(usage);
  const g = writeBenchScenario(path.resolve(values.out), records, { seed: Number(values.seed) });
  console.log(JSON.stringify({ file: g.file, bytes: g.bytes, counts: g.counts }));
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) cli(process.argv.slice(2));

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { AgentAccessError } from '../core/state/errors.js';
import { fileNameProblem } from '../core/state/inputs.js';
import { TRAINING_STEPS } from '../core/resources/jobs.js';
import type { LoadedScenario, Scenario } from '../core/emulation/scenario.js';
import { RETIRED_SCOPES, SUPPORTED_SCOPES } from '../core/oauth/scopes.js';
import type { Fixtures } from './fixtures.js';

/** A scenario file that cannot be used; the message names the file and each problem by its JSON path. */
export class ScenarioError extends AgentAccessError {
  readonly file: string;
  constructor(file: string, message: string) {
    super('scenario_invalid', message);
    this.file = file;
  }
}

/** The routes that charge (spec 1): the REST allowlist's and their agent-plane twins. */
export const CHARGED_ROUTES = ['POST /chat/ask', 'POST /research', 'tool ask', 'tool start_research'] as const;

const ID = {
  type: 'string',
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$',
  description: 'must be 1–100 letters, digits, ".", "_", ":" or "-", starting with a letter or digit',
} as const;
const TIME = {
  type: 'string',
  pattern: '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,3})?)?(Z|[+-]\\d{2}:\\d{2})$',
  description: 'must be an ISO 8601 time with its zone, e.g. 2026-03-01T09:00:00Z',
} as const;
const TEXT = (maxLength: number) => ({ type: 'string', minLength: 1, maxLength }) as const;
const ERROR = {
  type: 'object',
  required: ['code', 'message'],
  additionalProperties: false,
  properties: { code: TEXT(100), message: TEXT(2000) },
} as const;
/** The most entries a scenario list holds (docs/emulator-control.md: "Scenarios and snapshots"). */
const SCENARIO_LIST_MAX = 100_000;
const list = (items: object, maxItems: number = SCENARIO_LIST_MAX) => ({ type: 'array', maxItems, items }) as const;

/** The scenario format, version 1 (docs/emulator-control.md: "Scenarios and snapshots"). Rules across fields are checked after it. */
export const SCENARIO_SCHEMA = {
  type: 'object',
  required: ['version'],
  additionalProperties: false,
  properties: {
    version: { type: 'integer', const: 1 },
    description: { type: 'string', maxLength: 10_000 },
    clients: list({
      type: 'object',
      required: ['client_id', 'client_name', 'redirect_uris'],
      additionalProperties: false,
      properties: { client_id: ID, client_name: TEXT(200), redirect_uris: { type: 'array', minItems: 1, maxItems: 20, items: TEXT(2000) } },
    }),
    grants: list({
      type: 'object',
      required: ['id', 'client_id', 'scopes', 'resource'],
      additionalProperties: false,
      properties: {
        id: ID,
        client_id: ID,
        person_id: TEXT(200),
        scopes: {
          type: 'array',
          minItems: 1,
          uniqueItems: true,
          items: { type: 'string', enum: [...SUPPORTED_SCOPES, ...RETIRED_SCOPES] },
        },
        resource: { type: ['string', 'null'], enum: ['mcp', null] },
        refresh_token: {
          type: 'string',
          maxLength: 500,
          pattern: '^aa1\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$',
          description: 'must have the form aa1.<handle>.<secret> (base64url parts)',
        },
        status: { type: 'string', enum: ['active', 'revoked'] },
        created_at: TIME,
      },
    }),
    knowledge: list({
      type: 'object',
      required: ['file_name', 'content'],
      additionalProperties: false,
      properties: {
        id: ID,
        // Its form is checked below, by the rule the training route applies (fileNameProblem).
        file_name: { type: 'string' },
        content: { type: 'string', minLength: 1, maxLength: 256 * 1024 },
        grant: ID,
        processing_step: { type: 'string', enum: [...TRAINING_STEPS, 'failed'] },
        created_at: TIME,
        error: ERROR,
      },
    }),
    research_jobs: list({
      type: 'object',
      required: ['grant', 'question', 'status'],
      additionalProperties: false,
      properties: {
        id: ID,
        grant: ID,
        question: TEXT(4000),
        status: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] },
        created_at: TIME,
        report: TEXT(1_000_000),
        citations: list(
          {
            type: 'object',
            required: ['id', 'title', 'file_name', 'snippet'],
            additionalProperties: false,
            properties: { id: TEXT(200), title: TEXT(500), file_name: TEXT(255), snippet: { type: 'string', maxLength: 4000 } },
          },
          10_000,
        ),
        error: ERROR,
      },
    }),
    charges: list({
      type: 'object',
      required: ['grant', 'route', 'amount'],
      additionalProperties: false,
      properties: {
        grant: ID,
        route: { type: 'string', enum: [...CHARGED_ROUTES] },
        amount: { type: 'number', exclusiveMinimum: 0, maximum: 1_000_000 },
        at: TIME,
        idempotency_key: { type: 'string', minLength: 1, maxLength: 255 },
      },
    }),
  },
} as const;

type Raw = {
  version: 1;
  clients?: Scenario['clients'];
  grants?: Array<
    Omit<Scenario['grants'][number], 'person_id' | 'status' | 'created_at'> & {
      person_id?: string;
      status?: 'active' | 'revoked';
      created_at?: string;
    }
  >;
  knowledge?: Array<
    Omit<Scenario['knowledge'][number], 'processing_step' | 'created_at'> & {
      processing_step?: Scenario['knowledge'][number]['processing_step'];
      created_at?: string;
    }
  >;
  research_jobs?: Array<Omit<Scenario['research_jobs'][number], 'created_at'> & { created_at?: string }>;
  charges?: Array<Omit<Scenario['charges'][number], 'at'> & { at?: string }>;
};

let compiled: ReturnType<Ajv['compile']> | undefined;
const validator = () => (compiled ??= new Ajv({ allErrors: true, verbose: true, strict: true }).compile(SCENARIO_SCHEMA));

/** `/grants/0/scopes/1` → `$.grants[0].scopes[1]`. */
function jsonPath(pointer: string, child?: string): string {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (child !== undefined) parts.push(child);
  return `$${parts.map((p) => (/^\d+$/.test(p) ? `[${p}]` : /^[A-Za-z_][A-Za-z0-9_]*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`)).join('')}`;
}

const shown = (value: unknown): string => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
};

/** One ajv error as a line that names the JSON path, says what is wrong, and shows what was found. */
function describe(error: ErrorObject): string | null {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${jsonPath(error.instancePath, String(params.missingProperty))}: is required`;
    case 'additionalProperties': {
      const allowed = Object.keys((error.parentSchema as { properties?: object }).properties ?? {}).join(', ');
      return `${jsonPath(error.instancePath, String(params.additionalProperty))}: unknown field (allowed: ${allowed})`;
    }
    case 'enum':
      return (
        `${jsonPath(error.instancePath)}: must be ` +
        `one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')} (found ${shown(error.data)})`
      );
    case 'const':
      return `${jsonPath(error.instancePath)}: must be ${JSON.stringify(params.allowedValue)} (found ${shown(error.data)})`;
    case 'pattern':
      return `${jsonPath(error.instancePath)}: ${(error.parentSchema as { description?: string }).description ?? error.message} (found ${shown(error.data)})`;
    case 'type':
      return `${jsonPath(error.instancePath)}: must be ${String(params.type).replace(',', ' or ')} (found ${shown(error.data)})`;
    default:
      return `${jsonPath(error.instancePath)}: ${error.message ?? 'is invalid'}`;
  }
}

const hex = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/**
 * Reads a scenario file and checks it completely before anything is created: the JSON schema, then every cross
 * reference (clients, grants, persons of the fixtures, refresh-token handles, ids) and the rules between fields.
 * Every problem is reported with its JSON path, up to ten at a time.
 */
export async function loadScenario(file: string, fixtures: Pick<Fixtures, 'persons' | 'grants' | 'knowledge'>): Promise<LoadedScenario> {
  const path = resolve(file);
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new ScenarioError(path, `scenario ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(bytes.toString('utf8'));
  } catch (e) {
    throw new ScenarioError(path, `scenario ${path} is not valid JSON (${(e as Error).message})`);
  }
  const fail = (problems: string[]): never => {
    const shownProblems = problems.slice(0, 10);
    const more = problems.length > shownProblems.length ? `\n  … and ${problems.length - shownProblems.length} more` : '';
    throw new ScenarioError(
      path,
      `scenario ${path} is not valid:\n${shownProblems.map((p) => `  ${p}`).join('\n')}${more}\nThe format is described in ` +
        `docs/emulator-control.md, section "Scenarios and snapshots".`,
    );
  };
  const validate = validator();
  if (!validate(json)) {
    // With allErrors, an `if`/`then` or `anyOf` repeats what its branches said; those lines are dropped.
    fail([...new Set((validate.errors ?? []).map(describe).filter((line): line is string => line !== null))]);
  }
  const raw = json as Raw;
  const problems: string[] = [];
  const time = (value: string | undefined, at: string): number | undefined => {
    if (value === undefined) return undefined;
    const ms = Date.parse(value);
    if (Number.isNaN(ms)) problems.push(`${at}: ${shown(value)} is not a valid time`);
    return ms;
  };
  const unique = (seen: Set<string>, value: string, at: string, what: string) => {
    if (seen.has(value)) problems.push(`${at}: ${what} ${shown(value)} is used twice`);
    seen.add(value);
  };

  const fixtureClients = new Set(fixtures.grants.map((g) => g.client.client_id));
  const clientIds = new Set<string>();
  (raw.clients ?? []).forEach((c, i) => {
    unique(clientIds, c.client_id, `$.clients[${i}].client_id`, 'client_id');
    if (fixtureClients.has(c.client_id))
      problems.push(`$.clients[${i}].client_id: ${shown(c.client_id)} is a client of the fixtures' grants.json already`);
  });

  const persons = fixtures.persons;
  const defaultPerson = (persons.find((p) => p.default) ?? persons[0])!.id;
  const handles = new Map<string, string>(
    fixtures.grants.flatMap((g) =>
      g.refresh_token ? [[g.refresh_token.split('.')[1]!, "the fixtures' grants.json"] as [string, string]] : [],
    ),
  );
  const grantIds = new Set<string>();
  const grants: Scenario['grants'] = (raw.grants ?? []).map((g, i) => {
    const at = `$.grants[${i}]`;
    unique(grantIds, g.id, `${at}.id`, 'grant id');
    if (!clientIds.has(g.client_id)) problems.push(`${at}.client_id: no client ${shown(g.client_id)} in $.clients`);
    const person = g.person_id ?? defaultPerson;
    if (!persons.some((p) => p.id === person))
      problems.push(`${at}.person_id: no person ${shown(person)} in the fixtures (${persons.map((p) => p.id).join(', ')})`);
    if (g.refresh_token) {
      const handle = g.refresh_token.split('.')[1]!;
      const other = handles.get(handle);
      if (other) problems.push(`${at}.refresh_token: its handle ${shown(handle)} is used by ${other} too; every grant needs its own`);
      handles.set(handle, `${at}.refresh_token`);
    }
    return {
      id: g.id,
      client_id: g.client_id,
      person_id: person,
      scopes: g.scopes,
      resource: g.resource,
      refresh_token: g.refresh_token,
      status: g.status ?? 'active',
      created_at: time(g.created_at, `${at}.created_at`),
    };
  });
  const knownGrant = (id: string, at: string) => {
    if (!grantIds.has(id)) problems.push(`${at}: no grant ${shown(id)} in $.grants`);
  };

  const docIds = new Set<string>(fixtures.knowledge.map((k) => k.id));
  const knowledge: Scenario['knowledge'] = (raw.knowledge ?? []).map((k, i) => {
    const at = `$.knowledge[${i}]`;
    const nameProblem = fileNameProblem(k.file_name);
    if (nameProblem) problems.push(`${at}.file_name: ${nameProblem}`);
    if (k.id !== undefined) {
      if (fixtures.knowledge.some((f) => f.id === k.id))
        problems.push(`${at}.id: ${shown(k.id)} is a document of the fixtures' knowledge/ already`);
      else unique(docIds, k.id, `${at}.id`, 'document id');
    }
    const step = k.processing_step ?? 'indexed';
    if (k.grant !== undefined) knownGrant(k.grant, `${at}.grant`);
    else if (step !== 'indexed')
      problems.push(
        `${at}.processing_step: a document without "grant" is shared knowledge, always indexed; give it a grant to have it in ingest`,
      );
    if (step === 'failed' && !k.error) problems.push(`${at}.error: is required when processing_step is "failed"`);
    if (step !== 'failed' && k.error) problems.push(`${at}.error: only a document whose processing_step is "failed" has an error`);
    if (step !== 'indexed' && step !== 'failed' && k.created_at !== undefined)
      problems.push(`${at}.created_at: a document in ingest (${step}) starts at load time and moves on the clock; leave created_at out`);
    return {
      ...(k.id !== undefined ? { id: k.id } : {}),
      file_name: k.file_name,
      content: k.content,
      grant: k.grant,
      processing_step: step,
      created_at: time(k.created_at, `${at}.created_at`),
      error: k.error,
    };
  });

  const jobIds = new Set<string>();
  const jobs: Scenario['research_jobs'] = (raw.research_jobs ?? []).map((j, i) => {
    const at = `$.research_jobs[${i}]`;
    if (j.id !== undefined) unique(jobIds, j.id, `${at}.id`, 'job id');
    knownGrant(j.grant, `${at}.grant`);
    if (j.status === 'succeeded' && j.report === undefined) problems.push(`${at}.report: is required when status is "succeeded"`);
    if (j.status !== 'succeeded' && (j.report !== undefined || j.citations !== undefined))
      problems.push(`${at}: only a job whose status is "succeeded" has a report and citations`);
    if (j.status === 'failed' && !j.error) problems.push(`${at}.error: is required when status is "failed"`);
    if (j.status !== 'failed' && j.error) problems.push(`${at}.error: only a job whose status is "failed" has an error`);
    return { ...j, created_at: time(j.created_at, `${at}.created_at`) };
  });

  const charges: Scenario['charges'] = (raw.charges ?? []).map((c, i) => {
    knownGrant(c.grant, `$.charges[${i}].grant`);
    return { ...c, at: time(c.at, `$.charges[${i}].at`) };
  });

  if (problems.length > 0) fail(problems);
  return { file: path, sha256: hex(bytes), scenario: { clients: raw.clients ?? [], grants, knowledge, research_jobs: jobs, charges } };
}

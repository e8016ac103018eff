import { epochSeconds } from '../state/clock.js';
import type { CoreContext } from '../context.js';
import { newId } from '../state/crypto.js';
import { seedGrant } from '../oauth/grants-admin.js';
import {
  TRAINING_STEPS,
  type Citation,
  type JobTimings,
  type ResearchJob,
  type ResearchStatus,
  type TrainingDocument,
  type TrainingStep,
} from '../resources/jobs.js';
import type { ScenarioOrigin } from '../state/state.js';
import { markdownTitle } from '../resources/workspace.js';

/**
 * A scenario: what `serve --scenario FILE` preloads into a new state. This is the file's content once it was read
 * and checked (src/loaders/scenario.ts: JSON schema, cross references, persons); times are epoch milliseconds,
 * undefined meaning "when the state is created". The format is documented in the README ("Scenarios and snapshots").
 */
export interface Scenario {
  clients: Array<{ client_id: string; client_name: string; redirect_uris: string[] }>;
  grants: ScenarioGrant[];
  knowledge: ScenarioKnowledge[];
  research_jobs: ScenarioResearchJob[];
  charges: ScenarioCharge[];
}

export interface ScenarioGrant {
  /** The scenario's name for the grant, used as its id. */
  id: string;
  client_id: string;
  person_id: string;
  /** May include retired scopes (spec 2.7, 9): a legacy grant, which loses them at its first refresh. */
  scopes: string[];
  resource: 'mcp' | null;
  /** `aa1.<handle>.<secret>`; without it the grant has no token family (nothing can refresh it). */
  refresh_token?: string;
  status: 'active' | 'revoked';
  created_at?: number;
}

export interface ScenarioKnowledge {
  id?: string;
  file_name: string;
  content: string;
  /** The owning grant: a training document of its client and person. Without it, shared knowledge (every person). */
  grant?: string;
  processing_step: TrainingStep;
  created_at?: number;
  error?: { code: string; message: string };
}

export interface ScenarioResearchJob {
  id?: string;
  grant: string;
  question: string;
  status: ResearchStatus;
  created_at?: number;
  report?: string;
  citations?: Citation[];
  error?: { code: string; message: string };
}

export interface ScenarioCharge {
  grant: string;
  route: string;
  amount: number;
  at?: number;
  idempotency_key?: string;
}

/** A checked scenario and where it came from. */
export interface LoadedScenario extends ScenarioOrigin {
  scenario: Scenario;
}

/**
 * Fills a new state with a scenario, in file order: clients, grants (with their token families), knowledge,
 * research jobs, then charges (ledger lines and totals, durable with the core's next commit). The input was
 * checked when it was read; what still fails here (a refresh-token handle shared with a fixtures grant) throws.
 */
export function applyScenario(core: CoreContext, loaded: LoadedScenario, timings: JobTimings): void {
  const { scenario } = loaded;
  const now = core.clock.now();
  const state = core.state;
  for (const client of scenario.clients) {
    core.repo.put('clients', client.client_id, {
      client_id: client.client_id,
      client_id_issued_at: epochSeconds(now),
      client_name: client.client_name,
      redirect_uris: [...client.redirect_uris],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
  }
  for (const g of scenario.grants) {
    const client = state.clients[g.client_id]!;
    seedGrant(core, {
      id: g.id,
      client: { client_id: client.client_id, client_name: client.client_name, redirect_uris: client.redirect_uris },
      person_id: g.person_id,
      scopes: g.scopes,
      resource: g.resource,
      refresh_token: g.refresh_token,
      status: g.status,
      created_at: g.created_at,
    });
  }
  const grant = (id: string) => state.grants[id]!;
  for (const k of scenario.knowledge) {
    const id = k.id ?? newId('doc');
    if (k.grant === undefined) {
      core.repo.put('shared_knowledge', id, {
        id,
        title: markdownTitle(k.content, k.file_name),
        file_name: k.file_name,
        content: k.content,
      });
      continue;
    }
    const owner = grant(k.grant);
    const step = k.processing_step;
    const inProgress = step !== 'indexed' && step !== 'failed';
    // A document still in ingest is where the scenario says at load time, and moves on from there on the clock.
    const created = inProgress ? now - TRAINING_STEPS.indexOf(step) * timings.trainingStepMs : (k.created_at ?? now);
    const doc: TrainingDocument = {
      id,
      client_id: owner.client_id,
      grant_id: owner.id,
      person_id: owner.person_id,
      file_name: k.file_name,
      title: markdownTitle(k.content, k.file_name),
      content: k.content,
      size: Buffer.byteLength(k.content, 'utf8'),
      created_at: created,
      step_ms: timings.trainingStepMs,
      processing_step: step,
      ...(step === 'indexed' ? { indexed_at: created } : {}),
      ...(k.error ? { error: { ...k.error } } : {}),
    };
    core.repo.put('training_documents', id, doc);
  }
  for (const j of scenario.research_jobs) {
    const owner = grant(j.grant);
    const created = j.created_at ?? now;
    const done = j.status === 'succeeded' || j.status === 'failed';
    const queuedUntil = j.status === 'queued' ? created + timings.researchQueueMs : created;
    const job: ResearchJob = {
      id: j.id ?? newId('job'),
      client_id: owner.client_id,
      grant_id: owner.id,
      person_id: owner.person_id,
      question: j.question,
      status: j.status,
      created_at: created,
      // A finished job finished when it was created; an open one runs its usual course from then.
      queued_until: queuedUntil,
      running_until: done ? created : queuedUntil + timings.researchRunMs,
      ...(done ? { finished_at: created } : {}),
      ...(j.status === 'succeeded' ? { report: j.report, citations: (j.citations ?? []).map((c) => ({ ...c })) } : {}),
      ...(j.error ? { error: { ...j.error } } : {}),
    };
    core.repo.put('research_jobs', job.id, job);
  }
  for (const c of scenario.charges) {
    const owner = grant(c.grant);
    core.recordCharge({
      at: c.at ?? now,
      client_id: owner.client_id,
      grant_id: owner.id,
      route: c.route,
      amount: c.amount,
      unit: 'AKh',
      idempotency_key: c.idempotency_key ?? null,
    });
  }
  core.repo.setScenario({ file: loaded.file, sha256: loaded.sha256 });
}

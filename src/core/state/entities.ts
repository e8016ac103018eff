/**
 * The entity types the state holds beside the OAuth ones in state.ts: workspace records and knowledge documents, the
 * write actions a person decides, research jobs and training documents. They live in the lowest wing so that the state
 * and the repository import no wing above them; the resource modules re-export them beside their rules.
 */
import type { ResearchStatus, TrainingStep } from '../../protocol/jobs.js';
import type { VariantSelection } from './variant-catalogue.js';

/** Spec 2.7, 9: the seven kinds of the person's workspace that `ask` reads (once per-kind read scopes). */
export const WORKSPACE_KINDS = ['documents', 'contacts', 'places', 'work_items', 'listings', 'animals', 'letters'] as const;
export type WorkspaceKind = (typeof WORKSPACE_KINDS)[number];

/** A workspace record: `id` and `title` always; the other fields depend on the kind (see fixtures/workspace). */
export interface WorkspaceRecord {
  id: string;
  title: string;
  [field: string]: unknown;
}

export type Workspace = Record<WorkspaceKind, WorkspaceRecord[]>;

/** A Markdown document of the knowledge base (fixtures/knowledge, or a training document once indexed). */
export interface KnowledgeDocument {
  id: string;
  title: string;
  /** The name shown to people, e.g. `hausordnung.md`. */
  file_name: string;
  content: string;
  /** The person whose training document this is; absent for the shared knowledge base. */
  owner?: string;
}

/**
 * Spec 2.7 `workspace.write`, 4.4 rule 1: a change the agent asked for, which waits for the person.
 * pending → approved | rejected (the person, on `{auth_url}/actions/{id}`) → applied (continue_ask).
 */
export interface PendingAction {
  id: string;
  client_id: string;
  grant_id: string;
  person_id: string;
  question: string;
  kind: WorkspaceKind;
  operation: 'create' | 'update';
  /** The record changed (update) or the id the new record gets (create). */
  record_id: string;
  /** The fields written; for an update, only the changed ones. */
  fields: Record<string, string>;
  /** For an update: the values before, to show the person what changes. */
  before?: Record<string, string>;
  /** German, exactly what will change. */
  description: string;
  status: 'pending' | 'approved' | 'rejected' | 'applied';
  created_at: number;
  decided_at?: number;
  applied_at?: number;
}

/** One applied change, kept in the state file and replayed over the fixtures on start. */
export interface WorkspaceChange {
  action_id: string;
  at: number;
  kind: WorkspaceKind;
  operation: 'create' | 'update';
  record: WorkspaceRecord;
}

/** A research citation (spec 2.5: element shape not shown; README): `citations[n - 1]` is `[n]` in the report (compose.ts). */
export interface Citation {
  id: string;
  title: string;
  file_name: string;
  snippet: string;
}

export interface ResearchJob {
  id: string;
  client_id: string;
  grant_id: string;
  /** The person the job runs for: it searches what that person may see, and only they see it. */
  person_id: string;
  question: string;
  status: ResearchStatus;
  created_at: number;
  /** Planned on creation: queued until, running until (emulator clock). */
  queued_until: number;
  running_until: number;
  finished_at?: number;
  report?: string;
  citations?: Citation[];
  error?: { code: string; message: string };
  /** A research_fail fault (emulator control) that makes this job fail when it would finish. */
  fault_id?: string;
  /** With --vary-unspecified: the variants this job is shown in, fixed at creation. */
  variation?: VariantSelection<'research'>;
}

export interface TrainingDocument {
  id: string;
  client_id: string;
  grant_id: string;
  person_id: string;
  file_name: string;
  title: string;
  content: string;
  size: number;
  created_at: number;
  /** Time each step takes on the emulator clock. */
  step_ms: number;
  processing_step: TrainingStep;
  indexed_at?: number;
  error?: { code: string; message: string };
  /** With --vary-unspecified: the variants this document is shown in, fixed at creation. */
  variation?: VariantSelection<'training'>;
}

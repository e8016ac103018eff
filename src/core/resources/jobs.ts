import type { VariantSelection } from '../emulation/variant-catalogue.js';
import { TRAINING_STEPS, type ResearchStatus, type TrainingStep } from '../../protocol/jobs.js';

export { TRAINING_STEPS, type ResearchStatus, type TrainingStep } from '../../protocol/jobs.js';

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

export interface JobTimings {
  /** Research: time queued, then time running (real service: one to several minutes). */
  researchQueueMs: number;
  researchRunMs: number;
  /** Training: time per processing step. */
  trainingStepMs: number;
}

export const QUICK_TIMINGS: JobTimings = { researchQueueMs: 1_000, researchRunMs: 4_000, trainingStepMs: 500 };
export const REALISTIC_TIMINGS: JobTimings = { researchQueueMs: 5_000, researchRunMs: 120_000, trainingStepMs: 5_000 };

/** Where a training document stands at `now`, from its creation time and step length. */
export function trainingStepAt(doc: TrainingDocument, now: number): TrainingStep {
  if (doc.processing_step === 'failed' || doc.processing_step === 'indexed') return doc.processing_step;
  const index = Math.min(TRAINING_STEPS.length - 1, Math.floor((now - doc.created_at) / doc.step_ms));
  return TRAINING_STEPS[Math.max(0, index)]!;
}

/** Content that is not text fails at parsing (the service cannot read it). */
export const unreadable = (content: string): boolean => /[\u0000-\u0008\u000b\u000c\u000e-\u001f]/.test(content);

import { TRAINING_STEPS, type TrainingStep } from '../../protocol/jobs.js';
import type { TrainingDocument } from '../state/entities.js';

export { TRAINING_STEPS, type ResearchStatus, type TrainingStep } from '../../protocol/jobs.js';
export type { Citation, ResearchJob, TrainingDocument } from '../state/entities.js';

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

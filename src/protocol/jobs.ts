/** Spec 2.5, 3.1: `queued` and `succeeded` are given; `running` and `failed` are the emulator's (README, table of choices). */
export type ResearchStatus = 'queued' | 'running' | 'succeeded' | 'failed';

/** Spec 2.6: `processing_step` values (not shown in the spec; documented in the README's table of choices). */
export const TRAINING_STEPS = ['received', 'parsing', 'chunking', 'indexing', 'indexed'] as const;
export type TrainingStep = (typeof TRAINING_STEPS)[number] | 'failed';

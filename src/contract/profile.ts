import { writeFile } from 'node:fs/promises';
import { recordProfile } from '../core/emulation/variant-profile.js';
import type { ServerRun } from './run.js';

/**
 * `--record-profile FILE`: what the run saw where the spec says "not shown", per dimension of `--vary-unspecified`
 * (src/core/emulation/variant-profile.ts names the variants), with the run's observations beside them, for `serve --profile`.
 */
export async function writeProfile(file: string, run: ServerRun, now: number): Promise<void> {
  const profile = recordProfile(run.responses, {
    server: run.report.base_url ?? '',
    recordedAt: new Date(now).toISOString(),
    observations: run.report.observations,
  });
  await writeFile(file, `${JSON.stringify(profile, null, 2)}\n`);
}

import { writeFile } from 'node:fs/promises';
import type { ServerRun } from './run.js';

/** `--record-profile FILE`: waits for the profile module of issue 43 (src/core/variant-profile.ts). */
export async function writeProfile(file: string, run: ServerRun, now: number): Promise<void> {
  const profile = {
    version: 1,
    server: run.report.base_url,
    recorded_at: new Date(now).toISOString(),
    observations: run.report.observations,
  };
  await writeFile(file, `${JSON.stringify(profile, null, 2)}\n`);
}

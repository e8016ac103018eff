/**
 * The client's progress lines (`research --wait`, `train --wait`) as a terminal and a log see them; written to a
 * context in memory, on a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { Progress } from '../../src/client/progress.js';
import { ManualClock } from '../../src/core/state/clock.js';
import { memoryContext } from '../helpers/client.js';

describe('terminal conventions', () => {
  it('progress lines animate only on a terminal without NO_COLOR; elsewhere they are plain lines', async () => {
    const shown = (isTTY: boolean, env: NodeJS.ProcessEnv) => {
      let text = '';
      const ctx = memoryContext({ clock: new ManualClock(), env });
      ctx.stderr = { write: (s: string) => (text += s), isTTY };
      const progress = new Progress(ctx, 'research job_1: queued');
      progress.update('research job_1: queued');
      progress.update('research job_1: running');
      progress.stop('done');
      return text;
    };
    expect(shown(true, {})).toMatch(/\r\x1b\[2K. research job_1: running 0s/);
    expect(shown(true, { NO_COLOR: '1' })).toBe('research job_1: queued\nresearch job_1: running\ndone\n');
    expect(shown(false, {})).toBe('research job_1: queued\nresearch job_1: running\ndone\n');
  });
});

import { age } from '../../protocol/format.js';
import { TRAINING_STEPS } from '../../protocol/jobs.js';
import { clientName } from '../model.js';
import { clockTime, line, newestFirst, type Tone, type View } from './common.js';

/** A job's row colour: failed, done, or still running. */
const toneOf = (failed: boolean, done: boolean): Tone => (failed ? 'alarm' : done ? 'ok' : 'normal');

/** `■■■□□` for the steps done of a fixed sequence; a failed job shows where it stopped. */
function progress(steps: readonly string[], current: string): string {
  const at = steps.indexOf(current);
  const done = at < 0 ? 0 : at + 1;
  return current === 'failed' ? '✖' : '■'.repeat(done) + '□'.repeat(steps.length - done);
}

/** The Jobs view: research jobs and training documents together, newest first, with their progress. */
export const jobs: View = {
  title: 'Jobs',
  table(state) {
    const research = Object.values(state.research).map((j) => ({
      key: j.id,
      created_at: j.created_at,
      cells: [
        'research',
        j.status,
        progress(['queued', 'running', 'succeeded'], j.status),
        age((j.finished_at ?? state.now) - j.created_at),
        clientName(state, j.client_id),
        j.question,
      ],
      tone: toneOf(j.status === 'failed', j.status === 'succeeded'),
    }));
    const training = Object.values(state.training).map((d) => ({
      key: d.id,
      created_at: d.created_at,
      cells: [
        'training',
        d.processing_step,
        progress(TRAINING_STEPS, d.processing_step),
        age((d.finished_at ?? state.now) - d.created_at),
        clientName(state, d.client_id),
        d.file_name,
      ],
      tone: toneOf(d.processing_step === 'failed', d.processing_step === 'indexed'),
    }));
    return {
      headers: ['KIND', 'STATUS', 'PROGRESS', 'ELAPSED', 'CLIENT', 'WHAT'],
      widths: [8, 9, 8, 8, 14, 27],
      rows: newestFirst([...research, ...training]).map(({ key, cells, tone }) => ({ key, cells, tone })),
    };
  },
  detail(state, key) {
    const j = state.research[key];
    if (j) {
      return [
        line(`research job ${j.id}`),
        line(`client   ${clientName(state, j.client_id)}   grant ${j.grant_id}`),
        line(`question ${j.question}`),
        line(
          `status   ${j.status}  ${progress(['queued', 'running', 'succeeded'], j.status)}`,
          j.status === 'failed' ? 'alarm' : j.status === 'succeeded' ? 'ok' : 'normal',
        ),
        line(
          `created  ${clockTime(j.created_at)}   ${
            j.finished_at ? `finished ${clockTime(j.finished_at)} after` : 'running for'
          } ${age((j.finished_at ?? state.now) - j.created_at)}`,
        ),
        ...(j.error ? [line(`error    ${j.error}`, 'alarm')] : []),
      ];
    }
    const d = state.training[key];
    if (!d) return [];
    return [
      line(`training document ${d.id}`),
      line(`client   ${clientName(state, d.client_id)}   grant ${d.grant_id}`),
      line(`file     ${d.file_name} (${d.size} bytes)`),
      line(
        `step     ${TRAINING_STEPS.map((s) => (s === d.processing_step ? `[${s}]` : s)).join(' › ')}` +
          `${d.processing_step === 'failed' ? ' › [failed]' : ''}`,
        d.processing_step === 'failed' ? 'alarm' : d.processing_step === 'indexed' ? 'ok' : 'normal',
      ),
      line(
        `created  ${clockTime(d.created_at)}   ${
          d.finished_at ? `done ${clockTime(d.finished_at)} after` : 'running for'
        } ${age((d.finished_at ?? state.now) - d.created_at)}`,
      ),
      ...(d.error ? [line(`error    ${d.error}`, 'alarm')] : []),
    ];
  },
};

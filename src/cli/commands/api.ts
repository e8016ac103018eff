import { readFile } from 'node:fs/promises';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Command, Option } from 'commander';
import type { ClientContext } from '../../client/context.js';
import type { ApiResponse } from '../../client/http.js';
import type { Session } from '../../client/session.js';
import { CliError, EXIT } from '../errors.js';
import { jsonText } from '../output.js';
import { textOf } from '../../protocol/format.js';
import { withSession } from './client.js';
import { secondsFlag } from '../seconds.js';

interface CallFlags {
  baseUrl?: string;
  json?: boolean;
  idempotencyKey?: string;
}

interface WaitFlags extends CallFlags {
  wait?: boolean;
  interval: number;
  timeout: number;
}

const common = (command: Command): Command =>
  command
    .addOption(
      new Option(
        '--base-url <url>',
        'the service ({base_url}); default $AGENT_ACCESS_BASE_URL, else an emulator running here, else the last login',
      ),
    )
    .option(
      '--idempotency-key <key>',
      'send Idempotency-Key: a retry with the same key and body returns the stored answer and is not charged again (spec 4.4 rule 5)',
    )
    .option('--json', 'print the service’s JSON answer');

const waiting = (command: Command, what: string): Command =>
  command
    .option('--wait', `poll until the ${what} is done, showing progress`)
    .option(
      '--interval <duration>',
      'time between polls, e.g. 5s (a bare number is seconds; a Retry-After from the server wins)',
      secondsFlag({ min: 0.001 }),
      2,
    )
    .option(
      '--timeout <duration>',
      'stop waiting after this long, e.g. 15m (a bare number is seconds; the job goes on at the server)',
      secondsFlag({ min: 0.001 }),
      900,
    );

/** Spec 2.6 leaves processing_step values open: these end the wait as done (the emulator says "indexed"). */
export const FINISHED_STEPS = new Set(['indexed', 'done', 'completed', 'complete', 'succeeded', 'ready', 'processed', 'available']);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One line for a source or citation, whose shape the spec does not show: its title and id when it has them. */
export function describeReference(item: unknown): string {
  if (!isObject(item)) return typeof item === 'string' ? item : JSON.stringify(item);
  const title = [item.title, item.name, item.file_name].find((v) => typeof v === 'string');
  const kind = typeof item.kind === 'string' ? `[${item.kind}] ` : '';
  const id = typeof item.id === 'string' ? ` (${item.id})` : '';
  return title ? `${kind}${title}${id}` : JSON.stringify(item);
}

const text = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value, null, 2));

/** ask, research, train: the REST allowlist of spec 4.4 from the terminal. */
export function apiCommands(ctx: ClientContext): Command[] {
  const out = (s: string) => void ctx.stdout.write(s);

  const ask = common(new Command('ask'))
    .description('POST /chat/ask: ask a question against the workspace and knowledge base (answers in German; charged without a key)')
    .argument('<question>', 'the question')
    .action(async (question: string, flags: CallFlags) => {
      const res = await withSession(ctx, flags, (session) =>
        session.call({ method: 'POST', path: '/chat/ask', body: { question }, ...key(flags) }),
      );
      if (flags.json) return out(jsonText(res.body));
      const body = asObject(res);
      const sources = Array.isArray(body.sources) ? body.sources : [];
      out(`${text(body.answer)}\n`);
      // Numbered as the emulator's answer cites them ([1] is the first source), like research citations.
      if (sources.length) out(`\nSources:\n${sources.map((s, i) => `  [${i + 1}] ${describeReference(s)}`).join('\n')}\n`);
      ctx.stderr.write(`message_id: ${String(body.message_id)}\n`);
    });

  const research = waiting(common(new Command('research')), 'report')
    .description('POST /research: start a research report (charged in AKh), or with --job follow one; --wait polls until it is done')
    .argument('[question]', 'the question to research')
    .option('--job <job_id>', 'follow an existing job instead of starting one')
    .action(async (question: string | undefined, flags: WaitFlags & { job?: string }) => {
      if (!question && !flags.job) throw new CliError('give a question to research, or --job JOB_ID to follow a job', EXIT.usage);
      if (question && flags.job) throw new CliError('give either a question or --job, not both', EXIT.usage);
      await withSession(ctx, flags, async (session) => {
        let job: Record<string, unknown>;
        if (flags.job) {
          job = asObject(await session.call({ method: 'GET', path: `/research/${encodeURIComponent(flags.job)}` }));
        } else {
          job = asObject(await session.call({ method: 'POST', path: '/research', body: { question }, ...key(flags) }));
          if (!flags.wait) {
            if (flags.json) return out(jsonText(job));
            out(`${String(job.job_id)}\n`);
            ctx.stderr.write(
              `research job ${String(job.job_id)} is ${String(job.status)}; follow it with \`agent-access research --job ${String(job.job_id)} --wait\`\n`,
            );
            return;
          }
        }
        const jobId = textOf(job.job_id ?? flags.job);
        const poll = typeof job.poll === 'string' && job.poll.startsWith('/') ? job.poll : `/research/${encodeURIComponent(jobId)}`;
        if (flags.wait)
          job = await pollUntil(session, flags, poll, `research ${jobId}`, (j) =>
            j.status === 'succeeded' ? 'done' : j.error != null ? 'failed' : textOf(j.status, 'unknown'),
          );
        if (flags.json) out(jsonText(job));
        if (job.error != null) throw new CliError(`research job ${jobId} failed: ${describeError(job.error)}`, EXIT.failure, 'job_failed');
        if (flags.json) return;
        if (job.status !== 'succeeded') {
          out(`${jobId}\n`);
          ctx.stderr.write(`research job ${jobId} is ${String(job.status)}\n`);
          return;
        }
        out(`${text(job.report)}\n`);
        const citations = Array.isArray(job.citations) ? job.citations : [];
        if (citations.length) out(`\nCitations:\n${citations.map((c, i) => `  [${i + 1}] ${describeReference(c)}`).join('\n')}\n`);
      });
    });

  const train = waiting(common(new Command('train')), 'document')
    .description('POST /training: add a document to the knowledge base; --wait follows processing_step until it is indexed')
    .argument('<file>', 'a text or Markdown file')
    .option('--file-name <name>', 'file_name to send (default: the file’s own name)')
    .action(async (file: string, flags: WaitFlags & { fileName?: string }) => {
      let content: string;
      try {
        content = await readFile(file, 'utf8');
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        const why =
          code === 'ENOENT'
            ? `no such file: ${file}`
            : code === 'EISDIR'
              ? `${file} is a folder, not a file`
              : code === 'EACCES' || code === 'EPERM'
                ? `cannot read ${file}: permission denied`
                : `cannot read ${file}: ${code ?? (e as Error).message}`;
        throw new CliError(why, EXIT.failure, 'file_unreadable');
      }
      await withSession(ctx, flags, async (session) => {
        const accepted = asObject(
          await session.call({
            method: 'POST',
            path: '/training',
            body: { file_name: flags.fileName ?? basename(file), content },
            ...key(flags),
          }),
        );
        const id = [accepted.document_id, accepted.job_id, accepted.id].find((v): v is string => typeof v === 'string');
        if (!id) throw new CliError(`POST /training answered without a document id: ${JSON.stringify(accepted)}`, EXIT.server);
        if (!flags.wait) {
          if (flags.json) return out(jsonText(accepted));
          out(`${id}\n`);
          ctx.stderr.write(`accepted: document ${id} (${textOf(accepted.processing_step, 'processing')}); it is findable once indexed\n`);
          return;
        }
        const path = `/training/${encodeURIComponent(id)}`;
        const doc = await pollUntil(session, flags, path, `training ${id}`, (d) => {
          const step = textOf(d.processing_step, 'unknown');
          return FINISHED_STEPS.has(step) ? 'done' : d.error != null || step === 'failed' ? 'failed' : step;
        });
        if (doc.error != null || doc.processing_step === 'failed') {
          if (flags.json) out(jsonText(doc));
          throw new CliError(
            `training document ${id} failed at processing: ${describeError(doc.error ?? doc.processing_step)}`,
            EXIT.failure,
            'job_failed',
          );
        }
        const link = asObject(await session.call({ method: 'GET', path: `${path}/url` }));
        if (flags.json) return out(jsonText({ ...doc, link }));
        out(`${id}\n`);
        // The response's field names are not in the spec: any absolute http(s) URL in it is the link.
        const href = Object.values(link).find((v): v is string => typeof v === 'string' && /^https?:\/\/\S+$/.test(v));
        ctx.stderr.write(`document ${id} is ${String(doc.processing_step)}${href ? `; open it at ${href}` : ''}\n`);
      });
    });

  /**
   * Polls a job resource until `classify` says done or failed, with a progress line showing its state and
   * the elapsed time. Polling is free (spec 1); GETs ride out 429s in the HTTP client.
   */
  async function pollUntil(
    session: Session,
    flags: WaitFlags,
    path: string,
    label: string,
    classify: (body: Record<string, unknown>) => string,
  ): Promise<Record<string, unknown>> {
    const { Progress } = await import('../../client/progress.js');
    const progress = new Progress(ctx, `${label}: waiting`);
    const deadline = Date.now() + flags.timeout * 1_000;
    let interrupted = false;
    const wake = new AbortController();
    const off = ctx.onInterrupt?.(() => {
      interrupted = true;
      wake.abort();
    });
    try {
      for (;;) {
        const res = await session.call({ method: 'GET', path });
        const body = asObject(res);
        const state = classify(body);
        if (state === 'done' || state === 'failed') {
          progress.stop(
            `${label}: ${state === 'done' ? textOf(body.status ?? body.processing_step, 'done') : 'failed'} after ${progress.elapsed}`,
          );
          return body;
        }
        progress.update(`${label}: ${state}`);
        const retryAfter = Number(res.headers['retry-after']);
        const pause = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1_000 : flags.interval * 1_000;
        if (Date.now() + pause > deadline) {
          throw new CliError(
            `${label} is still ${state} after ${progress.elapsed}; it goes on at the server (follow it again later)`,
            EXIT.failure,
            'wait_timed_out',
          );
        }
        await sleep(pause, undefined, { signal: wake.signal }).catch(() => undefined);
        if (interrupted) throw new CliError(`stopped waiting; ${label} goes on at the server`, EXIT.interrupted, 'wait_cancelled');
      }
    } finally {
      progress.stop();
      off?.();
    }
  }

  return [ask, research, train];
}

const key = (flags: CallFlags) => (flags.idempotencyKey !== undefined ? { idempotencyKey: flags.idempotencyKey } : {});

function asObject(res: ApiResponse): Record<string, unknown> {
  if (!isObject(res.body))
    throw new CliError(`the service answered ${res.status} without a JSON object: ${res.text.slice(0, 200)}`, EXIT.server);
  return res.body;
}

function describeError(error: unknown): string {
  if (isObject(error))
    return [error.code, error.message ?? error.detail].filter((v) => typeof v === 'string').join(': ') || JSON.stringify(error);
  return text(error);
}

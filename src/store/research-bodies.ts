import { closeSync, openSync, readSync } from 'node:fs';
import { frozen } from '../core/immutable.js';
import { setOwn } from '../core/repository.js';
import type { Citation, ResearchJob } from '../core/jobs.js';

/**
 * Finished research jobs' reports and citations left in the state file instead of on the heap (docs/storage.md
 * "Reports stay in the state file"). They are most of a large state (docs/storage.md) and are read
 * only when their job is polled. A job read from the state file, or written into it by a compaction, keeps its
 * other fields; `report` and `citations` become getters that read its entry back from the file.
 */

/** An open state file that cold jobs read from. Its inode stays readable after a compaction renames a new file over it. */
export class BodySource {
  #fd: number;
  /** The last body read: a poll reads `report` and `citations` one after the other. */
  #last: { offset: number; body: Body } | null = null;

  constructor(readonly file: string) {
    this.#fd = openSync(file, 'r');
  }

  /** The job's entry as the file holds it, `length` bytes at `offset`. */
  body(offset: number, length: number, id: string): Body {
    if (this.#last?.offset === offset) return this.#last.body;
    if (this.#fd < 0) throw new Error(`research job "${id}": its report was read from ${this.file}, which is closed`);
    const bytes = Buffer.allocUnsafe(length);
    for (let read = 0; read < length;) {
      const n = readSync(this.#fd, bytes, read, length - read, offset + read);
      if (n === 0) throw new Error(`research job "${id}": ${this.file} ends before its entry`);
      read += n;
    }
    const entry = JSON.parse(bytes.toString('utf8')) as Partial<ResearchJob>;
    if (entry.id !== id || typeof entry.report !== 'string' || !Array.isArray(entry.citations))
      throw new Error(`research job "${id}": ${this.file} holds something else at byte ${offset}`);
    const body: Body = { report: entry.report, citations: frozen(entry.citations) };
    this.#last = { offset, body };
    return body;
  }

  /** The open file's descriptor (-1 once closed), for the writer thread to copy entries from. */
  get fd(): number {
    return this.#fd;
  }

  close(): void {
    if (this.#fd < 0) return;
    closeSync(this.#fd);
    this.#fd = -1;
    this.#last = null;
  }
}

interface Body {
  report: string;
  citations: readonly Citation[];
}

/** Where a cold job's entry is: what a compaction copies byte for byte instead of serialising it. */
export interface BodyLocation {
  source: BodySource;
  offset: number;
  length: number;
}

const locations = new WeakMap<object, BodyLocation>();

/** The location of a cold job's entry, or undefined for a job held whole. */
export const locationOf = (job: unknown): BodyLocation | undefined =>
  typeof job === 'object' && job !== null ? locations.get(job) : undefined;

/** Whether a job's entry may be left in the file: it succeeded, so it has a report and never changes again. */
export const isColdable = (job: ResearchJob): boolean =>
  // A cold job first: asking it for its report would read it from the file.
  locations.has(job) || (job.status === 'succeeded' && typeof job.report === 'string' && Array.isArray(job.citations));

function bodyOf(job: object): Body {
  const at = locations.get(job)!;
  return at.source.body(at.offset, at.length, (job as ResearchJob).id);
}

// Shared by every cold job. Enumerable own getters, so that JSON.stringify and a spread see the fields as before.
const REPORT: PropertyDescriptor = {
  enumerable: true,
  get(this: object) {
    return bodyOf(this).report;
  },
};
const CITATIONS: PropertyDescriptor = {
  enumerable: true,
  get(this: object) {
    return bodyOf(this).citations;
  },
};

/** A cold job's entry is now at `offset` in `source` (a compaction copied it there); false for a job held whole. */
export function moveJob(job: ResearchJob, source: BodySource, offset: number, length: number): boolean {
  if (!locations.has(job)) return false;
  locations.set(job, { source, offset, length });
  return true;
}

/**
 * `job` (whole, or cold already) as a frozen job whose report and citations are read from `offset` in `source`,
 * where its entry's JSON text is, `length` bytes long.
 */
export function coldJob(job: ResearchJob, source: BodySource, offset: number, length: number): ResearchJob {
  const head: Record<string, unknown> = {};
  // Own data fields only: reading the getters of a cold job would read its body.
  for (const key of Object.keys(job)) {
    if (key === 'report' || key === 'citations') continue;
    setOwn(head, key, (job as unknown as Record<string, unknown>)[key]);
  }
  return coldHead(head, source, offset, length);
}

/** coldJob for a job's other fields, just parsed: `head` itself becomes the cold job. */
export function coldHead(head: Record<string, unknown>, source: BodySource, offset: number, length: number): ResearchJob {
  for (const value of Object.values(head)) frozen(value);
  Object.defineProperty(head, 'report', REPORT);
  Object.defineProperty(head, 'citations', CITATIONS);
  locations.set(head, { source, offset, length });
  return Object.freeze(head) as unknown as ResearchJob;
}

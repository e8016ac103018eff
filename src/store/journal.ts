import { StateFileError } from '../core/state/errors.js';
import { resetAdvice } from './state-files.js';
import type { Change } from '../core/state/repository.js';

/** One commit in the journal: its number (consecutive, from 1) and the changes it made. One JSON line each. */
export interface JournalRecord {
  seq: number;
  changes: Change[];
}

export const journalLine = (record: JournalRecord): string => `${JSON.stringify(record)}\n`;

/**
 * Reads a journal's text. A commit is durable once its whole line is synced; a crash during an append can leave
 * a last line that is cut short or unreadable: that commit was never acknowledged, and it is dropped (`dropped`
 * counts its bytes). An unreadable line with whole records after it, or numbers that are not consecutive, mean
 * the file was damaged or edited: refused with a message that names it.
 */
export function parseJournal(text: string, file: string, stateFile: string): { records: JournalRecord[]; dropped: number } {
  const records: JournalRecord[] = [];
  const lines = text.split('\n');
  // The text after the last newline is a torn append (or nothing).
  let dropped = Buffer.byteLength(lines.pop() ?? '', 'utf8');
  const damaged = (line: number, what: string) =>
    new StateFileError(
      file,
      `journal ${file} is damaged at line ${line}: ${what}. It belongs to state file ${stateFile}. ${resetAdvice(stateFile)}`,
    );
  for (const [i, line] of lines.entries()) {
    let record: unknown;
    try {
      record = JSON.parse(line);
    } catch {
      record = undefined;
    }
    const valid =
      typeof record === 'object' &&
      record !== null &&
      Number.isSafeInteger((record as JournalRecord).seq) &&
      Array.isArray((record as JournalRecord).changes);
    if (!valid) {
      // Only the last line may be a torn append.
      if (i === lines.length - 1) {
        dropped += Buffer.byteLength(line, 'utf8') + 1;
        break;
      }
      throw damaged(i + 1, 'not a journal record');
    }
    const seq = (record as JournalRecord).seq;
    const previous = records.at(-1);
    if (previous && seq !== previous.seq + 1) throw damaged(i + 1, `record ${seq} follows record ${previous.seq}`);
    records.push(record as JournalRecord);
  }
  return { records, dropped };
}

import { plural } from '../protocol/format.js';
import { readFile } from 'node:fs/promises';
import { addAmount, ledgerChain, type ChargeEntry, type ChargeTotals } from '../core/charges.js';
import { moveAwayCommand, shellQuoted } from '../core/state-files.js';
import { StateFileError } from '../core/errors.js';
import { writeFileDurably } from './durable-write.js';

/**
 * The charge ledger beside a state file (`state.charges.jsonl`): one ChargeEntry a line, line n being seq n. A
 * commit appends its lines (and syncs them) before its journal record, so after a crash the
 * ledger may hold lines beyond the state's `charges.count`: those were never committed (no answer went out for
 * them) and are dropped. A clean stop removes the journal, and a commit has one before it appends: without a
 * journal, lines beyond the count were acknowledged (the state file is older than the ledger) and are refused.
 * Everything else that disagrees is refused too: the two files must come from one history.
 */

const ENTRY_KEYS = ['seq', 'at', 'client_id', 'grant_id', 'route', 'amount', 'unit', 'idempotency_key'] as const;

/** Ledger text cut into lines: `lines` each ended by a newline; `torn` what follows the last newline ('' if nothing). */
export interface LedgerLines {
  lines: string[];
  /** A last line without its newline: a write torn by a crash. Never committed. */
  torn: string;
}

export function splitLedger(text: string): LedgerLines {
  const parts = text.split('\n');
  const torn = parts.pop() ?? '';
  return { lines: parts, torn };
}

/** `line` parsed as the ledger entry `seq`, or why it is not one. */
function parseLine(line: string, seq: number): ChargeEntry | string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return line.length === 0 ? 'it is empty' : 'it is not JSON';
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'it is not a JSON object';
  const entry = value as Record<string, unknown>;
  const unknown = Object.keys(entry).filter((k) => !(ENTRY_KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) return `it has unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}`;
  if (entry.seq !== seq) return `its seq is ${JSON.stringify(entry.seq)}, not its line number ${seq}`;
  if (typeof entry.at !== 'number' || !Number.isFinite(entry.at)) return '"at" is not a time in ms';
  for (const key of ['client_id', 'grant_id', 'route'] as const) {
    if (typeof entry[key] !== 'string' || entry[key] === '') return `"${key}" is not a non-empty string`;
  }
  if (typeof entry.amount !== 'number' || !Number.isFinite(entry.amount)) return '"amount" is not a number';
  if (entry.unit !== 'AKh') return `"unit" is ${JSON.stringify(entry.unit)}, not "AKh"`;
  if (entry.idempotency_key !== null && typeof entry.idempotency_key !== 'string') return '"idempotency_key" is neither a string nor null';
  return entry as unknown as ChargeEntry;
}

/** What is wrong with line `seq`, as refusals say it. */
const lineProblem = (seq: number, problem: string) => `line ${seq} is not charge seq ${seq}: ${problem}`;

/** Thrown by parseLedgerLines: line `seq` is not a ledger entry. */
export class LedgerLineError extends Error {
  readonly seq: number;
  constructor(seq: number, problem: string) {
    super(lineProblem(seq, problem));
    this.seq = seq;
  }
}

/** Parses complete ledger lines strictly: line i (from 0) must be the ChargeEntry with seq i + 1 and typed fields. */
export function parseLedgerLines(lines: readonly string[]): ChargeEntry[] {
  return lines.map((line, i) => {
    const entry = parseLine(line, i + 1);
    if (typeof entry === 'string') throw new LedgerLineError(i + 1, entry);
    return entry;
  });
}

/** A ledger parsed line by line: `entries[i]` is line i as charge seq i + 1, or why it is not one. */
interface ParsedLedger extends LedgerLines {
  entries: Array<ChargeEntry | string>;
}

/** `text` (null: no ledger file) as a ParsedLedger. */
function parseLedger(text: string | null): ParsedLedger {
  const { lines, torn } = splitLedger(text ?? '');
  return { lines, torn, entries: lines.map((line, i) => parseLine(line, i + 1)) };
}

/**
 * What the writer thread tells of a large ledger it read at a start, while the main thread read the state file:
 * enough to accept a ledger that matches the state as it is without reading it again (see ledgerMatches).
 */
export interface LedgerSummary {
  /** Complete lines. */
  lines: number;
  /** A last line without its newline. */
  torn: boolean;
  /** The sums of all lines per client and per grant; null when a line is not the entry of its seq. */
  sums: { client_id: Map<string, number>; grant_id: Map<string, number> } | null;
  /** All complete lines chained (ChargeTotals.ledger_chain). */
  chain: string | undefined;
}

export function summarizeLedger(text: string | null): LedgerSummary {
  const { lines, torn, entries } = parseLedger(text);
  const valid = entries.every((entry) => typeof entry !== 'string');
  return {
    lines: lines.length,
    torn: torn.length > 0,
    sums: valid ? { client_id: sumBy(entries, 'client_id'), grant_id: sumBy(entries, 'grant_id') } : null,
    chain: valid ? ledgerChain(lines) : undefined,
  };
}

/**
 * Whether a ledger so summarized is one reconcileLedger accepts as it is, nothing to drop: every line committed,
 * each the entry of its seq, summing to the totals. Anything else (a refusal, uncommitted lines) is reconcileLedger's
 * to say.
 */
export function ledgerMatches(summary: LedgerSummary, totals: ChargeTotals): boolean {
  if (!summary.sums || summary.torn || summary.lines !== totals.count) return false;
  if (totals.ledger_chain !== undefined && summary.chain !== totals.ledger_chain) return false;
  return sameSums(summary.sums.client_id, totals.by_client) && sameSums(summary.sums.grant_id, totals.by_grant);
}

function sameSums(sums: ReadonlyMap<string, number>, recorded: Readonly<Record<string, number>>): boolean {
  if (Object.keys(recorded).length !== sums.size) return false;
  for (const [name, sum] of sums) if (!Object.hasOwn(recorded, name) || recorded[name] !== sum) return false;
  return true;
}

/** What reconcileLedger found: the committed lines are the ledger's first `committed`; `uncommitted` follow them. */
export interface Reconciled {
  committed: number;
  /** Lines beyond the committed count (a torn last line included): written by a commit that never completed. */
  uncommitted: number;
  /** The ledger text without them (set when uncommitted > 0). */
  keep: string | null;
  /** The committed lines chained (ChargeTotals.ledger_chain): what a state without it takes. */
  chain: string | undefined;
}

const sumBy = (entries: readonly ChargeEntry[], key: 'client_id' | 'grant_id'): Map<string, number> => {
  const sums = new Map<string, number>();
  for (const e of entries) sums.set(e[key], addAmount(sums.get(e[key]) ?? 0, e.amount));
  return sums;
};

const seqRange = (from: number, to: number) => (from === to ? `seq ${from}` : `seq ${from}–${to}`);

/**
 * Checks that the ledger belongs to the state: the first `totals.count` lines exist, each is the entry of its seq,
 * and they sum per client and per grant (in thousandths, as recordCharge adds) to the state's totals. Lines
 * beyond the count are uncommitted and reported for dropping when `afterCrash` (there is a journal: the last
 * process on these files did not stop cleanly); after a clean stop they were acknowledged, and are refused.
 * `totals` null: there is no state file; `ledger` null: there is no ledger file. Anything else that disagrees throws a StateFileError that
 * names both files, what disagrees, and the way out; nothing is written here.
 */
export function reconcileLedger(
  stateFile: string,
  ledgerFile: string,
  totals: ChargeTotals | null,
  ledger: string | null,
  afterCrash: boolean,
): Reconciled {
  const { lines, torn, entries: parsed } = parseLedger(ledger);
  const count = totals?.count ?? 0;
  const refuse = (what: string, wayOut = bothWaysOut(stateFile)) =>
    new StateFileError(
      stateFile,
      `charge ledger ${ledgerFile} does not belong to state file ${stateFile}: ${what}. Nothing was changed. ${wayOut}`,
    );
  if (!Number.isSafeInteger(count) || count < 0)
    throw refuse(`the state's charges.count is ${JSON.stringify(count)}, not a number of lines`);
  // An old ledger beside a state that counts none of it: the state was replaced or moved away. Or, with a state
  // and a journal, its first charges' commit was cut short: dropped below like any commit's.
  if (count === 0 && lines.length > 0 && !(totals && afterCrash)) {
    const what = `the ledger holds ${plural(lines.length, 'charge line')} (${seqRange(1, lines.length)}), but ${
      totals ? 'the state records no charges' : 'there is no state file'
    }`;
    if (totals) throw refuse(what);
    throw refuse(
      what,
      `Put back the state file these charges belong to, restoring both files from the same backup or snapshot; or, to start over ` +
        `without them, move the ledger away as well: mv ${shellQuoted(ledgerFile)} ${shellQuoted(`${ledgerFile}.bak`)}`,
    );
  }
  if (count > 0 && ledger === null) throw refuse(`the ledger is missing, and the state counts ${plural(count, 'charge')}`);
  if (lines.length < count)
    throw refuse(
      `the ledger holds ${plural(lines.length, 'complete line')}, but the state ` +
        `counts ${plural(count, 'charge')} (${seqRange(lines.length + 1, count)} missing)`,
    );
  const entries = parsed.slice(0, count);
  const bad = entries.findIndex((entry) => typeof entry === 'string');
  if (bad >= 0) throw refuse(`ledger ${lineProblem(bad + 1, entries[bad] as string)}`);
  for (const [key, field] of [
    ['client_id', 'by_client'],
    ['grant_id', 'by_grant'],
  ] as const) {
    const sums = sumBy(entries as ChargeEntry[], key);
    const recorded = totals?.[field] ?? {};
    const names = [...sums.keys(), ...Object.keys(recorded).filter((name) => !sums.has(name))];
    for (const name of names) {
      const sum = sums.get(name);
      const total = Object.hasOwn(recorded, name) ? recorded[name] : undefined;
      if (sum !== total) {
        const which = key === 'client_id' ? 'client' : 'grant';
        const ledgerSays =
          count === 0
            ? 'the ledger has no committed lines'
            : `the ledger's committed lines (${seqRange(1, count)}) sum to ${sum === undefined ? 'nothing for it' : `${sum} AKh`}`;
        throw refuse(
          `the state's total for ${which} ${name} is ${total === undefined ? 'missing' : `${JSON.stringify(total)} AKh`}, but ${ledgerSays}`,
        );
      }
    }
  }
  const chain = ledgerChain(lines.slice(0, count));
  if (totals?.ledger_chain !== undefined && chain !== totals.ledger_chain)
    throw refuse(
      `the ledger's committed lines (${seqRange(1, count)}) sum to the state's totals, but are not the lines the state recorded (their ` +
        `chained sha256 is not its charges.ledger_chain): a line was edited after it was written`,
    );
  const uncommitted = lines.length - count + (torn.length > 0 ? 1 : 0);
  if (uncommitted === 0) return { committed: count, uncommitted: 0, keep: null, chain };
  // Only a commit cut short by a crash leaves lines it never acknowledged, and a journal with them; a process that
  // stopped cleanly removed its journal. Dropping them here would delete charges a client was told of.
  if (!afterCrash) {
    const beyond = [
      ...(lines.length > count ? [`${plural(lines.length - count, 'line')} (${seqRange(count + 1, lines.length)})`] : []),
      ...(torn.length > 0 ? ['a last line without its newline'] : []),
    ].join(' and ');
    throw refuse(
      `the ledger holds ${beyond} beyond the ${plural(count, 'charge')} the state counts, and the last stop on these files was clean ` +
        `(no journal was left), so they were written by commits that completed: the state file is older than its ledger (put back from a backup?)`,
      `Put back the newest state file, the one these charges belong to; or restore both files from the same backup or snapshot; or, to ` +
        `start over without them, move BOTH away: ${moveAwayCommand(stateFile)}`,
    );
  }
  return {
    committed: count,
    uncommitted,
    chain,
    keep: lines
      .slice(0, count)
      .map((line) => `${line}\n`)
      .join(''),
  };
}

function bothWaysOut(stateFile: string): string {
  return `Restore both files from the same backup or snapshot; or, to start over without them, move BOTH away: ${moveAwayCommand(stateFile)}`;
}

/** The ledger's text, or null if there is none. Other read errors are a StateFileError naming the file. */
export async function readLedgerText(stateFile: string, ledgerFile: string): Promise<string | null> {
  try {
    return await readFile(ledgerFile, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') return null;
    throw new StateFileError(
      stateFile,
      `cannot read charge ledger ${ledgerFile} of state file ${stateFile} (${err.code ?? err.message}). Check its permissions; nothing was changed.`,
      { cause: e },
    );
  }
}

/** The notice of uncommitted lines dropped from the end of the ledger (see reconcileLedger). */
export const droppedLinesNotice = (ledgerFile: string, result: Pick<Reconciled, 'committed' | 'uncommitted'>): string =>
  `dropped ${plural(
    result.uncommitted,
    'uncommitted line',
  )} (${seqRange(result.committed + 1, result.committed + result.uncommitted)}) from the end of charge ` +
  `ledger ${ledgerFile}: written by a commit that did not complete (the process stopped before its journal record was written), so ` +
  `none of them was acknowledged`;

/**
 * At load, on the main thread (a small ledger; a large one goes through the writer thread, see FilePersistence):
 * reconciles the ledger with the state's totals (see reconcileLedger; `totals` null: no state file) and drops
 * uncommitted lines, durably (temp file, fdatasync, rename, directory fsync: a crash meanwhile keeps every committed
 * line, and a ledger that is a symlink is replaced, never written through). `onNotice` hears one line when lines
 * were dropped. Returns the committed lines' chain (ChargeTotals.ledger_chain). Throws StateFileError, leaving
 * both files untouched, when they disagree otherwise.
 */
export async function reconcileLedgerFile(
  stateFile: string,
  ledgerFile: string,
  totals: ChargeTotals | null,
  afterCrash: boolean,
  onNotice?: (line: string) => void,
): Promise<string | undefined> {
  const result = reconcileLedger(stateFile, ledgerFile, totals, await readLedgerText(stateFile, ledgerFile), afterCrash);
  if (result.keep !== null) {
    await writeFileDurably(ledgerFile, result.keep);
    onNotice?.(droppedLinesNotice(ledgerFile, result));
  }
  return result.chain;
}

/** The committed entries of the ledger as read through `readLedger` (complete, committed lines), strictly parsed. */
export function committedEntries(lines: readonly string[], ledgerFile: string | null): ChargeEntry[] {
  try {
    return parseLedgerLines(lines);
  } catch (e) {
    if (!(e instanceof LedgerLineError)) throw e;
    throw new StateFileError(
      ledgerFile ?? '(in memory)',
      `charge ledger ${ledgerFile ?? '(in memory)'} is damaged: ${e.message}; it was changed while the emulator ran`,
    );
  }
}

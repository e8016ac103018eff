import { SCOPES, isSupportedScope } from '../../protocol/scopes.js';
import type { DashboardState } from '../model.js';

/**
 * What each view shows, as plain rows and lines: pure functions of the dashboard state, so the filter, the tests and
 * the Ink components all see the same text. One module per view in this folder (index.ts names them); here what
 * they share.
 */

export type Tone = 'normal' | 'alarm' | 'ok' | 'dim' | 'warn';

export interface Row {
  key: string;
  cells: string[];
  tone: Tone;
}

export interface Line {
  text: string;
  tone: Tone;
  /**
   * Every detail line wraps to the pane's width at spaces (a cut word reads as another word: 'the whole family d');
   * its continuation lines start this many columns in. Unset: under its label (`client   …`: 9), else 2 further in
   * than the line itself.
   */
  hang?: number;
}

export interface Table {
  headers: string[];
  /** Column widths; the last column takes what is left. */
  widths: number[];
  rows: Row[];
}

/** A view: its title, its list and the detail pane of its selected row. */
export interface View {
  readonly title: string;
  table(state: DashboardState): Table;
  /** The detail pane of the selected row. */
  detail(state: DashboardState, key: string): Line[];
  /** The detail pane with no row selected; default: "nothing selected". */
  unselected?(state: DashboardState): Line[];
  /** Whether the detail is mostly sentences (and so may need more rows than its half of a stacked layout). */
  readonly detailWraps?: boolean;
}

/**
 * Client names, questions and descriptions come from clients: a control character in them could move the cursor,
 * set the window title or write the clipboard (OSC 52). Each becomes one visible replacement character.
 */
export const printable = (text: string): string => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '\ufffd');

/** `12:03:04` in UTC, as the CLI prints times (ISO, Z): the same on every machine. */
export const clockTime = (ms: number | null): string => (ms ? new Date(ms).toISOString().slice(11, 19) : '-');
export const line = (text: string, tone: Tone = 'normal', hang?: number): Line =>
  hang === undefined ? { text, tone } : { text, tone, hang };
export const isWriteScope = (scope: string): boolean => isSupportedScope(scope) && SCOPES[scope].writes;
/** Write scopes carry a mark wherever scopes are listed. */
export const markScopes = (scopes: readonly string[]): string => scopes.map((s) => (isWriteScope(s) ? `${s}✎` : s)).join(' ');
export const amount = (n: number): string => `${Number(n.toFixed(3))} AKh`;
export const newestFirst = <T extends { created_at: number }>(items: T[]): T[] => [...items].sort((a, b) => b.created_at - a.created_at);

import type { DashboardState } from '../model.js';
import { approvals } from './approvals.js';
import { charges } from './charges.js';
import { line, type Line, type Table, type View } from './common.js';
import { families } from './families.js';
import { faults } from './faults.js';
import { findings } from './findings.js';
import { grants } from './grants.js';
import { jobs } from './jobs.js';
import { requests } from './requests.js';

export { clockTime, printable, type Line, type Row, type Table, type Tone } from './common.js';
export { serviceLines } from './service.js';

/** The views in their order: the keys 1–8 and Tab go through them so. */
export const VIEWS = ['grants', 'families', 'jobs', 'charges', 'requests', 'approvals', 'faults', 'findings'] as const;
export type ViewName = (typeof VIEWS)[number];

const BY_NAME: Record<ViewName, View> = { grants, families, jobs, charges, requests, approvals, faults, findings };

export const VIEW_TITLES = Object.fromEntries(VIEWS.map((v) => [v, BY_NAME[v].title])) as Record<ViewName, string>;

export const table = (state: DashboardState, view: ViewName): Table => BY_NAME[view].table(state);

/** The detail pane of the selected row. */
export function detail(state: DashboardState, view: ViewName, key: string | undefined): Line[] {
  const v = BY_NAME[view];
  if (key !== undefined) return v.detail(state, key);
  return v.unselected?.(state) ?? [line('nothing selected', 'dim')];
}

/** Whether the view's detail is mostly sentences (and so may need more rows than its half of a stacked layout). */
export const detailWraps = (view: ViewName): boolean => BY_NAME[view].detailWraps === true;

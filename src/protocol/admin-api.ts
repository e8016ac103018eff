/** The admin API of a running emulator: where it answers and its endpoints (loopback only, admin token required). */
export const ADMIN_PREFIX = '/_admin';

/** Endpoints under ADMIN_PREFIX as the server routes them; `:id` and `:name` are path parameters (see adminPath). */
export const ADMIN_ROUTES = {
  health: '/health',
  grants: '/grants',
  revokeGrant: '/grants/:id/revoke',
  charges: '/charges',
  /** The state as the dashboard shows it (its overview). */
  overview: '/overview',
  /** The server-sent event stream of the dashboard: an overview, then events and ticks. */
  events: '/events',
  clock: '/clock',
  advanceClock: '/clock/advance',
  tokens: '/tokens',
  consent: '/consent',
  faults: '/faults',
  fault: '/faults/:id',
  actions: '/actions',
  decideAction: '/actions/:id/decide',
  snapshots: '/snapshots',
  saveSnapshot: '/snapshots/:name',
  restoreSnapshot: '/snapshots/:name/restore',
  reset: '/reset',
  /** Client findings: GET lists them (`{ findings }`, paged), DELETE forgets them (`{ cleared }`). */
  findings: '/findings',
} as const;

/**
 * Lists that grow with what clients do (grants, findings) come in pages: `?limit=` (1 to ADMIN_PAGE.max, default
 * ADMIN_PAGE.default) and `?offset=`. Each answer says how many there are and where the next page is.
 */
export const ADMIN_PAGE = { default: 1000, max: 10_000 } as const;

/** What a paged answer carries beside its list. `next`: the path of the next page under the admin URL, or null on the last. */
export interface AdminPage {
  total: number;
  offset: number;
  limit: number;
  next: string | null;
}

/** `path` with `limit` and `offset` set, other parameters kept. */
export function pagePath(path: string, offset: number, limit: number): string {
  const [route, query = ''] = path.split('?') as [string, string?];
  const params = new URLSearchParams(query);
  params.set('offset', String(offset));
  params.set('limit', String(limit));
  return `${route}?${params.toString()}`;
}

/** The paging fields of a page of `total` items that starts at `offset` and holds `count` of them. */
export function pageOf(path: string, total: number, offset: number, limit: number, count: number): AdminPage {
  return { total, offset, limit, next: offset + count < total ? pagePath(path, offset + count, limit) : null };
}

/** Every item of a paged list: `get` fetches one page by its path; `next` is followed until the last. */
export async function allPages<T, K extends string>(
  key: K,
  path: string,
  get: (path: string) => Promise<AdminPage & Record<K, T[]>>,
): Promise<T[]> {
  const items: T[] = [];
  for (let at: string | null = path; at !== null;) {
    const page: AdminPage & Record<K, T[]> = await get(at);
    items.push(...page[key]);
    at = page.next;
  }
  return items;
}

export type AdminRoute = keyof typeof ADMIN_ROUTES;

/** The event stream's full path (the request log leaves it out: it would log itself). */
export const ADMIN_EVENTS_PATH = `${ADMIN_PREFIX}${ADMIN_ROUTES.events}`;

/** A route's path under the admin URL, its parameters filled in and URL-encoded: `adminPath('revokeGrant', { id })`. */
export function adminPath(route: AdminRoute, params: Record<string, string> = {}): string {
  return ADMIN_ROUTES[route].replace(/:(\w+)/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new TypeError(`adminPath(${route}) needs the parameter ${name}`);
    return encodeURIComponent(value);
  });
}

/** The admin API of a running emulator: where it answers and its endpoints (loopback only, admin token required). */
export const ADMIN_PREFIX = '/_admin';

/** Endpoints under ADMIN_PREFIX as the server routes them; `:id` and `:name` are path parameters (see adminPath). */
export const ADMIN_ROUTES = {
  health: '/health',
  grants: '/grants',
  revokeGrant: '/grants/:id/revoke',
  charges: '/charges',
  snapshot: '/snapshot',
  /** The server-sent event stream of the dashboard: a snapshot, then events and ticks. */
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
  /** Client findings: GET lists them (`{ findings }`), DELETE forgets them (`{ cleared }`). */
  findings: '/findings',
} as const;

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

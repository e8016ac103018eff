import { addAmount, type ChargeEntry } from '../protocol/charges.js';
import type { AppEvent, EventMap } from '../protocol/events.js';
import { SEVERITIES, type Finding } from '../protocol/findings.js';
import type {
  ActionView,
  FamilyView,
  FaultView,
  ReplayEntry,
  RequestEntry,
  ResearchView,
  Overview,
  TrainingView,
} from '../protocol/overview.js';

/**
 * The dashboard's state and the pure reducer that folds the admin stream into it. The UI never reads the
 * store: everything it shows comes from an overview and the events after it.
 */

/** What the stream client hands the reducer. */
export type StreamMessage =
  | { type: 'overview'; overview: Overview }
  | { type: 'event'; event: AppEvent }
  | { type: 'tick'; now: number }
  | { type: 'connection'; status: ConnectionStatus; detail?: string; url?: string; at: number };

export type ConnectionStatus = 'connecting' | 'connected' | 'disconnected';

export type GrantRow = Overview['grants'][number];
export type ChargeRow = ChargeEntry & { free: boolean };
export interface ActivityItem {
  seq: number;
  at: number;
  text: string;
  /** Something went wrong or was cut off: a replay, a revocation, a refused request. */
  alarm: boolean;
}

export interface DashboardState {
  connection: { status: ConnectionStatus; detail: string | null; url: string | null; since: number | null };
  /** The newest event folded in; older or repeated events are ignored. */
  seq: number;
  /** The server's clock (virtual under a manual clock), from the overview, events and ticks. */
  now: number;
  service: Overview['service'] | null;
  persons: Record<string, string>;
  clients: Overview['clients'];
  grants: Record<string, GrantRow>;
  families: Record<string, FamilyView>;
  research: Record<string, ResearchView>;
  training: Record<string, TrainingView>;
  charges: { by_client: Record<string, number>; by_grant: Record<string, number>; entries: ChargeRow[] };
  actions: Record<string, ActionView>;
  requests: RequestEntry[];
  /** Injected faults (emulator control): armed, spent and cleared. */
  faults: Record<string, FaultView>;
  /** Client findings, most severe first, then the newest (`byConcern`); at most LIMITS.findings. */
  findings: Finding[];
  activity: ActivityItem[];
}

export const LIMITS = { requests: 500, charges: 500, activity: 100, accessTokens: 20, findings: 200 } as const;

export const initialState = (): DashboardState => ({
  connection: { status: 'connecting', detail: null, url: null, since: null },
  seq: 0,
  now: 0,
  service: null,
  persons: {},
  clients: {},
  grants: {},
  families: {},
  research: {},
  training: {},
  charges: { by_client: {}, by_grant: {}, entries: [] },
  actions: {},
  requests: [],
  faults: {},
  findings: [],
  activity: [],
});

const byId = <T extends { id: string }>(items: T[]): Record<string, T> => Object.fromEntries(items.map((item) => [item.id, item]));
const capped = <T>(items: T[], limit: number): T[] => (items.length > limit ? items.slice(items.length - limit) : items);
const shortId = (id: string): string => (id.length > 14 ? `${id.slice(0, 14)}…` : id);

export function clientName(state: DashboardState, clientId: string): string {
  return state.clients[clientId]?.client_name ?? shortId(clientId);
}

/** A finding's client: as registered now, else the name the finding kept (a restore may have removed the client). */
export function findingClient(state: DashboardState, f: Finding): string {
  return state.clients[f.client_id]?.client_name ?? f.client_name ?? shortId(f.client_id);
}

/** Most severe first, then the most recently seen; the id keeps the order stable. */
export const byConcern = (a: Finding, b: Finding): number =>
  SEVERITIES.indexOf(a.severity) - SEVERITIES.indexOf(b.severity) || b.last_at - a.last_at || a.id.localeCompare(b.id);

/** The findings in display order, bounded: past the limit, the least severe and oldest go, so errors stay in view. */
const keptFindings = (findings: Finding[]): Finding[] => [...findings].sort(byConcern).slice(0, LIMITS.findings);

/**
 * A finding recorded or counted again replaces the one with its id. One older than what is shown (an overview taken
 * after the count it carries) changes nothing.
 */
function withFinding(findings: Finding[], f: Finding): Finding[] {
  const known = findings.find((x) => x.id === f.id);
  if (known && (known.last_at > f.last_at || (known.last_at === f.last_at && known.count > f.count))) return findings;
  return keptFindings([...findings.filter((x) => x.id !== f.id), f]);
}

export function reduce(state: DashboardState, message: StreamMessage): DashboardState {
  switch (message.type) {
    case 'connection':
      if (state.connection.status === message.status && state.connection.detail === (message.detail ?? null)) return state;
      return {
        ...state,
        connection: { status: message.status, detail: message.detail ?? null, url: message.url ?? state.connection.url, since: message.at },
      };
    case 'tick':
      return message.now === state.now ? state : { ...state, now: message.now };
    case 'overview':
      return fromOverview(state, message.overview);
    case 'event':
      if (message.event.seq <= state.seq) return state;
      return applyEvent({ ...state, seq: message.event.seq, now: Math.max(state.now, message.event.at) }, message.event);
  }
}

/**
 * An overview replaces what was known (after a reconnect, the server may have restarted with other state; after a
 * restore, the server sends one at once). The activity log stays: it is what happened, not the state.
 */
function fromOverview(state: DashboardState, s: Overview): DashboardState {
  return {
    ...state,
    seq: s.seq,
    now: s.now,
    service: s.service,
    persons: s.persons,
    clients: s.clients,
    grants: byId(s.grants),
    families: byId(s.families),
    research: byId(s.research),
    training: byId(s.training),
    charges: {
      by_client: s.charges.by_client,
      by_grant: s.charges.by_grant,
      entries: capped(
        [...s.charges.entries.map((e) => ({ ...e, free: false })), ...s.charges.replays.map(replayRow)].sort((a, b) => a.at - b.at),
        LIMITS.charges,
      ),
    },
    actions: byId(s.actions),
    requests: capped(s.requests, LIMITS.requests),
    faults: byId(s.faults ?? []),
    findings: keptFindings(s.findings ?? []),
  };
}

/** A replay as a ledger row: free. Its key is the negative event number, apart from the ledger's own numbers. */
const replayRow = (r: ReplayEntry): ChargeRow => ({
  seq: -r.seq,
  at: r.at,
  client_id: r.client_id,
  grant_id: r.grant_id,
  route: r.route,
  amount: 0,
  unit: 'AKh',
  idempotency_key: r.key,
  free: true,
});

type EventOf<N extends keyof EventMap> = Extract<AppEvent, { name: N }>;

/** "the policy" or the person's id: a policy's answer must never read as the person's own click. */
const answerer = (data: { by: string; person_id: string }): string =>
  data.by === 'policy' ? `policy (for ${data.person_id})` : data.person_id;

function note(state: DashboardState, event: AppEvent, text: string, alarm = false): DashboardState {
  return { ...state, activity: capped([...state.activity, { seq: event.seq, at: event.at, text, alarm }], LIMITS.activity) };
}

function patch<K extends 'grants' | 'families' | 'research' | 'training' | 'actions' | 'faults'>(
  state: DashboardState,
  key: K,
  id: string,
  change: (row: DashboardState[K][string]) => DashboardState[K][string],
): DashboardState {
  const row = state[key][id];
  if (!row) return state;
  return { ...state, [key]: { ...state[key], [id]: change(row as DashboardState[K][string]) } };
}

function onTokensIssued(state: DashboardState, event: EventOf<'tokens.issued'>): DashboardState {
  const d = event.data;
  const token = { jti: d.jti, issued_at: event.at, expires_at: d.expires_at, revoked: false };
  const existing = state.families[d.family_id];
  let family: FamilyView;
  if (!existing) {
    family = {
      ...emptyFamily(d.family_id, d.grant_id, d.client_id, event.at),
      chain: [{ generation: d.generation, issued_at: event.at, rotated_at: null }],
      access_tokens: [token],
    };
  } else {
    // The overview may already hold this token (taken between the core's change and its event): once only.
    const known = existing.access_tokens.some((t) => t.jti === d.jti);
    family = {
      ...existing,
      chain: withGeneration(existing.chain, d.generation, event.at),
      access_tokens: known ? existing.access_tokens : capped([...existing.access_tokens, token], LIMITS.accessTokens),
    };
  }
  const next = { ...state, families: { ...state.families, [family.id]: family } };
  return patch(next, 'grants', d.grant_id, (g) => ({ ...g, last_used_at: event.at }));
}

const emptyFamily = (id: string, grantId: string, clientId: string, at: number): FamilyView => ({
  id,
  grant_id: grantId,
  client_id: clientId,
  status: 'active',
  created_at: at,
  invalidated_at: null,
  invalidated_reason: null,
  replayed_generation: null,
  chain: [],
  access_tokens: [],
});

/** Adds a generation to the chain once; the one before it is rotated from then on. */
function withGeneration(chain: FamilyView['chain'], generation: number, at: number): FamilyView['chain'] {
  if (chain.some((g) => g.generation === generation)) return chain;
  return [
    ...chain.map((g) => (g.generation < generation && g.rotated_at === null ? { ...g, rotated_at: at } : g)),
    { generation, issued_at: at, rotated_at: null },
  ];
}

function applyEvent(state: DashboardState, event: AppEvent): DashboardState {
  switch (event.name) {
    case 'client.registered': {
      const d = event.data;
      return note(
        {
          ...state,
          clients: { ...state.clients, [d.client_id]: { client_id: d.client_id, client_name: d.client_name, registered_at: event.at } },
        },
        event,
        `client registered: ${d.client_name}`,
      );
    }
    case 'consent.shown':
      return note(
        state,
        event,
        `${
          event.data.answered_by === 'policy' ? 'consent asked, for the policy to answer' : 'consent page shown'
        }: ${clientName(state, event.data.client_id)} asks ${event.data.person_id} for ${event.data.scopes.join(' ')}`,
      );
    case 'consent.approved':
      return note(
        state,
        event,
        `consent approved by ${answerer(event.data)}: ${clientName(state, event.data.client_id)} (${event.data.scopes.join(' ')})`,
      );
    case 'consent.denied':
      return note(state, event, `consent denied by ${answerer(event.data)}: ${clientName(state, event.data.client_id)}`, true);
    case 'consent_policy.set':
      return note(
        state,
        event,
        `consent policy for ${
          event.data.client_id ? clientName(state, event.data.client_id) : 'all clients'
        }: ${event.data.decision}${event.data.scopes ? ` ${event.data.scopes.join(' ')}` : ''}`,
      );
    case 'grant.created': {
      const d = event.data;
      // Already in the overview (taken between the core's change and its event): keep what it shows.
      if (state.grants[d.grant_id]) return state;
      const grant: GrantRow = {
        id: d.grant_id,
        client_id: d.client_id,
        person_id: d.person_id,
        scopes: d.scopes,
        resource: d.resource,
        created_at: event.at,
        last_used_at: null,
        status: 'active',
        revoked_at: null,
        revoked_by: null,
      };
      return { ...state, grants: { ...state.grants, [grant.id]: grant } };
    }
    case 'grant.scopes_reduced':
      return note(
        patch(state, 'grants', event.data.grant_id, (g) => ({ ...g, scopes: event.data.scopes })),
        event,
        `grant ${event.data.grant_id} lost retired scopes ${event.data.removed.join(' ')}`,
      );
    case 'grant.revoked': {
      const next = patch(state, 'grants', event.data.grant_id, (g) => ({
        ...g,
        status: 'revoked',
        revoked_at: event.at,
        revoked_by: event.data.by,
      }));
      return note(next, event, `grant of ${clientName(state, event.data.client_id)} revoked by ${event.data.by}`, true);
    }
    case 'code.issued':
      return note(state, event, `authorization code issued to ${clientName(state, event.data.client_id)}`);
    case 'code.replayed':
      return note(state, event, `authorization code replayed by ${clientName(state, event.data.client_id)}`, true);
    case 'tokens.issued':
      return onTokensIssued(state, event);
    case 'refresh.rotated': {
      const d = event.data;
      return patch(state, 'families', d.family_id, (f) => ({ ...f, chain: withGeneration(f.chain, d.to_generation, event.at) }));
    }
    case 'family.invalidated': {
      const d = event.data;
      // A code replay can kill a family before the event of its first tokens arrives: keep it, as invalidated.
      const known = state.families[d.family_id]
        ? state
        : {
            ...state,
            families: {
              ...state.families,
              [d.family_id]: emptyFamily(d.family_id, d.grant_id, state.grants[d.grant_id]?.client_id ?? '', event.at),
            },
          };
      const next = patch(known, 'families', d.family_id, (f) => ({
        ...f,
        status: 'invalidated',
        invalidated_at: event.at,
        invalidated_reason: d.reason,
        replayed_generation: d.replayed_generation ?? null,
      }));
      const why =
        d.reason === 'refresh_replay' ? `refresh token generation ${d.replayed_generation ?? '?'} replayed` : d.reason.replace('_', ' ');
      return note(next, event, `token family ${d.family_id} invalidated: ${why}`, true);
    }
    case 'access_token.revoked': {
      const family = Object.values(state.families).find((f) => f.access_tokens.some((t) => t.jti === event.data.jti));
      const next = family
        ? patch(state, 'families', family.id, (f) => ({
            ...f,
            access_tokens: f.access_tokens.map((t) => (t.jti === event.data.jti ? { ...t, revoked: true } : t)),
          }))
        : state;
      return note(next, event, `access token revoked by ${clientName(state, event.data.client_id)}`);
    }
    case 'charge.recorded': {
      const d = event.data;
      if (state.charges.entries.some((e) => e.seq === d.seq && !e.free)) return state;
      return {
        ...state,
        charges: {
          by_client: { ...state.charges.by_client, [d.client_id]: addAmount(state.charges.by_client[d.client_id] ?? 0, d.amount) },
          by_grant: { ...state.charges.by_grant, [d.grant_id]: addAmount(state.charges.by_grant[d.grant_id] ?? 0, d.amount) },
          entries: capped([...state.charges.entries, { ...d, free: false }], LIMITS.charges),
        },
      };
    }
    case 'idempotency.replayed':
      return {
        ...state,
        charges: {
          ...state.charges,
          entries: capped([...state.charges.entries, replayRow({ ...event.data, seq: event.seq, at: event.at })], LIMITS.charges),
        },
      };
    case 'rate_limit.exceeded':
      return note(state, event, `rate limit hit by ${clientName(state, event.data.client_id)} on ${event.data.route}`, true);
    // Every admitted request is also served: the Requests view lists it once, from request.served.
    case 'request.admitted':
      return state;
    case 'authorize.refused': {
      const d = event.data;
      return note(
        state,
        event,
        `authorization refused${d.client_id ? ` for ${clientName(state, d.client_id)}` : ''}: ${d.error}: ${d.description}`,
        true,
      );
    }
    case 'refresh.refused': {
      const d = event.data;
      // A replay: family.invalidated, just before this event, already said which generation and that the family died.
      if (d.reason === 'replay') return state;
      const why =
        d.reason === 'family_invalidated'
          ? `its token family ${d.family_id} had ended`
          : d.reason === 'grant_revoked'
            ? 'the grant was revoked'
            : 'the refresh token expired';
      return note(state, event, `refresh refused for ${clientName(state, d.client_id)}: ${why}`, true);
    }
    case 'access.refused': {
      const d = event.data;
      // A missing token (how a client discovers the authorization server) and an expired one (time to refresh) are routine.
      const routine = d.reason === 'token_missing' || d.reason === 'token_expired';
      return note(
        state,
        event,
        `${d.status} at ${d.where}${d.client_id ? ` for ${clientName(state, d.client_id)}` : ''}: ${d.reason.replaceAll('_', ' ')}`,
        !routine,
      );
    }
    case 'finding.recorded': {
      const f = event.data;
      const known = state.findings.some((x) => x.id === f.id);
      const next = { ...state, findings: withFinding(state.findings, f) };
      // Noted when it first shows up; counting up is seen in the Findings view.
      return known ? next : note(next, event, `${f.severity} finding ${f.code} for ${findingClient(state, f)}`, f.severity === 'error');
    }
    case 'research.created': {
      const d = event.data;
      if (state.research[d.job_id]) return state;
      const job: ResearchView = {
        id: d.job_id,
        client_id: d.client_id,
        grant_id: d.grant_id,
        question: d.question,
        status: 'queued',
        created_at: event.at,
        finished_at: null,
        error: null,
      };
      return { ...state, research: { ...state.research, [job.id]: job } };
    }
    case 'research.running':
      return patch(state, 'research', event.data.job_id, (j) => ({ ...j, status: 'running' }));
    case 'research.succeeded':
      return patch(state, 'research', event.data.job_id, (j) => ({ ...j, status: 'succeeded', finished_at: event.at }));
    case 'research.failed':
      return note(
        patch(state, 'research', event.data.job_id, (j) => ({
          ...j,
          status: 'failed',
          finished_at: event.at,
          error: `${event.data.error}: ${event.data.message}`,
        })),
        event,
        `research job ${event.data.job_id} failed: ${event.data.error}`,
        true,
      );
    case 'training.received': {
      const d = event.data;
      if (state.training[d.document_id]) return state;
      const doc: TrainingView = {
        id: d.document_id,
        client_id: d.client_id,
        grant_id: d.grant_id,
        file_name: d.file_name,
        size: d.size,
        processing_step: 'received',
        created_at: event.at,
        finished_at: null,
        error: null,
      };
      return { ...state, training: { ...state.training, [doc.id]: doc } };
    }
    case 'training.step': {
      const d = event.data;
      const done = d.processing_step === 'indexed' || d.processing_step === 'failed';
      return patch(state, 'training', d.document_id, (doc) => ({
        ...doc,
        processing_step: d.processing_step,
        finished_at: done ? event.at : null,
        error: d.error ?? null,
      }));
    }
    case 'action.pending': {
      const d = event.data;
      if (state.actions[d.action_id]) return state;
      const action: ActionView = {
        id: d.action_id,
        client_id: d.client_id,
        person_id: d.person_id,
        kind: d.kind,
        operation: d.operation,
        description: d.description,
        status: 'pending',
        created_at: event.at,
        decided_at: null,
      };
      return note(
        { ...state, actions: { ...state.actions, [action.id]: action } },
        event,
        `write action waits for approval: ${d.description}`,
      );
    }
    case 'action.approved':
      return patch(state, 'actions', event.data.action_id, (a) => ({ ...a, status: 'approved', decided_at: event.at }));
    case 'action.rejected':
      return patch(state, 'actions', event.data.action_id, (a) => ({ ...a, status: 'rejected', decided_at: event.at }));
    case 'action.applied':
      return patch(state, 'actions', event.data.action_id, (a) => ({ ...a, status: 'applied' }));
    case 'fault.armed': {
      const d = event.data;
      if (state.faults[d.fault_id]) return state;
      const fault: FaultView = {
        id: d.fault_id,
        kind: d.kind,
        description: d.description,
        state: 'armed',
        fired: 0,
        remaining: d.remaining,
        created_at: event.at,
        last_fired_at: null,
      };
      return note({ ...state, faults: { ...state.faults, [fault.id]: fault } }, event, `fault armed: ${d.description}`);
    }
    case 'fault.fired': {
      const d = event.data;
      const next = patch(state, 'faults', d.fault_id, (f) => ({
        ...f,
        fired: f.fired + 1,
        remaining: d.remaining,
        state: d.state,
        last_fired_at: event.at,
      }));
      return note(next, event, `fault ${d.fault_id} fired${d.method ? ` on ${d.method} ${d.path ?? ''}` : ''}: ${d.description}`, true);
    }
    case 'fault.cleared':
      return note(
        patch(state, 'faults', event.data.fault_id, (f) => ({ ...f, state: 'cleared' })),
        event,
        `fault ${event.data.fault_id} cleared`,
      );
    case 'state.restored': {
      // Everything shown came from the replaced state: it goes at once, and the overview the server sends next fills it.
      // Findings describe the run, not the state: the emulator keeps them on a restore and forgets them on a reset.
      const cleared = {
        ...state,
        clients: {},
        grants: {},
        families: {},
        research: {},
        training: {},
        charges: { by_client: {}, by_grant: {}, entries: [] },
        actions: {},
        findings: event.data.reset ? [] : state.findings,
      };
      return note(cleared, event, event.data.reset ? 'state reset to the baseline' : `state restored from snapshot ${event.data.snapshot}`);
    }
    case 'request.served': {
      const next = { ...state, requests: capped([...state.requests, { ...event.data, seq: event.seq, at: event.at }], LIMITS.requests) };
      // An accepted bearer token is a use of its grant (the core records it the same way).
      return event.data.grant_id ? patch(next, 'grants', event.data.grant_id, (g) => ({ ...g, last_used_at: event.at })) : next;
    }
  }
}

import type { ChargeEntry } from '../state/charges.js';
import type { CoreContext } from '../context.js';
import type { Findings } from './findings.js';
import type { FaultView, ReplayEntry, RequestEntry, Overview } from '../../protocol/overview.js';

export type { FaultView, ReplayEntry, RequestEntry, Overview } from '../../protocol/overview.js';

/**
 * How many of the newest items an overview carries per list; older ones stay in the state file (grants and findings:
 * the paged GET /_admin/grants and /_admin/findings have them all). Clients: those the overview's rows name, and
 * this many of the newest besides.
 */
export const OVERVIEW_LIMITS = {
  families: 200,
  jobs: 200,
  charges: 200,
  actions: 200,
  requests: 200,
  grants: 500,
  findings: 200,
  clients: 500,
} as const;

const newest = <T extends { created_at: number }>(items: Iterable<T>, limit: number): T[] =>
  [...items].sort((a, b) => a.created_at - b.created_at).slice(-limit);

/** Builds the overview from the core's state at this moment (synchronous, so `seq` matches it exactly). */
export function buildOverview(
  core: CoreContext & { readonly findings: Findings },
  extra: { charges: ChargeEntry[]; replays: ReplayEntry[]; requests: RequestEntry[]; faults?: FaultView[] },
): Overview {
  const s = core.state;
  // First: judging the run-wide findings may publish some, which this overview then already holds.
  const findings = core.findings.list();
  const allGrants = Object.values(s.grants);
  const grants = newest(allGrants, OVERVIEW_LIMITS.grants);
  const families = newest(Object.values(s.families), OVERVIEW_LIMITS.families);
  const research = newest(Object.values(s.research_jobs), OVERVIEW_LIMITS.jobs);
  const training = newest(Object.values(s.training_documents), OVERVIEW_LIMITS.jobs);
  const actions = newest(Object.values(s.pending_actions), OVERVIEW_LIMITS.actions);
  const shownFindings = findings.slice(0, OVERVIEW_LIMITS.findings);
  const charges = extra.charges.slice(-OVERVIEW_LIMITS.charges);
  const replays = extra.replays.slice(-OVERVIEW_LIMITS.charges);
  const requests = extra.requests.slice(-OVERVIEW_LIMITS.requests);
  const allClients = Object.values(s.clients);
  // The clients the rows name (a request or a charge of an old client too), and the newest registrations.
  const named = new Set<string | null | undefined>(
    [grants, families, research, training, actions, shownFindings, charges, replays, requests].flatMap((rows) =>
      (rows as Array<{ client_id?: string | null }>).map((row) => row.client_id),
    ),
  );
  const recent = new Set(
    [...allClients]
      .sort((a, b) => a.client_id_issued_at - b.client_id_issued_at)
      .slice(-OVERVIEW_LIMITS.clients)
      .map((c) => c.client_id),
  );
  const clients = allClients.filter((c) => named.has(c.client_id) || recent.has(c.client_id));
  const shownClients = new Set(clients.map((c) => c.client_id));
  const shownGrants = new Set(grants.map((g) => g.id));
  const pick = (totals: Record<string, number>, keep: (id: string) => boolean) =>
    Object.fromEntries(Object.entries(totals).filter(([id]) => keep(id)));
  return {
    seq: core.events.seq,
    now: core.clock.now(),
    service: { base_url: core.urls.baseUrl, auth_url: core.urls.authUrl, issuer: core.issuer },
    persons: Object.fromEntries(core.persons.map((p) => [p.id, p.name])),
    totals: { clients: allClients.length, grants: allGrants.length, findings: findings.length },
    clients: Object.fromEntries(
      clients.map((c) => [
        c.client_id,
        { client_id: c.client_id, client_name: c.client_name, registered_at: c.client_id_issued_at * 1000 },
      ]),
    ),
    grants: grants.map((g) => ({
      ...g,
      scopes: [...g.scopes],
      revoked_at: g.revoked_at ?? null,
      revoked_by: g.revoked_by ?? null,
    })),
    families: families.map((f) => ({
      id: f.id,
      grant_id: f.grant_id,
      client_id: f.client_id,
      status: f.status,
      created_at: f.created_at,
      invalidated_at: f.invalidated_at ?? null,
      invalidated_reason: f.invalidated_reason ?? null,
      replayed_generation: f.replayed_generation ?? null,
      chain: [...f.history, f.current].map((g) => ({ generation: g.generation, issued_at: g.issued_at, rotated_at: g.rotated_at })),
      access_tokens: f.access_tokens.map((t) => ({
        jti: t.jti,
        issued_at: t.issued_at,
        expires_at: t.expires_at,
        revoked: Object.hasOwn(s.revoked_access_tokens, t.jti),
      })),
    })),
    research: research.map((j) => ({
      id: j.id,
      client_id: j.client_id,
      grant_id: j.grant_id,
      question: j.question,
      status: j.status,
      created_at: j.created_at,
      finished_at: j.finished_at ?? null,
      error: j.error ? `${j.error.code}: ${j.error.message}` : null,
    })),
    training: training.map((d) => ({
      id: d.id,
      client_id: d.client_id,
      grant_id: d.grant_id,
      file_name: d.file_name,
      size: d.size,
      processing_step: d.processing_step,
      created_at: d.created_at,
      finished_at: d.indexed_at ?? null,
      error: d.error ? `${d.error.code}: ${d.error.message}` : null,
    })),
    charges: {
      by_client: pick(s.charges.by_client, (id) => shownClients.has(id)),
      by_grant: pick(s.charges.by_grant, (id) => shownGrants.has(id)),
      entries: charges,
      replays,
    },
    actions: actions.map((a) => ({
      id: a.id,
      client_id: a.client_id,
      person_id: a.person_id,
      kind: a.kind,
      operation: a.operation,
      description: a.description,
      status: a.status,
      created_at: a.created_at,
      decided_at: a.decided_at ?? null,
    })),
    requests,
    faults: extra.faults ?? [],
    findings: shownFindings,
  };
}

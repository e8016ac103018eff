import { describe, expect, it } from 'vitest';
import { EVENT_NAMES, type EventName } from '../../src/protocol/events.js';
import { LIMITS, initialState, reduce, type DashboardState, type StreamMessage } from '../../src/dashboard/model.js';
import { table } from '../../src/dashboard/views/index.js';
import { Script, T0, finding, overview } from '../helpers/dashboard.js';

const fold = (messages: StreamMessage[], from: DashboardState = initialState()): DashboardState => messages.reduce(reduce, from);

/** An info finding: a scope of grant-1 that no request used. */
const unusedScope = finding({
  id: 'scope.unused:client-1:grant-1',
  code: 'scope.unused',
  severity: 'info',
  family_id: null,
  message: 'The grant holds “workspace.write”, which no request of it has used.',
  hint: 'Request only the scopes the agent uses (spec 5.9): the person sees each on the consent screen.',
  spec: 'spec 5.9',
});

/**
 * A state with one agent grant, its family after one code exchange, one research job, one training document, a
 * pending write action, an armed fault and an info finding.
 */
function started() {
  const s = new Script();
  const state = fold([
    { type: 'overview', overview: overview({ findings: [unusedScope] }) },
    s.event('grant.created', {
      grant_id: 'grant-1',
      client_id: 'client-1',
      person_id: 'person-anna',
      scopes: ['ask', 'workspace.write'],
      resource: 'http://127.0.0.1:4100/mcp',
    }),
    s.event('tokens.issued', {
      grant_id: 'grant-1',
      client_id: 'client-1',
      family_id: 'fam-1',
      jti: 'jti-1',
      scopes: ['ask'],
      audience: 'http://127.0.0.1:4100/mcp',
      expires_at: T0 + 902_000,
      generation: 1,
      grant_type: 'authorization_code',
    }),
    s.event('research.created', { job_id: 'job-1', client_id: 'client-1', grant_id: 'grant-1', question: 'Was gilt für Hunde?' }),
    s.event('training.received', { document_id: 'doc-1', client_id: 'client-1', grant_id: 'grant-1', file_name: 'hunde.md', size: 120 }),
    s.event('action.pending', {
      action_id: 'act-1',
      client_id: 'client-1',
      grant_id: 'grant-1',
      person_id: 'person-anna',
      kind: 'contacts',
      operation: 'update',
      description: 'Telefon von Jonas ändern',
    }),
    s.event('fault.armed', {
      fault_id: 'fault_0',
      kind: 'rate_limit',
      description: '429 Too Many Requests on rate-limited routes (1×)',
      remaining: 1,
    }),
  ]);
  return { s, state };
}

/** What each event must change; the test below checks that every event of the bus has a case here. */
const CASES: Record<EventName, (s: Script, state: DashboardState) => { message: StreamMessage; check: (next: DashboardState) => void }> = {
  'client.registered': (s) => ({
    message: s.event('client.registered', { client_id: 'client-2', client_name: 'Kalender-Bot', redirect_uris: ['http://127.0.0.1/cb'] }),
    check: (n) => expect(n.clients['client-2']?.client_name).toBe('Kalender-Bot'),
  }),
  'consent.shown': (s) => ({
    message: s.event('consent.shown', {
      interaction_id: 'i-1',
      client_id: 'client-1',
      client_name: 'Wetter-Agent',
      person_id: 'person-anna',
      scopes: ['ask'],
      resource: null,
      answered_by: 'person',
    }),
    check: (n) => expect(n.activity.at(-1)?.text).toMatch(/consent page shown: Wetter-Agent asks person-anna for ask/),
  }),
  'consent.approved': (s) => ({
    message: s.event('consent.approved', {
      interaction_id: 'i-1',
      client_id: 'client-1',
      person_id: 'person-anna',
      scopes: ['ask'],
      requested_scopes: ['ask', 'research'],
      grant_id: 'grant-1',
      by: 'policy',
    }),
    check: (n) =>
      expect(n.activity.at(-1)).toMatchObject({
        text: expect.stringMatching(/consent approved by policy \(for person-anna\): Wetter-Agent \(ask\)/),
        alarm: false,
      }),
  }),
  'consent.denied': (s) => ({
    message: s.event('consent.denied', {
      interaction_id: 'i-1',
      client_id: 'client-1',
      person_id: 'person-anna',
      scopes: ['ask'],
      by: 'person',
    }),
    check: (n) => expect(n.activity.at(-1)).toMatchObject({ text: expect.stringMatching(/consent denied by person-anna/), alarm: true }),
  }),
  'consent_policy.set': (s) => ({
    message: s.event('consent_policy.set', { client_id: null, decision: 'approve', scopes: ['ask'] }),
    check: (n) => expect(n.activity.at(-1)?.text).toBe('consent policy for all clients: approve ask'),
  }),
  'grant.created': (s) => ({
    message: s.event('grant.created', {
      grant_id: 'grant-2',
      client_id: 'client-1',
      person_id: 'person-anna',
      scopes: ['research'],
      resource: null,
    }),
    check: (n) =>
      expect(n.grants['grant-2']).toMatchObject({ status: 'active', scopes: ['research'], created_at: s.at, last_used_at: null }),
  }),
  'grant.scopes_reduced': (s) => ({
    message: s.event('grant.scopes_reduced', { grant_id: 'grant-1', removed: ['documents.read'], scopes: ['ask'] }),
    check: (n) => expect(n.grants['grant-1']?.scopes).toEqual(['ask']),
  }),
  'grant.revoked': (s) => ({
    message: s.event('grant.revoked', { grant_id: 'grant-1', client_id: 'client-1', by: 'person' }),
    check: (n) => expect(n.grants['grant-1']).toMatchObject({ status: 'revoked', revoked_by: 'person', revoked_at: s.at }),
  }),
  'code.issued': (s) => ({
    message: s.event('code.issued', { grant_id: 'grant-1', client_id: 'client-1', expires_at: T0 + 60_000 }),
    check: (n) => expect(n.activity.at(-1)?.text).toMatch(/code issued to Wetter-Agent/),
  }),
  'code.replayed': (s) => ({
    message: s.event('code.replayed', { grant_id: 'grant-1', client_id: 'client-1', family_id: 'fam-1' }),
    check: (n) => expect(n.activity.at(-1)).toMatchObject({ text: expect.stringMatching(/code replayed/), alarm: true }),
  }),
  'tokens.issued': (s) => ({
    message: s.event('tokens.issued', {
      grant_id: 'grant-1',
      client_id: 'client-1',
      family_id: 'fam-1',
      jti: 'jti-2',
      scopes: ['ask'],
      audience: 'a',
      expires_at: T0 + 1_000_000,
      generation: 2,
      grant_type: 'refresh_token',
    }),
    check: (n) => {
      const f = n.families['fam-1']!;
      expect(f.chain.map((g) => [g.generation, g.rotated_at])).toEqual([
        [1, s.at],
        [2, null],
      ]);
      expect(f.access_tokens.map((t) => t.jti)).toEqual(['jti-1', 'jti-2']);
      expect(n.grants['grant-1']?.last_used_at).toBe(s.at);
    },
  }),
  'refresh.rotated': (s) => ({
    message: s.event('refresh.rotated', { grant_id: 'grant-1', family_id: 'fam-1', from_generation: 1, to_generation: 2 }),
    check: (n) =>
      expect(n.families['fam-1']?.chain).toEqual([
        { generation: 1, issued_at: T0 + 2000, rotated_at: s.at },
        { generation: 2, issued_at: s.at, rotated_at: null },
      ]),
  }),
  'family.invalidated': (s) => ({
    message: s.event('family.invalidated', { grant_id: 'grant-1', family_id: 'fam-1', reason: 'refresh_replay', replayed_generation: 1 }),
    check: (n) => {
      expect(n.families['fam-1']).toMatchObject({
        status: 'invalidated',
        invalidated_reason: 'refresh_replay',
        replayed_generation: 1,
        invalidated_at: s.at,
      });
      expect(n.activity.at(-1)).toMatchObject({ text: 'token family fam-1 invalidated: refresh token generation 1 replayed', alarm: true });
    },
  }),
  'access_token.revoked': (s) => ({
    message: s.event('access_token.revoked', { jti: 'jti-1', client_id: 'client-1' }),
    check: (n) => expect(n.families['fam-1']?.access_tokens[0]?.revoked).toBe(true),
  }),
  'charge.recorded': (s) => ({
    message: s.event('charge.recorded', {
      seq: 7,
      at: s.at,
      client_id: 'client-1',
      grant_id: 'grant-1',
      route: 'POST /chat/ask',
      amount: 0.1,
      unit: 'AKh',
      idempotency_key: null,
    }),
    check: (n) => {
      expect(n.charges.by_client['client-1']).toBe(0.1);
      expect(n.charges.by_grant['grant-1']).toBe(0.1);
      expect(n.charges.entries.at(-1)).toMatchObject({ seq: 7, free: false });
    },
  }),
  'idempotency.replayed': (s) => ({
    message: s.event('idempotency.replayed', { client_id: 'client-1', grant_id: 'grant-1', route: 'POST /chat/ask', key: 'k-1' }),
    check: (n) => {
      expect(n.charges.entries.at(-1)).toMatchObject({ free: true, amount: 0, idempotency_key: 'k-1', grant_id: 'grant-1' });
      expect(n.charges.by_client).toEqual({});
    },
  }),
  'rate_limit.exceeded': (s) => ({
    message: s.event('rate_limit.exceeded', {
      client_id: 'client-1',
      grant_id: 'grant-1',
      route: 'POST /chat/ask',
      arrival: 7,
      retry_after: 3,
    }),
    check: (n) => expect(n.activity.at(-1)).toMatchObject({ text: 'rate limit hit by Wetter-Agent on POST /chat/ask', alarm: true }),
  }),
  'request.admitted': (s, state) => ({
    message: s.event('request.admitted', { client_id: 'client-1', grant_id: 'grant-1', route: 'POST /chat/ask', arrival: 8, scope: 'ask' }),
    // request.served lists every request once: the admission adds nothing to the logs.
    check: (n) => {
      expect(n.requests).toBe(state.requests);
      expect(n.activity).toBe(state.activity);
    },
  }),
  'authorize.refused': (s) => ({
    message: s.event('authorize.refused', {
      client_id: 'client-1',
      error: 'invalid_request',
      description: 'code_challenge is required (PKCE, S256)',
      missing: ['code_challenge'],
    }),
    check: (n) =>
      expect(n.activity.at(-1)).toMatchObject({
        text: 'authorization refused for Wetter-Agent: invalid_request: code_challenge is required (PKCE, S256)',
        alarm: true,
      }),
  }),
  'refresh.refused': (s) => ({
    message: s.event('refresh.refused', {
      client_id: 'client-1',
      grant_id: 'grant-1',
      family_id: 'fam-1',
      reason: 'family_invalidated',
      generation: null,
      since_ms: 400,
    }),
    check: (n) =>
      expect(n.activity.at(-1)).toMatchObject({ text: 'refresh refused for Wetter-Agent: its token family fam-1 had ended', alarm: true }),
  }),
  'access.refused': (s) => ({
    message: s.event('access.refused', {
      client_id: 'client-1',
      grant_id: 'grant-1',
      family_id: 'fam-1',
      status: 401,
      reason: 'identity_token',
      where: 'POST /chat/ask',
    }),
    check: (n) => expect(n.activity.at(-1)).toMatchObject({ text: '401 at POST /chat/ask for Wetter-Agent: identity token', alarm: true }),
  }),
  'finding.recorded': (s) => ({
    message: s.event('finding.recorded', finding({ first_at: s.at + 1000, last_at: s.at + 1000 })),
    check: (n) => {
      // Most severe first: the new error above the older info finding.
      expect(n.findings.map((f) => [f.code, f.count])).toEqual([
        ['refresh.concurrent', 1],
        ['scope.unused', 1],
      ]);
      expect(n.activity.at(-1)).toMatchObject({ text: 'error finding refresh.concurrent for Wetter-Agent', alarm: true });
    },
  }),
  'research.created': (s) => ({
    message: s.event('research.created', { job_id: 'job-2', client_id: 'client-1', grant_id: 'grant-1', question: 'Wer?' }),
    check: (n) => expect(n.research['job-2']).toMatchObject({ status: 'queued', created_at: s.at, grant_id: 'grant-1' }),
  }),
  'research.running': (s) => ({
    message: s.event('research.running', { job_id: 'job-1', client_id: 'client-1' }),
    check: (n) => expect(n.research['job-1']?.status).toBe('running'),
  }),
  'research.succeeded': (s) => ({
    message: s.event('research.succeeded', { job_id: 'job-1', client_id: 'client-1', citations: 2 }),
    check: (n) => expect(n.research['job-1']).toMatchObject({ status: 'succeeded', finished_at: s.at }),
  }),
  'research.failed': (s) => ({
    message: s.event('research.failed', { job_id: 'job-1', client_id: 'client-1', error: 'no_sources', message: 'keine Quellen' }),
    check: (n) => expect(n.research['job-1']).toMatchObject({ status: 'failed', error: 'no_sources: keine Quellen', finished_at: s.at }),
  }),
  'training.received': (s) => ({
    message: s.event('training.received', { document_id: 'doc-2', client_id: 'client-1', grant_id: 'grant-1', file_name: 'b.md', size: 3 }),
    check: (n) => expect(n.training['doc-2']).toMatchObject({ processing_step: 'received', file_name: 'b.md' }),
  }),
  'training.step': (s) => ({
    message: s.event('training.step', {
      document_id: 'doc-1',
      client_id: 'client-1',
      processing_step: 'failed',
      error: 'unreadable_content: Steuerzeichen',
    }),
    check: (n) =>
      expect(n.training['doc-1']).toMatchObject({
        processing_step: 'failed',
        finished_at: s.at,
        error: 'unreadable_content: Steuerzeichen',
      }),
  }),
  'action.pending': (s) => ({
    message: s.event('action.pending', {
      action_id: 'act-2',
      client_id: 'client-1',
      grant_id: 'grant-1',
      person_id: 'person-anna',
      kind: 'places',
      operation: 'create',
      description: 'Ort anlegen',
    }),
    check: (n) => expect(n.actions['act-2']).toMatchObject({ status: 'pending', kind: 'places' }),
  }),
  'action.approved': (s) => ({
    message: s.event('action.approved', { action_id: 'act-1', client_id: 'client-1', person_id: 'person-anna' }),
    check: (n) => expect(n.actions['act-1']).toMatchObject({ status: 'approved', decided_at: s.at }),
  }),
  'action.rejected': (s) => ({
    message: s.event('action.rejected', { action_id: 'act-1', client_id: 'client-1', person_id: 'person-anna' }),
    check: (n) => expect(n.actions['act-1']).toMatchObject({ status: 'rejected', decided_at: s.at }),
  }),
  'action.applied': (s) => ({
    message: s.event('action.applied', { action_id: 'act-1', client_id: 'client-1', kind: 'contacts', record_id: 'c-1' }),
    check: (n) => expect(n.actions['act-1']?.status).toBe('applied'),
  }),
  'state.restored': (s) => ({
    message: s.event('state.restored', { snapshot: 'vorher', reset: false }),
    check: (n) => {
      // Nothing of the replaced state stays on screen until the fresh overview that follows arrives.
      expect([n.grants, n.families, n.research, n.training, n.actions, n.clients]).toEqual([{}, {}, {}, {}, {}, {}]);
      expect(n.charges).toEqual({ by_client: {}, by_grant: {}, entries: [] });
      // Findings describe the run, not the state: the emulator keeps them on a restore.
      expect(n.findings.map((f) => f.id)).toEqual([unusedScope.id]);
      expect(n.activity.at(-1)).toMatchObject({ text: 'state restored from snapshot vorher', alarm: false });
    },
  }),
  'request.served': (s) => ({
    message: s.event('request.served', {
      server: 'api',
      method: 'POST',
      path: '/chat/ask',
      status: 429,
      ms: 3.2,
      client_id: 'client-1',
      grant_id: 'grant-1',
      faults: ['fault_0 rate_limit'],
    }),
    check: (n) => {
      expect(n.requests.at(-1)).toMatchObject({ path: '/chat/ask', status: 429, at: s.at, faults: ['fault_0 rate_limit'] });
      expect(n.grants['grant-1']?.last_used_at).toBe(s.at);
      // The request log marks an answer a fault shaped.
      expect(table(n, 'requests').rows[0]).toMatchObject({ cells: expect.arrayContaining(['429 F']), tone: 'alarm' });
    },
  }),
  'fault.armed': (s) => ({
    message: s.event('fault.armed', {
      fault_id: 'fault_1',
      kind: 'server_error',
      description: '503 server error on POST /research (2×)',
      remaining: 2,
    }),
    check: (n) => {
      expect(n.faults['fault_1']).toMatchObject({ state: 'armed', fired: 0, remaining: 2, created_at: s.at });
      expect(table(n, 'faults').rows[0]?.cells).toEqual([
        'armed',
        'fault_1',
        'server_error',
        '0/2',
        '503 server error on POST /research (2×)',
      ]);
    },
  }),
  'fault.fired': (s) => ({
    message: s.event('fault.fired', {
      fault_id: 'fault_0',
      kind: 'rate_limit',
      description: '429 Too Many Requests on rate-limited routes (1×)',
      state: 'spent',
      remaining: 0,
      method: 'POST',
      path: '/chat/ask',
    }),
    check: (n) => {
      expect(n.faults['fault_0']).toMatchObject({ state: 'spent', fired: 1, remaining: 0, last_fired_at: s.at });
      expect(n.activity.at(-1)).toMatchObject({ text: expect.stringMatching(/fault fault_0 fired on POST \/chat\/ask/), alarm: true });
    },
  }),
  'fault.cleared': (s) => ({
    message: s.event('fault.cleared', { fault_id: 'fault_0', kind: 'rate_limit' }),
    check: (n) => expect(n.faults['fault_0']?.state).toBe('cleared'),
  }),
};

describe('dashboard reducer: every event of the core bus', () => {
  it('has a case for every event name', () => {
    expect(Object.keys(CASES).sort()).toEqual([...EVENT_NAMES].sort());
  });

  for (const name of EVENT_NAMES) {
    it(`${name} changes the state as the views show it, without touching the state it came from`, () => {
      const { s, state } = started();
      const frozen = JSON.stringify(state);
      const { message, check } = CASES[name](s, state);
      const next = reduce(state, message);
      expect(next).not.toBe(state);
      check(next);
      expect(next.seq).toBe(s.seq);
      expect(JSON.stringify(state)).toBe(frozen);
    });
  }
});

describe('dashboard reducer: the stream around the events', () => {
  it('an event at or below the overview sequence is ignored (it is already in the overview)', () => {
    const s = new Script({ seq: 10 });
    const state = fold([{ type: 'overview', overview: overview({ seq: 10 }) }]);
    const old = {
      type: 'event',
      event: {
        seq: 10,
        at: T0,
        name: 'grant.created',
        data: { grant_id: 'g', client_id: 'client-1', person_id: 'p', scopes: [], resource: null },
      },
    } as StreamMessage;
    expect(reduce(state, old)).toBe(state);
    expect(
      Object.keys(
        reduce(state, s.event('grant.created', { grant_id: 'g', client_id: 'client-1', person_id: 'p', scopes: [], resource: null }))
          .grants,
      ),
    ).toEqual(['g']);
  });

  it('an overview after a reconnect replaces what was known, and keeps the connection state', () => {
    const { state } = started();
    const connected = reduce(state, { type: 'connection', status: 'connected', url: 'http://x/_admin/events', at: 1 });
    const next = reduce(connected, { type: 'overview', overview: overview({ seq: 3 }) });
    expect(next.grants).toEqual({});
    expect(next.families).toEqual({});
    expect(next.seq).toBe(3);
    expect(next.connection.status).toBe('connected');
  });

  it('an overview fills every view: grants, families, jobs, charges, actions, requests, findings', () => {
    const snap = overview({
      seq: 5,
      grants: [
        {
          id: 'g1',
          client_id: 'client-1',
          person_id: 'person-anna',
          scopes: ['ask'],
          resource: null,
          created_at: T0,
          last_used_at: null,
          status: 'active',
          revoked_at: null,
          revoked_by: null,
        },
      ],
      families: [
        {
          id: 'f1',
          grant_id: 'g1',
          client_id: 'client-1',
          status: 'active',
          created_at: T0,
          invalidated_at: null,
          invalidated_reason: null,
          replayed_generation: null,
          chain: [{ generation: 1, issued_at: T0, rotated_at: null }],
          access_tokens: [],
        },
      ],
      research: [
        {
          id: 'j1',
          client_id: 'client-1',
          grant_id: 'g1',
          question: 'q',
          status: 'running',
          created_at: T0,
          finished_at: null,
          error: null,
        },
      ],
      training: [
        {
          id: 'd1',
          client_id: 'client-1',
          grant_id: 'g1',
          file_name: 'a.md',
          size: 1,
          processing_step: 'parsing',
          created_at: T0,
          finished_at: null,
          error: null,
        },
      ],
      charges: {
        by_client: { 'client-1': 2 },
        by_grant: { g1: 2 },
        entries: [
          { seq: 1, at: T0, client_id: 'client-1', grant_id: 'g1', route: 'POST /research', amount: 2, unit: 'AKh', idempotency_key: 'k' },
        ],
        replays: [{ seq: 3, at: T0 + 1, client_id: 'client-1', grant_id: 'g1', route: 'POST /research', key: 'k' }],
      },
      actions: [
        {
          id: 'a1',
          client_id: 'client-1',
          person_id: 'person-anna',
          kind: 'contacts',
          operation: 'create',
          description: 'd',
          status: 'pending',
          created_at: T0,
          decided_at: null,
        },
      ],
      requests: [{ seq: 4, at: T0, server: 'api', method: 'GET', path: '/x', status: 200, ms: 1 }],
      findings: [unusedScope, finding()],
    });
    const n = reduce(initialState(), { type: 'overview', overview: snap });
    expect(Object.keys(n.grants)).toEqual(['g1']);
    expect(Object.keys(n.families)).toEqual(['f1']);
    expect(n.research.j1?.status).toBe('running');
    expect(n.training.d1?.processing_step).toBe('parsing');
    expect(n.charges.entries).toEqual([
      expect.objectContaining({ seq: 1, free: false }),
      expect.objectContaining({ free: true, amount: 0, idempotency_key: 'k' }),
    ]);
    expect(n.actions.a1?.status).toBe('pending');
    expect(n.requests).toHaveLength(1);
    expect(n.findings.map((f) => f.severity)).toEqual(['error', 'info']);
  });

  it('a charge already in the overview is not counted twice when its event follows', () => {
    const entry = {
      seq: 1,
      at: T0,
      client_id: 'client-1',
      grant_id: 'g1',
      route: 'POST /research',
      amount: 2,
      unit: 'AKh' as const,
      idempotency_key: null,
    };
    const state = reduce(initialState(), {
      type: 'overview',
      overview: overview({ seq: 5, charges: { by_client: { 'client-1': 2 }, by_grant: { g1: 2 }, entries: [entry], replays: [] } }),
    });
    const next = reduce(state, new Script({ seq: 5 }).event('charge.recorded', entry));
    expect(next.charges.by_client['client-1']).toBe(2);
  });

  // The core changes its state, awaits the commit, then emits: an overview taken in between already shows the change.
  it('an event whose change the overview already shows is not applied twice (tokens, grants, jobs, actions)', () => {
    const { s, state } = started();
    const again = [
      new Script({ seq: s.seq, at: s.at }).event('tokens.issued', {
        grant_id: 'grant-1',
        client_id: 'client-1',
        family_id: 'fam-1',
        jti: 'jti-1',
        scopes: ['ask'],
        audience: 'a',
        expires_at: T0 + 902_000,
        generation: 1,
        grant_type: 'authorization_code',
      }),
      new Script({ seq: s.seq, at: s.at }).event('grant.created', {
        grant_id: 'grant-1',
        client_id: 'client-1',
        person_id: 'person-anna',
        scopes: ['ask'],
        resource: null,
      }),
      new Script({ seq: s.seq, at: s.at }).event('research.created', {
        job_id: 'job-1',
        client_id: 'client-1',
        grant_id: 'grant-1',
        question: 'x',
      }),
      new Script({ seq: s.seq, at: s.at }).event('training.received', {
        document_id: 'doc-1',
        client_id: 'client-1',
        grant_id: 'grant-1',
        file_name: 'x',
        size: 1,
      }),
      new Script({ seq: s.seq, at: s.at }).event('action.pending', {
        action_id: 'act-1',
        client_id: 'client-1',
        grant_id: 'grant-1',
        person_id: 'person-anna',
        kind: 'contacts',
        operation: 'update',
        description: 'x',
      }),
    ];
    for (const message of again) {
      const next = reduce(state, message);
      expect(next.families['fam-1']?.access_tokens).toHaveLength(1);
      expect(next.grants['grant-1']?.scopes).toEqual(['ask', 'workspace.write']);
      expect(next.research['job-1']?.question).toBe('Was gilt für Hunde?');
      expect(next.training['doc-1']?.file_name).toBe('hunde.md');
      expect(next.actions['act-1']?.description).toBe('Telefon von Jonas ändern');
    }
  });

  it('a family killed (code replay) before the event of its first tokens arrives stays invalidated', () => {
    const s = new Script();
    const n = fold([
      { type: 'overview', overview: overview() },
      s.event('family.invalidated', { grant_id: 'grant-9', family_id: 'fam-9', reason: 'code_replay' }),
      s.event('tokens.issued', {
        grant_id: 'grant-9',
        client_id: 'client-1',
        family_id: 'fam-9',
        jti: 'jti-9',
        scopes: ['ask'],
        audience: 'a',
        expires_at: T0 + 902_000,
        generation: 1,
        grant_type: 'authorization_code',
      }),
    ]);
    expect(n.families['fam-9']).toMatchObject({ status: 'invalidated', invalidated_reason: 'code_replay', chain: [{ generation: 1 }] });
  });

  it('finding.recorded: a finding counted again replaces its row (same id), once noted; an older copy changes nothing', () => {
    const s = new Script();
    const first = finding({ first_at: T0 + 1000, last_at: T0 + 1000 });
    const again = { ...first, count: 3, last_at: T0 + 5000 };
    const n = fold([
      { type: 'overview', overview: overview() },
      s.event('finding.recorded', first),
      s.event('finding.recorded', again),
      // A copy older than what is shown (the overview had the newer count already): ignored.
      s.event('finding.recorded', { ...first, count: 2, last_at: T0 + 3000 }),
    ]);
    expect(n.findings).toEqual([again]);
    expect(n.activity.filter((a) => a.text.includes('refresh.concurrent'))).toHaveLength(1);
  });

  it('findings: most severe first, then the newest; past the limit the least severe and oldest go', () => {
    const s = new Script();
    const info = (i: number) =>
      finding({ id: `scope.unused:c:${i}`, code: 'scope.unused', severity: 'info', first_at: T0 + i, last_at: T0 + i });
    const old = finding({ id: 'refresh.concurrent:c:old', first_at: T0, last_at: T0 });
    const warning = finding({ id: 'grant.abandoned:c:g', code: 'grant.abandoned', severity: 'warning', last_at: T0 + 7 });
    const n = fold([
      { type: 'overview', overview: overview({ findings: [info(1), old, info(2), warning] }) },
      ...Array.from({ length: LIMITS.findings }, (_, i) => s.event('finding.recorded', info(10 + i))),
    ]);
    expect(n.findings).toHaveLength(LIMITS.findings);
    expect(n.findings.slice(0, 3).map((f) => f.id)).toEqual([old.id, warning.id, `scope.unused:c:${LIMITS.findings + 9}`]);
    // The error stays although it is the oldest; the oldest info findings went.
    expect(n.findings.map((f) => f.id)).not.toContain(info(1).id);
    expect(n.findings.at(-1)?.id).toBe('scope.unused:c:12');
  });

  it('state.restored: a reset clears the findings (the emulator forgets them); a restore keeps them', () => {
    const s = new Script();
    const state = fold([{ type: 'overview', overview: overview({ findings: [finding()] }) }]);
    const reset = reduce(state, s.event('state.restored', { snapshot: '_baseline', reset: true }));
    expect(reset.findings).toEqual([]);
    expect(reset.activity.at(-1)?.text).toBe('state reset to the baseline');
    expect(reduce(state, s.event('state.restored', { snapshot: 'vorher', reset: false })).findings).toEqual([finding()]);
  });

  it('refresh.refused for a replay adds no note: family.invalidated, just before it, said which generation', () => {
    const { s, state } = started();
    const n = fold(
      [
        s.event('family.invalidated', { grant_id: 'grant-1', family_id: 'fam-1', reason: 'refresh_replay', replayed_generation: 1 }),
        s.event('refresh.refused', {
          client_id: 'client-1',
          grant_id: 'grant-1',
          family_id: 'fam-1',
          reason: 'replay',
          generation: 1,
          since_ms: 400,
        }),
      ],
      state,
    );
    expect(n.activity.at(-1)?.text).toBe('token family fam-1 invalidated: refresh token generation 1 replayed');
  });

  it('access.refused: a missing or an expired token is routine, not an alarm', () => {
    const { s, state } = started();
    const refused = (reason: 'token_missing' | 'token_expired' | 'insufficient_scope') =>
      reduce(
        state,
        s.event('access.refused', { client_id: null, grant_id: null, family_id: null, status: 401, reason, where: 'POST /mcp' }),
      ).activity.at(-1);
    expect(refused('token_missing')).toMatchObject({ text: '401 at POST /mcp: token missing', alarm: false });
    expect(refused('token_expired')?.alarm).toBe(false);
    expect(refused('insufficient_scope')?.alarm).toBe(true);
  });

  it('ticks move the clock; an unchanged tick (manual clock) leaves the state as it was', () => {
    const state = reduce(initialState(), { type: 'tick', now: T0 });
    expect(state.now).toBe(T0);
    expect(reduce(state, { type: 'tick', now: T0 })).toBe(state);
  });

  it('connection changes are recorded with their reason; a repeated one changes nothing', () => {
    const down = reduce(initialState(), { type: 'connection', status: 'disconnected', detail: 'refused', at: 5 });
    expect(down.connection).toEqual({ status: 'disconnected', detail: 'refused', url: null, since: 5 });
    expect(reduce(down, { type: 'connection', status: 'disconnected', detail: 'refused', at: 9 })).toBe(down);
  });

  it('the request log keeps the newest entries only', () => {
    const s = new Script();
    const messages = Array.from({ length: LIMITS.requests + 5 }, (_, i) =>
      s.event('request.served', { server: 'api', method: 'GET', path: `/r${i}`, status: 200, ms: 1 }, 1),
    );
    const n = fold(messages);
    expect(n.requests).toHaveLength(LIMITS.requests);
    expect(n.requests.at(-1)?.path).toBe(`/r${LIMITS.requests + 4}`);
  });
});

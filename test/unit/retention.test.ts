/**
 * Bounded retention (docs/serve.md "Retention"): finished records leave the state on the emulator clock, so a long
 * run's state stays small; replay detection of any earlier refresh token keeps working. The core on a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { DAY, HOUR, MINUTE } from '../../src/core/state/clock.js';
import { beginConsent, checkAuthorizationRequest, decideConsent } from '../../src/core/oauth/consent.js';
import { revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import { revokeToken } from '../../src/core/oauth/revocation.js';
import { DEFAULT_RETENTION, type Retention } from '../../src/core/oauth/retention.js';
import { exchangeToken } from '../../src/core/oauth/token-endpoint.js';
import { FAMILY_HISTORY } from '../../src/core/oauth/token-family.js';
import { parseRetentionFlag } from '../../src/cli/flags.js';
import { pkce } from '../helpers/oauth.js';
import { authorize, authorizeQuery, BINDING, exchangeCode, oauthError, openCore, register, T0 } from './helpers.js';

const core = (retention?: Partial<Retention>) => openCore(retention ? { retention } : {});

const job = (id: string, status: 'queued' | 'succeeded' | 'failed', finishedAt: number) => ({
  id,
  client_id: 'c',
  grant_id: 'g',
  person_id: 'person_erika',
  question: 'q',
  status,
  created_at: finishedAt - 5_000,
  queued_until: finishedAt - 4_000,
  running_until: finishedAt,
  ...(status === 'queued' ? {} : { finished_at: finishedAt }),
});

describe('retention on the emulator clock', () => {
  it('finished research jobs go 7 days after they finished; a job still open stays however old', async () => {
    const { core: c, clock } = await core();
    c.repo.put('research_jobs', 'done', job('done', 'succeeded', T0));
    c.repo.put('research_jobs', 'failed', job('failed', 'failed', T0 + HOUR));
    c.repo.put('research_jobs', 'open', job('open', 'queued', T0));
    clock.advance(7 * DAY - 1);
    expect(c.prune()).toBe(false);
    clock.advance(1);
    expect(c.prune()).toBe(true);
    expect(Object.keys(c.state.research_jobs).sort()).toEqual(['failed', 'open']);
    clock.advance(HOUR);
    c.prune();
    expect(Object.keys(c.state.research_jobs)).toEqual(['open']);
  });

  it('training documents whose ingest failed go after 7 days; indexed ones are the knowledge base and stay', async () => {
    const { core: c, clock } = await core();
    const doc = {
      client_id: 'c',
      grant_id: 'g',
      person_id: 'person_erika',
      file_name: 'a.md',
      title: 'A',
      content: 'x',
      size: 1,
      created_at: T0,
      step_ms: 500,
    };
    c.repo.put('training_documents', 'bad', {
      ...doc,
      id: 'bad',
      processing_step: 'failed',
      error: { code: 'unreadable_content', message: 'x' },
    });
    c.repo.put('training_documents', 'good', { ...doc, id: 'good', processing_step: 'indexed', indexed_at: T0 });
    clock.advance(30 * DAY);
    c.prune();
    expect(Object.keys(c.state.training_documents)).toEqual(['good']);
  });

  it('dead token families go 7 days after they died, live ones stay; decided write actions go 7 days after the decision', async () => {
    const { core: c, clock } = await core();
    const live = await issueTokensWithoutConsent(c, { scopes: ['ask'] });
    const dead = await issueTokensWithoutConsent(c, { scopes: ['ask'] });
    await revokeGrant(c, dead.grant_id, 'person');
    const base = {
      client_id: 'c',
      grant_id: 'g',
      person_id: 'person_erika',
      question: 'q',
      kind: 'contacts' as const,
      operation: 'create' as const,
      record_id: 'k',
      fields: {},
      description: 'd',
      created_at: T0,
    };
    c.repo.put('pending_actions', 'rejected', { ...base, id: 'rejected', status: 'rejected', decided_at: T0 });
    c.repo.put('pending_actions', 'pending', { ...base, id: 'pending', status: 'pending' });
    clock.advance(7 * DAY);
    c.prune();
    expect(Object.values(c.state.families).map((f) => f.grant_id)).toEqual([live.grant_id]);
    expect(Object.keys(c.state.pending_actions)).toEqual(['pending']);
    // The live family's refresh token still works.
    expect(
      (await exchangeToken(c, { grant_type: 'refresh_token', client_id: live.client_id, refresh_token: live.refresh_token! }))
        .refresh_token,
    ).toBeTruthy();
  });

  it('OAuth 2.1 §4.1.3: an expired code is kept a day to recognise its replay (which revokes its tokens), then it goes', async () => {
    const { core: c, clock } = await core();
    const a = await authorize(c, await register(c));
    await exchangeCode(c, a);
    clock.advance(DAY - 1);
    c.prune();
    expect(await oauthError(exchangeCode(c, a))).toBe('invalid_grant');
    expect(Object.values(c.state.families)[0]).toMatchObject({ status: 'invalidated', invalidated_reason: 'code_replay' });
    // The code's own expiry (60 s) plus the day it is kept.
    clock.advance(MINUTE + 1);
    c.prune();
    expect(c.state.codes).toEqual({});
  });

  it('RFC 7009: a revoked access token is remembered until an hour past its own expiry (its exp refuses it from then on)', async () => {
    const { core: c, clock } = await core();
    const issued = await issueTokensWithoutConsent(c, { scopes: ['ask'] });
    await revokeToken(c, { client_id: issued.client_id, token: issued.access_token });
    const [jti] = Object.keys(c.state.revoked_access_tokens);
    clock.advance(15 * MINUTE + HOUR - 1);
    c.prune();
    expect(Object.keys(c.state.revoked_access_tokens)).toEqual([jti]);
    clock.advance(1);
    c.prune();
    expect(c.state.revoked_access_tokens).toEqual({});
  });

  it('answered consent screens are forgotten once they expired on the clock', async () => {
    const { core: c, clock } = await core();
    const client = await register(c);
    const outcome = checkAuthorizationRequest(c, authorizeQuery(client, pkce().challenge));
    if (outcome.kind !== 'consent') throw new Error('refused');
    const interaction = beginConsent(c, outcome.request, 'person_erika', BINDING);
    await decideConsent(c, interaction.ticket, BINDING, 'deny');
    clock.advance(c.lifetimes.interaction - 1);
    c.prune();
    expect(c.consentScreens.wasAnswered(interaction.id)).toBe(true);
    clock.advance(1);
    c.prune();
    expect(c.consentScreens.wasAnswered(interaction.id)).toBe(false);
  });

  it('every kind is configurable (serve --retention jobs=1h,...); unknown kinds and bad durations are refused', async () => {
    const retention = parseRetentionFlag('jobs=1h,families=2d', parseRetentionFlag('codes=30m'));
    expect(retention).toEqual({ researchJobs: HOUR, deadFamilies: 2 * DAY, expiredCodes: 30 * 60_000 });
    const { core: c, clock } = await core(retention);
    expect(c.retention).toEqual({ ...DEFAULT_RETENTION, ...retention });
    c.repo.put('research_jobs', 'done', job('done', 'succeeded', T0));
    clock.advance(HOUR);
    c.prune();
    expect(c.state.research_jobs).toEqual({});
    for (const bad of ['nope=1d', 'jobs=', 'jobs=soon', 'jobs=-1d', 'jobs']) expect(() => parseRetentionFlag(bad)).toThrow(/kind|duration/);
  });

  it(`spec 3.2: a family keeps ${FAMILY_HISTORY} rotated generations, yet a replay of ANY earlier refresh token kills it (the handle names the family)`, async () => {
    const { core: c } = await core();
    const first = await issueTokensWithoutConsent(c, { scopes: ['ask'] });
    const tokens = [first.refresh_token!];
    for (let i = 0; i < FAMILY_HISTORY + 6; i++)
      tokens.push(
        (await exchangeToken(c, { grant_type: 'refresh_token', client_id: first.client_id, refresh_token: tokens.at(-1)! })).refresh_token!,
      );
    const family = Object.values(c.state.families)[0]!;
    expect(family.history).toHaveLength(FAMILY_HISTORY);
    await expect(
      exchangeToken(c, { grant_type: 'refresh_token', client_id: first.client_id, refresh_token: tokens[0]! }),
    ).rejects.toMatchObject({ error: 'invalid_grant' });
    expect(Object.values(c.state.families)[0]).toMatchObject({
      status: 'invalidated',
      invalidated_reason: 'refresh_replay',
      replayed_generation: null,
    });
    // The newest token died with its family.
    await expect(
      exchangeToken(c, { grant_type: 'refresh_token', client_id: first.client_id, refresh_token: tokens.at(-1)! }),
    ).rejects.toMatchObject({ error: 'invalid_grant' });
  });
});

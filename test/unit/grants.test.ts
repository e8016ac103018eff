/** Grants (spec 3.3, 5.7, 9), in this process on a manual clock: stored so they can be revoked, and revocation ends every family of the grant. */
import { describe, expect, it } from 'vitest';
import { listGrants, revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { authorize, exchangeCode, oauthError, openCore, refresh, walkToTokens } from './helpers.js';

describe('grants', () => {
  it('spec 3.3: revoking a grant invalidates every token family of it, refresh tokens included', async () => {
    const { core, clock, eventsNamed } = await openCore();
    const first = await walkToTokens(core);
    // Each approval is a grant of its own: the client's second grant must outlive the first.
    const second = await exchangeCode(core, await authorize(core, first.client));
    clock.advance(1000);
    const revoked = await revokeGrant(core, first.grantId, 'person');
    expect(revoked).toMatchObject({ status: 'revoked', revoked_by: 'person', revoked_at: clock.now() });
    expect(eventsNamed('family.invalidated')).toEqual([expect.objectContaining({ grant_id: first.grantId, reason: 'grant_revoked' })]);
    expect(await oauthError(refresh(core, first.client.client_id, first.tokens.refresh_token))).toBe('invalid_grant');
    // The other grant of the same client is untouched.
    await expect(refresh(core, first.client.client_id, second.refresh_token!)).resolves.toMatchObject({ token_type: 'Bearer' });
  });

  it('spec 3.3: revoking twice changes nothing more; an unknown grant, or one of another person, is 404', async () => {
    const { core, eventsNamed } = await openCore();
    const { grantId } = await walkToTokens(core);
    await revokeGrant(core, grantId, 'person');
    await revokeGrant(core, grantId, 'admin');
    expect(core.state.grants[grantId]!.revoked_by).toBe('person');
    expect(eventsNamed('grant.revoked')).toHaveLength(1);
    await expect(revokeGrant(core, 'grant_nope', 'person')).rejects.toMatchObject({ status: 404 });
    const other = await walkToTokens(core);
    await expect(revokeGrant(core, other.grantId, 'person', 'person_max')).rejects.toMatchObject({ status: 404 });
  });

  it('spec 3.3: stored grants are listed newest first with their client and families', async () => {
    const { core, clock } = await openCore();
    const older = await walkToTokens(core, { client: { client_name: 'Älter' } });
    clock.advance(1000);
    const newer = await walkToTokens(core, { client: { client_name: 'Neuer' } });
    await refresh(core, newer.client.client_id, newer.tokens.refresh_token);
    const listed = listGrants(core);
    expect(listed.map((g) => [g.id, g.client_name])).toEqual([
      [newer.grantId, 'Neuer'],
      [older.grantId, 'Älter'],
    ]);
    expect(listed[0]!.families).toEqual([expect.objectContaining({ status: 'active', rotations: 1, generation: 2 })]);
    expect(listGrants(core, { client_id: older.client.client_id }).map((g) => g.id)).toEqual([older.grantId]);
  });

  it('spec 9: a grant that still carries retired scopes loses them at its next refresh', async () => {
    const { core, eventsNamed } = await openCore({
      seedGrants: [
        {
          id: 'grant_legacy',
          client: { client_id: 'client_legacy', client_name: 'Alt', redirect_uris: ['http://127.0.0.1/cb'] },
          person_id: 'person_erika',
          scopes: ['ask', 'documents.read'],
          resource: 'mcp',
          refresh_token: 'aa1.legacyHandleLegacyHandle.legacySecretLegacySecretLegacySecret00',
        },
      ],
    });
    const tokens = await refresh(core, 'client_legacy', 'aa1.legacyHandleLegacyHandle.legacySecretLegacySecretLegacySecret00');
    expect(tokens.scope).toBe('ask');
    expect(core.state.grants.grant_legacy!.scopes).toEqual(['ask']);
    expect(eventsNamed('grant.scopes_reduced')).toEqual([{ grant_id: 'grant_legacy', removed: ['documents.read'], scopes: ['ask'] }]);
  });
});

import {
  redirectWith,
  validateAuthorizationRequest,
  type AuthorizationOutcome,
  type AuthorizationRequest,
  type QueryValue,
} from './authorize.js';
import type { CoreContext } from '../context.js';
import { newId, randomToken, safeEqual, sha256 } from '../state/crypto.js';
import { ProblemError } from '../state/errors.js';
import { announceGrant, createGrant } from './grants-admin.js';
import type { ConsentPolicy, Interaction } from './consent-screens.js';
import { storedResourceName } from './resource-names.js';

/**
 * Spec 4.2, OAuth 2.1 §4.1.1: the authorization request checked against the registered clients, this issuer and
 * this resource (the two phases are in authorize.ts).
 */
export function checkAuthorizationRequest(core: CoreContext, query: Record<string, QueryValue>): AuthorizationOutcome {
  const outcome = validateAuthorizationRequest((id) => core.repo.get('clients', id), query, core.issuer, core.resource);
  if (outcome.kind !== 'consent')
    core.events.emit('authorize.refused', {
      client_id: outcome.client_id,
      error: outcome.error.error,
      description: outcome.error.message,
      missing: outcome.missing,
    });
  return outcome;
}

/**
 * Opens a consent screen. Consent is asked every time, even when a grant exists (spec 3.3, 5.6). Nothing of it is
 * kept: its form carries it back (ConsentScreens).
 */
export function beginConsent(core: CoreContext, request: AuthorizationRequest, personId: string, binding: string): Interaction {
  const answeredBy = core.consentPolicies.for(request.client.client_id).decision === 'page' ? 'person' : 'policy';
  const interaction = core.consentScreens.open({
    request,
    person_id: personId,
    binding,
    expires_at: core.clock.now() + core.lifetimes.interaction,
  });
  core.events.emit('consent.shown', {
    interaction_id: interaction.id,
    client_id: request.client.client_id,
    client_name: request.client.client_name,
    person_id: personId,
    scopes: request.scopes,
    resource: request.resource,
    answered_by: answeredBy,
  });
  return interaction;
}

/**
 * The screen a form's ticket carries, if this emulator signed it, it has not expired, it was not answered yet, and it
 * belongs to `binding`, the browser session that saw it (RFC 6749 §10.12: consent cannot be given from another
 * session's page).
 */
export function findInteraction(core: CoreContext, ticket: string, binding: string): Interaction | undefined {
  const interaction = core.consentScreens.read(ticket, (id) => core.repo.get('clients', id));
  if (
    !interaction ||
    interaction.expires_at <= core.clock.now() ||
    !safeEqual(interaction.binding, binding) ||
    core.consentScreens.wasAnswered(interaction.id)
  )
    return undefined;
  return interaction;
}

/**
 * Spec 5.6, OAuth 2.1 §4.1.2: the person's answer. Approve stores a grant and a single-use code; deny answers `access_denied`.
 * Returns where to send the browser (always with `state` and `iss`, RFC 9207). A consent policy answers through
 * here too (`by: 'policy'`), and may approve only some of the requested scopes (`scopes`, RFC 6749 §3.3).
 */
export async function decideConsent(
  core: CoreContext,
  ticket: string,
  binding: string,
  decision: 'approve' | 'deny',
  answer: { by: 'person' | 'policy'; scopes?: readonly string[] } = { by: 'person' },
): Promise<string> {
  const interaction = findInteraction(core, ticket, binding);
  if (!interaction)
    throw new ProblemError(
      'consent_expired',
      'Diese Anfrage ist abgelaufen oder wurde bereits beantwortet. Bitte starten Sie die Anmeldung in der Anwendung erneut.',
    );
  core.consentScreens.answered(interaction);
  const { id, request } = interaction;
  const granted = answer.scopes ? request.scopes.filter((s) => answer.scopes!.includes(s)) : [...request.scopes];
  const base = { client_id: request.client.client_id, person_id: interaction.person_id, by: answer.by };
  if (decision === 'deny' || granted.length === 0) {
    core.events.emit('consent.denied', { interaction_id: id, ...base, scopes: request.scopes });
    const description =
      decision === 'deny'
        ? `the ${answer.by === 'policy' ? 'consent policy' : 'person'} denied access`
        : 'the consent policy approves none of the requested scopes';
    return redirectWith(request.redirect_uri, {
      error: 'access_denied',
      error_description: description,
      state: request.state,
      iss: core.issuer,
    });
  }
  const now = core.clock.now();
  const grant = createGrant(core, {
    id: newId('grant'),
    client_id: request.client.client_id,
    person_id: interaction.person_id,
    scopes: granted,
    // The loopback name the client asked for (RFC 8707): its tokens' audience, at whatever port the service runs on.
    resource: request.resource === null ? null : storedResourceName(core.resource, request.resource),
    created_at: now,
  });
  const code = randomToken(32);
  core.repo.put('codes', sha256(code), {
    hash: sha256(code),
    client_id: grant.client_id,
    grant_id: grant.id,
    redirect_uri: request.redirect_uri,
    code_challenge: request.code_challenge,
    issued_at: now,
    expires_at: now + core.lifetimes.code,
    consumed_at: null,
    family_id: null,
  });
  await core.commit();
  core.events.emit('consent.approved', {
    interaction_id: id,
    ...base,
    scopes: granted,
    requested_scopes: request.scopes,
    grant_id: grant.id,
  });
  announceGrant(core, grant);
  core.events.emit('code.issued', { grant_id: grant.id, client_id: grant.client_id, expires_at: now + core.lifetimes.code });
  return redirectWith(request.redirect_uri, { code, state: request.state, iss: core.issuer });
}

/**
 * Consent as code (emulator control, not part of the service): when a policy answers for this client, the
 * interaction the page would show is answered at once through `decideConsent`, recorded as the policy's decision;
 * returns where to send the browser. Null: the page is shown to the person.
 */
export function answerByPolicy(core: CoreContext, interaction: Interaction): Promise<string> | null {
  const policy = core.consentPolicies.for(interaction.request.client.client_id);
  if (policy.decision === 'page') return null;
  return decideConsent(core, interaction.ticket, interaction.binding, policy.decision, {
    by: 'policy',
    scopes: policy.decision === 'approve' ? policy.scopes : undefined,
  });
}

/** Consent as code (emulator control): sets who answers the consent screen, for one client or (null) all. */
export function setConsentPolicy(core: CoreContext, clientId: string | null, policy: ConsentPolicy): void {
  core.consentPolicies.set(clientId, policy);
  core.events.emit('consent_policy.set', { client_id: clientId, ...policy });
}

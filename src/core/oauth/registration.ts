import { epochSeconds } from '../state/clock.js';
import type { CoreContext } from '../context.js';
import { newId } from '../state/crypto.js';
import { OAuthError, invalidClient } from '../state/errors.js';
import { validateRedirectUri } from './redirect-uri.js';
import type { Client } from '../state/state.js';

export interface ClientMetadataInput {
  client_name?: unknown;
  redirect_uris?: unknown;
  grant_types?: unknown;
  response_types?: unknown;
  token_endpoint_auth_method?: unknown;
  application_type?: unknown;
  [other: string]: unknown;
}

export interface ClientMetadata {
  client_name: string;
  redirect_uris: string[];
  grant_types: string[];
  response_types: string[];
  token_endpoint_auth_method: 'none';
  application_type?: 'native' | 'web';
}

const bad = (description: string) => new OAuthError('invalid_client_metadata', description, { redirectable: false });

const stringList = (value: unknown, field: string): string[] => {
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string')) {
    throw bad(`${field} is required and must be a non-empty array of strings`);
  }
  return [...new Set(value)];
};

/**
 * Spec 2.1 and RFC 7591 §2: every field of 2.1 is required; `application_type` is kept when sent; unknown fields are
 * ignored.
 * Throws `invalid_redirect_uri` or `invalid_client_metadata` naming the field.
 */
export function validateClientMetadata(input: ClientMetadataInput): ClientMetadata {
  if (typeof input.client_name !== 'string' || input.client_name.trim() === '')
    throw bad('client_name is required and must be a non-empty string');
  if (input.client_name.length > 200) throw bad('client_name must be at most 200 characters');
  // Shown to the person on the consent screen and the settings page: no control characters (C0, DEL, C1).
  const control = /[\u0000-\u001f\u007f-\u009f]/.exec(input.client_name);
  if (control)
    throw bad(
      `client_name contains the control character U+${control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} at position ${control.index}`,
    );
  if (!Array.isArray(input.redirect_uris) || input.redirect_uris.length === 0 || !input.redirect_uris.every((v) => typeof v === 'string')) {
    throw new OAuthError('invalid_redirect_uri', 'redirect_uris is required and must be a non-empty array of strings', {
      redirectable: false,
    });
  }
  const redirect_uris = [...new Set(input.redirect_uris)];
  redirect_uris.forEach(validateRedirectUri);
  const grant_types = stringList(input.grant_types, 'grant_types');
  const unsupportedGrant = grant_types.filter((g) => g !== 'authorization_code' && g !== 'refresh_token');
  if (unsupportedGrant.length > 0)
    throw bad(`grant_types: ${unsupportedGrant.join(', ')} not supported; allowed: authorization_code, refresh_token`);
  if (!grant_types.includes('authorization_code')) throw bad('grant_types must include authorization_code');
  const response_types = stringList(input.response_types, 'response_types');
  if (response_types.some((r) => r !== 'code')) throw bad('response_types: only "code" is supported');
  if (input.token_endpoint_auth_method !== 'none') {
    const hint =
      'Register with token_endpoint_auth_method "none": clients here are public (PKCE, no secret, spec 5.1). Left out, RFC 7591 ' +
      'section 2 means client_secret_basic, so clients that omit it ask for a secret.';
    throw new OAuthError(
      'invalid_client_metadata',
      input.token_endpoint_auth_method === undefined
        ? 'token_endpoint_auth_method is required and must be "none"'
        : `token_endpoint_auth_method ${JSON.stringify(input.token_endpoint_auth_method)} is not supported; clients are public: use "none"`,
      { redirectable: false, hint },
    );
  }
  // OpenID Connect Registration §2 defines the two values; RFC 7591 §2 lets a server keep metadata it knows.
  if (input.application_type !== undefined && input.application_type !== 'native' && input.application_type !== 'web')
    throw bad(
      `application_type ${JSON.stringify(input.application_type)} is not supported; use "native" (loopback redirect URIs) or "web"`,
    );
  return {
    client_name: input.client_name,
    redirect_uris,
    grant_types,
    response_types,
    token_endpoint_auth_method: 'none',
    ...(input.application_type === undefined ? {} : { application_type: input.application_type }),
  };
}

/**
 * Spec 4.1, RFC 7591 §3.2.1: a public client with the checked metadata and a new `client_id`, put in the repository
 * (the caller's use case commits). Throws as `validateClientMetadata` does, or 503 when the table is full, before
 * anything is stored.
 */
export function createClient(core: CoreContext, input: ClientMetadataInput): Client {
  const metadata = validateClientMetadata(input);
  core.registrations.checkRoom(core.clock.now());
  const client: Client = {
    client_id: newId('client'),
    client_id_issued_at: epochSeconds(core.clock.now()),
    ...metadata,
    self_registered: true,
  };
  core.repo.put('clients', client.client_id, client);
  return client;
}

/** Said once the client is durable. */
export function announceClient(core: CoreContext, client: Client): void {
  core.events.emit('client.registered', {
    client_id: client.client_id,
    client_name: client.client_name,
    redirect_uris: client.redirect_uris,
  });
}

/**
 * The registration endpoint (spec 4.1): registers a public client, durable before it answers. The rate per source is
 * the adapter's to take (`RegistrationGate.admit`), before it reads the body.
 */
export async function registerClient(core: CoreContext, input: ClientMetadataInput): Promise<Client> {
  const client = createClient(core, input);
  await core.commit();
  announceClient(core, client);
  return client;
}

/** RFC 6749 §5.2: the registered client named by `client_id`, or `invalid_client` (the token and revocation endpoints). */
export function requireClient(core: CoreContext, clientId: string): Client {
  const client = core.repo.get('clients', clientId);
  if (!client) throw invalidClient(`unknown client_id "${clientId}"; register again`);
  return client;
}

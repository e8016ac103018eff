import { nameReached } from './resource-names.js';
import { SUPPORTED_SCOPES } from './scopes.js';

export interface ServiceUrls {
  /** `{base_url}`: the API host, and the issuer. */
  baseUrl: string;
  /** `{auth_url}`: the browser-facing host. */
  authUrl: string;
}

export const issuerOf = (urls: ServiceUrls): string => urls.baseUrl;
export const resourceOf = (urls: ServiceUrls): string => `${urls.baseUrl}/mcp`;
/** RFC 8414 §3: the authorization server's metadata, at the issuer (which has no path). */
export const AS_METADATA_PATH = '/.well-known/oauth-authorization-server';
export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource/mcp';
/**
 * Where the metadata of the resource is (RFC 9728 §3.1), at the name the request reached (`host`: its Host header),
 * so that what a client fetches from a challenge names the resource it was given (§3.3).
 */
export function resourceMetadataUrl(urls: ServiceUrls, host?: string): string {
  const canonical = resourceOf(urls);
  const reached = nameReached(canonical, host);
  return `${reached.resource === canonical ? urls.baseUrl : reached.origin}${PROTECTED_RESOURCE_METADATA_PATH}`;
}

/** RFC 8414 authorization-server metadata. */
export function authorizationServerMetadata(urls: ServiceUrls) {
  const { baseUrl, authUrl } = urls;
  return {
    issuer: issuerOf(urls),
    authorization_endpoint: `${authUrl}/oauth/authorize`,
    token_endpoint: `${baseUrl}/oauth/token`,
    registration_endpoint: `${baseUrl}/oauth/register`,
    revocation_endpoint: `${baseUrl}/oauth/revoke`,
    jwks_uri: `${baseUrl}/.well-known/jwks.json`,
    scopes_supported: [...SUPPORTED_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    authorization_response_iss_parameter_supported: true,
  };
}

/**
 * RFC 9728 protected-resource metadata for `{base_url}/mcp`, named as the request reached it (`host`: its Host
 * header; a loopback name of `{base_url}`, RFC 9728 §3.3). The authorization server stays the one issuer.
 */
export function protectedResourceMetadata(urls: ServiceUrls, host?: string) {
  return {
    resource: nameReached(resourceOf(urls), host).resource,
    authorization_servers: [issuerOf(urls)],
    scopes_supported: [...SUPPORTED_SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Agent Access Service (agent-access emulator)',
  };
}

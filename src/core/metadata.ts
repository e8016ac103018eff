import { SUPPORTED_SCOPES } from './scopes.js';

export interface ServiceUrls {
  /** `{base_url}`: the API host, and the issuer. */
  baseUrl: string;
  /** `{auth_url}`: the browser-facing host. */
  authUrl: string;
}

export const issuerOf = (urls: ServiceUrls): string => urls.baseUrl;
export const resourceOf = (urls: ServiceUrls): string => `${urls.baseUrl}/mcp`;
export const PROTECTED_RESOURCE_METADATA_PATH = '/.well-known/oauth-protected-resource/mcp';
export const resourceMetadataUrl = (urls: ServiceUrls): string => `${urls.baseUrl}${PROTECTED_RESOURCE_METADATA_PATH}`;

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

/** RFC 9728 protected-resource metadata for `{base_url}/mcp`. */
export function protectedResourceMetadata(urls: ServiceUrls) {
  return {
    resource: resourceOf(urls),
    authorization_servers: [issuerOf(urls)],
    scopes_supported: [...SUPPORTED_SCOPES],
    bearer_methods_supported: ['header'],
    resource_name: 'Agent Access Service (agent-access emulator)',
  };
}

/** The MCP TypeScript SDK's client with an OAuth provider, driven through the emulator's real consent form. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Emulator } from '../../src/server/emulator.js';
import { Browser } from './oauth.js';

const REDIRECT = 'http://127.0.0.1:9/callback';

/** An OAuthClientProvider whose "browser" submits the consent form ("Zulassen") and keeps the code it was sent back with. */
export class ConsentingProvider implements OAuthClientProvider {
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = '';
  code: string | undefined;
  authorizationUrl: URL | undefined;
  constructor(readonly scope: string) {}
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'MCP SDK test agent',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      scope: this.scope,
    };
  }
  /** Spec 4.2: state is required (the SDK sends one only when the provider makes it). */
  state() {
    return randomBytes(16).toString('base64url');
  }
  clientInformation() {
    return this.#client;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.#client = info;
  }
  tokens() {
    return this.#tokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.#tokens = tokens;
  }
  saveCodeVerifier(verifier: string) {
    this.#verifier = verifier;
  }
  codeVerifier() {
    return this.#verifier;
  }
  async redirectToAuthorization(url: URL) {
    this.authorizationUrl = new URL(url);
    // The SDK asks for the scope the 401 challenge names ("ask"); an agent configured for more asks for it.
    url.searchParams.set('scope', this.scope);
    const { answer } = await new Browser().submitForm(url.toString(), { decision: 'approve' });
    this.code = new URL(answer.headers.location as string).searchParams.get('code') ?? undefined;
  }
}

/** The SDK's whole flow: connect → 401 → auth (discovery, registration, consent) → finishAuth → connect again. */
export async function connectWithOAuth(emulator: Emulator, scope: string, url = new URL(`${emulator.baseUrl}/mcp`)) {
  const provider = new ConsentingProvider(scope);
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await expect(new Client({ name: 'test-agent', version: '1' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.code).toBeTruthy();
  await first.finishAuth(provider.code!);
  const client = new Client({ name: 'test-agent', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
  return { client, provider };
}

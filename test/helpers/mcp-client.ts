/**
 * The MCP TypeScript SDK's clients with an OAuth provider, driven through the emulator's real consent form: SDK 1.x,
 * which speaks the 2025 revisions, and SDK 2 pinned to 2026-07-28.
 */
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
  UnauthorizedError as UnauthorizedErrorV2,
  type OAuthClientProvider as OAuthClientProviderV2,
} from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Emulator } from '../../src/server/emulator.js';
import { fetchInProcess } from './in-process.js';
import { Browser } from './oauth.js';

const REDIRECT = 'http://127.0.0.1:9/callback';

/** An OAuthClientProvider whose "browser" submits the consent form ("Zulassen") and keeps the code it was sent back with. */
export class ConsentingProvider implements OAuthClientProvider {
  #client: OAuthClientInformationMixed | undefined;
  #tokens: OAuthTokens | undefined;
  #verifier = '';
  code: string | undefined;
  /** The parameters of the redirect back to the client (code, state, iss), as SDK 2's finishAuth checks them. */
  callback: URLSearchParams | undefined;
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
    this.callback = new URL(answer.headers.location as string).searchParams;
    this.code = this.callback.get('code') ?? undefined;
  }
}

/** The MCP protocol versions the tests run the tools under: the newest of 2025 (SDK 1.x) and 2026-07-28 (SDK 2). */
export const MCP_VERSIONS = ['2025-11-25', '2026-07-28'] as const;
export type McpVersion = (typeof MCP_VERSIONS)[number];

/** What the tests call on either SDK's client. */
export type McpTestClient = Pick<Client, 'callTool' | 'listTools' | 'close' | 'getServerVersion'>;

const CLIENT_INFO = { name: 'test-agent', version: '1' };

/**
 * The SDK's whole flow: connect → 401 → auth (discovery, registration, consent) → finishAuth → connect again. Under
 * 2026-07-28 it is SDK 2's client pinned to that version (no fallback to 2025).
 */
export async function connectWithOAuth(
  emulator: Emulator,
  scope: string,
  url = new URL(`${emulator.baseUrl}/mcp`),
  version: McpVersion = '2025-11-25',
): Promise<{ client: McpTestClient; provider: ConsentingProvider }> {
  const provider = new ConsentingProvider(scope);
  if (version === '2026-07-28') {
    const options = { versionNegotiation: { mode: { pin: version } } };
    const authProvider = provider as unknown as OAuthClientProviderV2;
    const first = new StreamableHTTPClientTransportV2(url, { authProvider, fetch: fetchInProcess });
    await expect(new ClientV2(CLIENT_INFO, options).connect(first)).rejects.toBeInstanceOf(UnauthorizedErrorV2);
    expect(provider.callback?.get('code')).toBeTruthy();
    await first.finishAuth(provider.callback!);
    const client = new ClientV2(CLIENT_INFO, options);
    await client.connect(new StreamableHTTPClientTransportV2(url, { authProvider, fetch: fetchInProcess }));
    expect(client.getNegotiatedProtocolVersion()).toBe(version);
    return { client: client as unknown as McpTestClient, provider };
  }
  const first = new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: fetchInProcess });
  await expect(new Client(CLIENT_INFO).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.code).toBeTruthy();
  await first.finishAuth(provider.code!);
  const client = new Client(CLIENT_INFO);
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider, fetch: fetchInProcess }));
  return { client, provider };
}

export type Structured = Record<string, any>;

/** Calls a tool; its structured content and the text of its first content part. */
export const call = async (client: McpTestClient, name: string, args: Record<string, unknown>) => {
  const result = await client.callTool({ name, arguments: args });
  return { result, data: result.structuredContent as Structured, text: (result.content as Array<{ text: string }>)[0]?.text ?? '' };
};

/** The person opens the approval page and clicks "Freigeben" or "Ablehnen"; the page after it, as text. */
export async function decide(approveUrl: string, button: 'approve' | 'reject') {
  const browser = new Browser();
  const { answer } = await browser.submitForm(approveUrl, { decision: button });
  expect(answer.status).toBe(303);
  return (await browser.get(new URL(answer.headers.location as string, approveUrl).toString())).text;
}

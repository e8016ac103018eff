/**
 * The core in this process, on a manual clock and in memory: no sockets, no files. Builds it as the emulator does
 * (src/server/emulator.ts) and walks a client through the OAuth rules by calling them directly, as the HTTP
 * adapters would: register, authorize, consent, code, tokens, refresh.
 */
import { expect } from 'vitest';
import { ManualClock } from '../../src/core/state/clock.js';
import { beginConsent, checkAuthorizationRequest, decideConsent } from '../../src/core/oauth/consent.js';
import { Core, type CoreOptions } from '../../src/core/core.js';
import type { AppEvent, EventMap, EventName } from '../../src/core/state/events.js';
import type { TokenParams, TokenResponse } from '../../src/core/oauth/grants/index.js';
import type { Person } from '../../src/core/state/persons.js';
import { composeAnswer } from '../../src/core/resources/ask.js';
import { composeReport } from '../../src/core/resources/compose.js';
import { SearchIndex, type Analyzer } from '../../src/core/resources/search.js';
import { CATALOGUE, type Choices, type VariantSelection, type VariedKind } from '../../src/core/emulation/variation.js';
import { loadFixtures } from '../../src/loaders/fixtures.js';
import { registerClient, type ClientMetadataInput } from '../../src/core/oauth/registration.js';
import type { Client } from '../../src/core/state/state.js';
import { exchangeToken } from '../../src/core/oauth/token-endpoint.js';
import { MemoryPersistence } from '../../src/store/memory-persistence.js';
import { pkce, type Pkce } from '../helpers/oauth.js';

/** 1 March 2026, 09:00 UTC: every unit test starts its clock here. */
export const T0 = Date.UTC(2026, 2, 1, 9);
export const BASE_URL = 'http://127.0.0.1:4100';
export const AUTH_URL = 'http://127.0.0.1:4101';
/** Spec 4.2: the resource an agent asks for, `{base_url}/mcp`. */
export const RESOURCE = `${BASE_URL}/mcp`;
export const REDIRECT_URI = 'http://127.0.0.1:8976/callback';
/** The browser session the consent page was shown to. */
export const BINDING = 'browser-session-1';

export const PERSONS: Person[] = [
  { id: 'person_erika', name: 'Erika Mustermann', email: 'erika.mustermann@example.de', default: true },
  { id: 'person_max', name: 'Max Müller', email: 'max.mueller@example.de' },
];

export interface TestCore {
  core: Core;
  clock: ManualClock;
  /** Every event the core published since it was opened, oldest first. */
  events: AppEvent[];
  /** The payloads of the events of one name. */
  eventsNamed: <N extends EventName>(name: N) => EventMap[N][];
}

/** A new core in memory on a manual clock at T0, listening at BASE_URL and AUTH_URL. */
export async function openCore(options: Partial<Omit<CoreOptions, 'clock' | 'persistence'>> = {}): Promise<TestCore> {
  const clock = new ManualClock(T0);
  const core = await Core.open({ persons: PERSONS, ...options, clock, persistence: new MemoryPersistence() });
  core.setUrls({ baseUrl: BASE_URL, authUrl: AUTH_URL });
  const events: AppEvent[] = [];
  core.events.subscribe((e) => events.push(e));
  const eventsNamed = <N extends EventName>(name: N) => events.filter((e) => e.name === name).map((e) => e.data as EventMap[N]);
  return { core, clock, events, eventsNamed };
}

/** Spec 2.1: a complete registration, with `overrides` in place of (or `undefined` removing) its fields. */
export const clientMetadata = (overrides: ClientMetadataInput = {}): ClientMetadataInput => ({
  client_name: 'Unit-Test-Agent',
  redirect_uris: [REDIRECT_URI],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
  ...overrides,
});

export const register = (core: Core, overrides: ClientMetadataInput = {}): Promise<Client> =>
  registerClient(core, clientMetadata(overrides));

/** The query of an authorization request (spec 4.2), complete for an agent: with `resource`. */
export function authorizeQuery(
  client: Client,
  challenge: string,
  overrides: Record<string, string | string[] | undefined> = {},
): Record<string, string | string[] | undefined> {
  return {
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0],
    response_type: 'code',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'state-1',
    scope: 'ask',
    resource: RESOURCE,
    ...overrides,
  };
}

export interface Authorized {
  client: Client;
  pkce: Pkce;
  code: string;
  /** Where the browser went back to after consent. */
  location: URL;
}

/**
 * Spec 4.2, 5.6: the request checked, the consent screen shown to the default person, and answered `approve`; returns
 * the code from the redirect. `query` overrides parameters of the request.
 */
export async function authorize(
  core: Core,
  client: Client,
  query: Record<string, string | string[] | undefined> = {},
  verifier: Pkce = pkce(),
): Promise<Authorized> {
  const outcome = checkAuthorizationRequest(core, authorizeQuery(client, verifier.challenge, query));
  if (outcome.kind !== 'consent') throw new Error(`authorization request refused: ${outcome.error.error} ${outcome.error.message}`);
  const interaction = beginConsent(core, outcome.request, core.defaultPerson.id, BINDING);
  const location = new URL(await decideConsent(core, interaction.ticket, BINDING, 'approve'));
  const code = location.searchParams.get('code');
  expect(code, `no code in ${location.href}`).toBeTruthy();
  return { client, pkce: verifier, code: code!, location };
}

/** Spec 4.3: the authorization_code grant, with the parameters the client would send. */
export const exchangeCode = (
  core: Core,
  a: Pick<Authorized, 'client' | 'pkce' | 'code'>,
  overrides: TokenParams = {},
): Promise<TokenResponse> =>
  exchangeToken(core, {
    grant_type: 'authorization_code',
    client_id: a.client.client_id,
    code: a.code,
    redirect_uri: a.client.redirect_uris[0],
    code_verifier: a.pkce.verifier,
    ...overrides,
  });

/** OAuth 2.1 §4.3: the refresh_token grant. */
export const refresh = (core: Core, clientId: string, refreshToken: string, overrides: TokenParams = {}): Promise<TokenResponse> =>
  exchangeToken(core, { grant_type: 'refresh_token', client_id: clientId, refresh_token: refreshToken, ...overrides });

/** Register, authorize, consent, exchange: a client with its first tokens. */
export async function walkToTokens(
  core: Core,
  options: { scope?: string; resource?: string | undefined; client?: ClientMetadataInput } = {},
): Promise<{ client: Client; tokens: TokenResponse & { refresh_token: string }; grantId: string }> {
  const client = await register(core, options.client);
  const a = await authorize(core, client, { scope: options.scope ?? 'ask', resource: 'resource' in options ? options.resource : RESOURCE });
  const tokens = await exchangeCode(core, a);
  const grant = Object.values(core.state.grants).find((g) => g.client_id === client.client_id);
  return { client, tokens: tokens as TokenResponse & { refresh_token: string }, grantId: grant!.id };
}

/** The payload of a JWT, undecoded and unchecked (spec 2.3: the access token can be decoded). */
export const claimsOf = (jwt: string): Record<string, unknown> =>
  JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;

/** The OAuth error code a rejected promise carries (`invalid_grant`, ...), or the error itself when it is no OAuth error. */
export async function oauthError(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (e) {
    return (e as { error?: string }).error ?? String(e);
  }
  throw new Error('expected an OAuth error, but the call succeeded');
}

/** An analyzer without stemmer, stop words or compounds: a text's words in lower case (for hand-made hits). */
export const wordsAnalyzer: Analyzer = Object.assign(
  (text: string) =>
    text
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter(Boolean),
  { terms: (text: string) => wordsAnalyzer(text).map((stem) => ({ stem, parts: [] })) },
);

/** Ask and research over the shipped fixtures, searched and written as the emulator does (no server, no clock). */
export async function fixturesRetrieval() {
  const fixtures = await loadFixtures();
  const index = new SearchIndex(fixtures.workspace, fixtures.knowledge);
  const analyze = await index.analyzer();
  const files = new Map(fixtures.knowledge.map((d) => [d.id, d.file_name]));
  return {
    index,
    analyze,
    ask: async (question: string) =>
      composeAnswer(question, await index.search(question, { person: 'person_erika', limit: 8 }), 'http://127.0.0.1/mcp', analyze),
    research: async (question: string) =>
      composeReport(question, await index.search(question, { person: 'person_erika', limit: 8, knowledgeOnly: true }), analyze, files),
  };
}

/** A research report over one hand-made knowledge hit (`kb-stall`, "Weidegang ab Mai."), for tests of its shapes. */
export const stallReport = () =>
  composeReport(
    'Weidegang',
    [
      {
        kind: 'knowledge',
        id: 'kb-stall',
        title: 'Stallordnung',
        snippet: 'Weidegang ab Mai',
        score: 1,
        sentences: ['Weidegang ab Mai.'],
        stems: new Set(['stallordnung', 'weidegang', 'ab', 'mai']),
        partStems: new Set<string>(),
      },
    ],
    wordsAnalyzer,
    new Map([['kb-stall', 'stall.md']]),
  )!;

/** A variant selection with the given choices, the rest the emulator's own (the first of each dimension). */
export function selection<K extends VariedKind>(kind: K, choices: Partial<Choices<K>> = {}, ordinal = 0): VariantSelection<K> {
  const first = Object.fromEntries(Object.entries(CATALOGUE[kind]).map(([d, variants]) => [d, variants[0]]));
  return { kind, seed: 1, ordinal, choices: { ...first, ...choices } };
}

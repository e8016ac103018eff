import { createHash, randomBytes } from 'node:crypto';
import { request } from 'undici';
import { inProcessFor } from './in-process.js';

export interface Pkce {
  verifier: string;
  challenge: string;
}

export function pkce(): Pkce {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export const REDIRECT = 'http://127.0.0.1:9/callback';

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: () => any;
}

/** One HTTP exchange; never follows redirects. An emulator started without listening serves it in this process. */
export async function http(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpResult> {
  const emulator = inProcessFor(url);
  if (emulator) {
    const res = await emulator.inject({ url, ...init });
    // As undici gives them: every value a string, repeated headers (set-cookie) an array.
    const headers = Object.fromEntries(
      Object.entries(res.headers).map(([name, value]) => [name, typeof value === 'number' ? String(value) : value]),
    );
    return { status: res.statusCode, headers, text: res.body, json: () => JSON.parse(res.body) };
  }
  const res = await request(url, { method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: () => JSON.parse(text) };
}

/** RFC 6750 §2.1: the Authorization header for a bearer token, with any other headers. */
export const bearer = (token: string, extra: Record<string, string> = {}): Record<string, string> => ({
  authorization: `Bearer ${token}`,
  ...extra,
});

export const form = (fields: Record<string, string | undefined>): string =>
  new URLSearchParams(Object.entries(fields).filter((e): e is [string, string] => e[1] !== undefined)).toString();

export const postForm = (url: string, fields: Record<string, string | undefined>, headers: Record<string, string> = {}) =>
  http(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: form(fields) });

export const postJson = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  http(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

export const clientMetadata = (overrides: Record<string, unknown> = {}) => ({
  client_name: 'Test Agent',
  redirect_uris: [REDIRECT],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
  ...overrides,
});

export async function register(
  baseUrl: string,
  overrides: Record<string, unknown> = {},
): Promise<{ client_id: string } & Record<string, unknown>> {
  const res = await postJson(`${baseUrl}/oauth/register`, clientMetadata(overrides));
  if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${res.text}`);
  return res.json();
}

const decodeEntities = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&#96;/g, '`')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');

/** A minimal browser: keeps cookies per test, reads forms from HTML. */
export class Browser {
  readonly cookies = new Map<string, string>();

  #cookieHeader(): Record<string, string> {
    return this.cookies.size ? { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {};
  }

  #keep(res: HttpResult) {
    const set = res.headers['set-cookie'];
    for (const c of Array.isArray(set) ? set : set ? [set] : []) {
      const [pair] = c.split(';');
      const [k, ...v] = (pair ?? '').split('=');
      if (k) this.cookies.set(k.trim(), v.join('='));
    }
  }

  async get(url: string, headers: Record<string, string> = {}): Promise<HttpResult> {
    const res = await http(url, { headers: { ...this.#cookieHeader(), ...headers } });
    this.#keep(res);
    return res;
  }

  async post(url: string, fields: Record<string, string>): Promise<HttpResult> {
    const res = await postForm(url, fields, this.#cookieHeader());
    this.#keep(res);
    return res;
  }

  /**
   * What a person does on a page with a form: opens `pageUrl` (it must answer 200), then submits the first form
   * with its hidden fields plus `extra` (e.g. the button's `decision`). Returns the page and the form's answer.
   */
  async submitForm(pageUrl: string, extra: Record<string, string>): Promise<{ page: HttpResult; answer: HttpResult }> {
    const page = await this.get(pageUrl);
    if (page.status !== 200) throw new Error(`${pageUrl} answered ${page.status}: ${String(page.headers.location ?? page.text)}`);
    const { action, fields } = Browser.form(page.text);
    const answer = await this.post(new URL(action, pageUrl).toString(), { ...fields, ...extra });
    return { page, answer };
  }

  /** Hidden inputs and action of the first form on a page. */
  static form(pageHtml: string, index = 0): { action: string; fields: Record<string, string> } {
    const forms = [...pageHtml.matchAll(/<form[^>]*action="([^"]*)"[^>]*>([\s\S]*?)<\/form>/g)];
    const match = forms[index];
    if (!match) throw new Error(`no form #${index} on page:\n${pageHtml}`);
    const fields: Record<string, string> = {};
    for (const input of (match[2] ?? '').matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g))
      fields[input[1] as string] = decodeEntities(input[2] as string);
    return { action: decodeEntities(match[1] as string), fields };
  }
}

/** undefined: the default; null: the parameter is left out. */
export interface AuthorizeParams {
  client_id: string;
  redirect_uri?: string | null;
  scope?: string | null;
  state?: string | null;
  resource?: string | null;
  code_challenge?: string | null;
  code_challenge_method?: string | null;
  response_type?: string | null;
  [extra: string]: string | null | undefined;
}

export function authorizeUrl(authUrl: string, baseUrl: string, params: AuthorizeParams, challenge?: string): string {
  const url = new URL(`${authUrl}/oauth/authorize`);
  const all: Record<string, string | null | undefined> = {
    response_type: 'code',
    redirect_uri: REDIRECT,
    scope: 'ask',
    state: randomBytes(12).toString('base64url'),
    code_challenge: challenge,
    code_challenge_method: 'S256',
    resource: `${baseUrl}/mcp`,
    // undefined means "the default"; null means "leave the parameter out".
    ...Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined)),
  };
  for (const [k, v] of Object.entries(all)) if (v !== undefined && v !== null) url.searchParams.set(k, v);
  return url.toString();
}

export interface FlowResult {
  client_id: string;
  pkce: Pkce;
  code: string;
  state: string;
  location: URL;
  tokens?: { access_token: string; refresh_token: string; expires_in: number; token_type: string; scope: string };
}

/**
 * The whole front channel as a browser does it: authorize → consent page → submit the form → redirect.
 * Returns the code from the redirect (and exchanges it unless `exchange: false`).
 */
export async function authorizeAndApprove(
  urls: { baseUrl: string; authUrl: string },
  options: {
    client_id?: string;
    scope?: string;
    resource?: string | null;
    browser?: Browser;
    exchange?: boolean;
    decision?: 'approve' | 'deny';
  } = {},
): Promise<FlowResult> {
  const client_id = options.client_id ?? (await register(urls.baseUrl)).client_id;
  const p = pkce();
  const browser = options.browser ?? new Browser();
  const state = randomBytes(12).toString('base64url');
  const url = authorizeUrl(urls.authUrl, urls.baseUrl, { client_id, scope: options.scope, state, resource: options.resource }, p.challenge);
  const { answer } = await browser.submitForm(url, { decision: options.decision ?? 'approve' });
  if (answer.status !== 302) throw new Error(`consent answered ${answer.status}: ${answer.text}`);
  const location = new URL(answer.headers.location as string);
  const code = location.searchParams.get('code') ?? '';
  const result: FlowResult = { client_id, pkce: p, code, state, location };
  if (options.exchange !== false && code) {
    const res = await exchangeCode(urls.baseUrl, { client_id, code, code_verifier: p.verifier });
    if (res.status !== 200) throw new Error(`token exchange answered ${res.status}: ${res.text}`);
    result.tokens = res.json();
  }
  return result;
}

export const exchangeCode = (
  baseUrl: string,
  p: { client_id: string; code: string; code_verifier?: string; redirect_uri?: string; resource?: string },
) => postForm(`${baseUrl}/oauth/token`, { grant_type: 'authorization_code', redirect_uri: REDIRECT, ...p });

export const refresh = (baseUrl: string, p: { client_id: string; refresh_token: string; scope?: string; resource?: string }) =>
  postForm(`${baseUrl}/oauth/token`, { grant_type: 'refresh_token', ...p });

export function decodeJwt(token: string): { header: any; payload: any } {
  const [h, p] = token.split('.');
  return { header: JSON.parse(Buffer.from(h!, 'base64url').toString()), payload: JSON.parse(Buffer.from(p!, 'base64url').toString()) };
}

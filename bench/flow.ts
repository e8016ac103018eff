// The real authorization-code + PKCE flow over HTTP, used to mint refresh-token families for the load run.
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'undici';

export class FlowError extends Error {}

const REDIRECT_URI = 'http://127.0.0.1:9/callback';
const TIMEOUT = { headersTimeout: 10_000, bodyTimeout: 10_000 };

export interface Family {
  clientId: string;
  refreshToken: string;
  /** access token from the same (last) refresh response; scope ask, audience {base_url}/mcp */
  accessToken: string;
  /** shape problems noticed along the way (reported, not fatal) */
  warnings: string[];
}

interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

async function http(method: 'GET' | 'POST', url: string, headers: Record<string, string> = {}, body?: string): Promise<HttpResult> {
  // undici.request never follows redirects, which is what the consent POST needs.
  const res = await request(url, { method, headers, body, ...TIMEOUT });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

function fail(step: string, method: string, url: string, sent: string | undefined, r: HttpResult, why: string): never {
  throw new FlowError(
    `flow step "${step}" failed: ${why}\n  request: ${method} ${url}${sent !== undefined ? `\n  body: ${sent.slice(0, 600)}` : ''}` +
      `\n  status: ${r.status}\n  location: ${String(r.headers['location'] ?? '')}\n  response body: ${r.text.slice(0, 1500)}`,
  );
}

function parseJson(text: string): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(text) as unknown;
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const b64url = (b: Buffer): string => b.toString('base64url');

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = b64url(randomBytes(48)); // 64 chars
  const challenge = b64url(createHash('sha256').update(verifier).digest());
  return { verifier, challenge };
}

// ---------- minimal HTML helpers (no assumptions about field names) ----------

export function unescapeHtml(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|amp|lt|gt|quot|apos|#39);/gi, (m, e: string) => {
    const l = e.toLowerCase();
    if (l === 'amp') return '&';
    if (l === 'lt') return '<';
    if (l === 'gt') return '>';
    if (l === 'quot') return '"';
    if (l === 'apos') return "'";
    if (l.startsWith('#x')) return String.fromCodePoint(parseInt(l.slice(2), 16));
    if (l.startsWith('#')) return String.fromCodePoint(parseInt(l.slice(1), 10));
    return m;
  });
}

export function parseAttrs(tag: string): Record<string, string> {
  const attrs: Record<string, string> = {};
  const inner = tag.replace(/^<\s*[a-z0-9-]+/i, '').replace(/\/?>$/, '');
  const re = /([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(inner)) !== null) {
    const name = m[1]!.toLowerCase();
    const raw = m[2] ?? m[3] ?? m[4] ?? '';
    if (!(name in attrs)) attrs[name] = unescapeHtml(raw);
  }
  return attrs;
}

export interface ParsedForm {
  action: string;
  method: string;
  hidden: [string, string][];
  /** submit controls with a name: button elements and input type=submit */
  submits: { name: string; value: string }[];
}

export function parseForms(html: string): ParsedForm[] {
  const forms: ParsedForm[] = [];
  const formRe = /<form\b[^>]*>([\s\S]*?)<\/form\s*>/gi;
  let fm: RegExpExecArray | null;
  while ((fm = formRe.exec(html)) !== null) {
    const openTag = /^<form\b[^>]*>/i.exec(fm[0])![0];
    const fa = parseAttrs(openTag);
    const body = fm[1] ?? '';
    const hidden: [string, string][] = [];
    const submits: { name: string; value: string }[] = [];
    for (const im of body.matchAll(/<input\b[^>]*>/gi)) {
      const a = parseAttrs(im[0]);
      const type = (a['type'] ?? 'text').toLowerCase();
      if (a['name'] === undefined) continue;
      if (type === 'hidden') hidden.push([a['name'], a['value'] ?? '']);
      else if (type === 'submit') submits.push({ name: a['name'], value: a['value'] ?? '' });
    }
    for (const bm of body.matchAll(/<button\b[^>]*>/gi)) {
      const a = parseAttrs(bm[0]);
      const type = (a['type'] ?? 'submit').toLowerCase();
      if (type === 'submit' && a['name'] !== undefined) submits.push({ name: a['name'], value: a['value'] ?? '' });
    }
    forms.push({ action: fa['action'] ?? '', method: (fa['method'] ?? 'get').toLowerCase(), hidden, submits });
  }
  return forms;
}

function cookiesFrom(headers: HttpResult['headers']): string[] {
  const sc = headers['set-cookie'];
  const list = sc === undefined ? [] : Array.isArray(sc) ? sc : [sc];
  return list.map((c) => c.split(';')[0]!.trim()).filter((c) => c.includes('='));
}

// ---------- the flow ----------

export interface Endpoints {
  baseUrl: string;
  authUrl: string;
}

const strip = (u: string): string => u.replace(/\/+$/, '');

export async function registerClient(ep: Endpoints): Promise<string> {
  const url = `${strip(ep.baseUrl)}/oauth/register`;
  const body = JSON.stringify({
    client_name: 'bench',
    redirect_uris: [REDIRECT_URI],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  });
  const r = await http('POST', url, { 'content-type': 'application/json' }, body);
  if (r.status !== 201) fail('register', 'POST', url, body, r, 'expected 201');
  const j = parseJson(r.text);
  if (typeof j?.['client_id'] !== 'string') fail('register', 'POST', url, body, r, 'no client_id in JSON');
  return j['client_id'];
}

/** Authorize + consent; returns the authorization code. */
export async function authorize(ep: Endpoints, clientId: string, challenge: string): Promise<string> {
  const state = b64url(randomBytes(12));
  const q = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    response_type: 'code',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    scope: 'ask',
    resource: `${strip(ep.baseUrl)}/mcp`,
  });
  const authzUrl = `${strip(ep.authUrl)}/oauth/authorize?${q.toString()}`;
  const r = await http('GET', authzUrl);
  let location: string | undefined;
  if (r.status >= 300 && r.status < 400) {
    // Tolerate an auto-approving server.
    location = String(r.headers['location'] ?? '');
  } else {
    if (r.status !== 200) fail('authorize', 'GET', authzUrl, undefined, r, 'expected 200 consent page');
    const forms = parseForms(r.text).filter((f) => f.method === 'post');
    if (forms.length !== 1) fail('authorize', 'GET', authzUrl, undefined, r, `expected exactly one POST form, found ${forms.length}`);
    const form = forms[0]!;
    const approve = form.submits.find((s) => s.value.toLowerCase() === 'approve');
    if (!approve) fail('authorize', 'GET', authzUrl, undefined, r, 'no submit control with value "approve"');
    const cookies = cookiesFrom(r.headers);
    const action = new URL(form.action === '' ? authzUrl : form.action, authzUrl).toString();
    const fields = new URLSearchParams(form.hidden);
    fields.append(approve.name, approve.value);
    const sent = fields.toString();
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (cookies.length > 0) headers['cookie'] = cookies.join('; ');
    const c = await http('POST', action, headers, sent);
    if (c.status < 300 || c.status >= 400) fail('consent', 'POST', action, sent, c, 'expected a 302 redirect');
    location = String(c.headers['location'] ?? '');
  }
  let loc: URL;
  try {
    loc = new URL(location, REDIRECT_URI);
  } catch {
    throw new FlowError(`consent redirect has an unparsable Location: ${location}`);
  }
  const code = loc.searchParams.get('code');
  if (!location.startsWith(REDIRECT_URI)) throw new FlowError(`consent redirected to ${location}, not to ${REDIRECT_URI}`);
  if (loc.searchParams.get('state') !== state) throw new FlowError(`consent redirect state mismatch: ${location}`);
  if (code === null) throw new FlowError(`consent redirect carries no code: ${location}`);
  return code;
}

async function tokenRequest(ep: Endpoints, step: string, form: Record<string, string>): Promise<Record<string, unknown>> {
  const url = `${strip(ep.baseUrl)}/oauth/token`;
  const sent = new URLSearchParams(form).toString();
  const r = await http('POST', url, { 'content-type': 'application/x-www-form-urlencoded' }, sent);
  if (r.status !== 200) fail(step, 'POST', url, sent, r, 'expected 200');
  const j = parseJson(r.text);
  if (j === undefined) fail(step, 'POST', url, sent, r, 'response is not a JSON object');
  if (typeof j['refresh_token'] !== 'string') fail(step, 'POST', url, sent, r, 'no refresh_token');
  return j;
}

function checkTokenShape(j: Record<string, unknown>, step: string, warnings: string[]): void {
  if (typeof j['access_token'] !== 'string') warnings.push(`${step}: access_token missing`);
  if (j['expires_in'] !== 900) warnings.push(`${step}: expires_in is ${JSON.stringify(j['expires_in'])}, expected 900`);
  if (typeof j['token_type'] !== 'string' || j['token_type'].toLowerCase() !== 'bearer')
    warnings.push(`${step}: token_type is ${JSON.stringify(j['token_type'])}`);
  if (typeof j['scope'] !== 'string') warnings.push(`${step}: scope missing`);
}

export async function refresh(ep: Endpoints, clientId: string, refreshToken: string): Promise<Record<string, unknown>> {
  return tokenRequest(ep, 'refresh', { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId });
}

/** Register, authorize with PKCE, exchange the code, refresh once (rotation check); returns the newest tokens. */
export async function obtainFamily(ep: Endpoints, clientId?: string): Promise<Family> {
  const warnings: string[] = [];
  const cid = clientId ?? (await registerClient(ep));
  const { verifier, challenge } = pkcePair();
  const code = await authorize(ep, cid, challenge);
  const t1 = await tokenRequest(ep, 'code exchange', {
    grant_type: 'authorization_code',
    code,
    redirect_uri: REDIRECT_URI,
    client_id: cid,
    code_verifier: verifier,
  });
  checkTokenShape(t1, 'code exchange', warnings);
  const t2 = await refresh(ep, cid, t1['refresh_token'] as string);
  checkTokenShape(t2, 'refresh', warnings);
  if (t2['refresh_token'] === t1['refresh_token']) warnings.push('refresh did not rotate the refresh_token');
  const at = typeof t2['access_token'] === 'string' ? t2['access_token'] : '';
  return { clientId: cid, refreshToken: t2['refresh_token'] as string, accessToken: at, warnings };
}

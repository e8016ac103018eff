import { isLoopbackHost } from '../../protocol/loopback.js';
import { OAuthError } from '../state/errors.js';

/**
 * RFC 7591 §2 / OAuth 2.1 §2.3: a redirect URI is absolute, has no fragment, no whitespace or control characters, is
 * unchanged by a parse-and-serialise round trip, and is https or loopback http.
 * Throws `invalid_redirect_uri` naming the offending value.
 */
export function validateRedirectUri(value: string): void {
  const fail = (why: string) =>
    new OAuthError('invalid_redirect_uri', `redirect_uris: ${JSON.stringify(value)} ${why}`, { redirectable: false });
  // RFC 3986 §2: no whitespace or control characters in a URI. A URL parser would strip or encode them silently, so
  // the stored value and what a later comparison sees would differ.
  const bad = /[\u0000-\u0020\u007f-\u009f]/.exec(value);
  if (bad)
    throw fail(
      `contains ${
        bad[0] === ' ' ? 'a space' : `the control character U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`
      } at position ${bad.index}; a URI has none (RFC 3986 §2)`,
    );
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw fail('is not an absolute URI');
  }
  if (value.includes('#')) throw fail('must not contain a fragment');
  // What the comparison of a later request sees must be what was registered: parsing and serialising changes
  // nothing (RFC 3986 §6.2.3 lets an empty path stand for "/").
  if (url.href !== value && url.href !== `${value}/`)
    throw fail(
      `is not in normal form: it reads as "${url.href}" once parsed (escape characters outside RFC 3986, lower-case scheme and host)`,
    );
  if (url.username || url.password) throw fail('must not contain user information');
  if (url.protocol === 'https:') return;
  if (url.protocol === 'http:' && isLoopbackHost(url.hostname)) return;
  throw fail('must use https, or http on a loopback address (127.0.0.1, [::1] or localhost)');
}

/** A port as RFC 3986 §3.2.3 writes it in normal form: digits without a leading zero, at most 65535. */
const PORT = /^:(?:0|[1-9][0-9]{0,4})/;

/**
 * Exact string comparison, except for loopback http redirect URIs, where the port may differ (OAuth 2.1 §2.3.1,
 * RFC 8252 §7.3): the requested URI must be the registered one character for character once its port is left out.
 * Nothing is parsed on the requested side: a parser reads `127.1`, `0x7f.1`, `2130706433`, `127.0.0.1.`, `HTTP:`,
 * a backslash or `/../` as the registered URI, and a comparison of parsed values would let each of them match.
 */
export function redirectUriMatches(registered: string, requested: string): boolean {
  if (registered === requested) return true;
  let url: URL;
  try {
    url = new URL(registered);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' || !isLoopbackHost(url.hostname)) return false;
  // Registered URIs are in normal form (validateRedirectUri), so they begin with scheme, host and port as written.
  const authority = `http://${url.host}`;
  if (!registered.startsWith(authority)) return false;
  const origin = `http://${url.hostname}`;
  const rest = registered.slice(authority.length);
  if (!requested.startsWith(origin)) return false;
  const afterHost = requested.slice(origin.length);
  const port = PORT.exec(afterHost)?.[0] ?? '';
  if (port && Number(port.slice(1)) > 65535) return false;
  return afterHost.slice(port.length) === rest;
}

import { describe, expect, it } from 'vitest';
import { oauthText } from '../../src/core/state/errors.js';
import { isValidPkceValue, verifyS256 } from '../../src/core/oauth/pkce.js';
import { redirectUriMatches, validateRedirectUri } from '../../src/core/oauth/redirect-uri.js';
import { requireSupportedScopes, splitScope } from '../../src/core/oauth/scopes.js';
import { isAllowedHost, isLoopbackAddress } from '../../src/server/host-guard.js';
import { escapeHtml, html } from '../../src/protocol/html.js';

describe('OAuth 2.1 §8.4.2 / RFC 8252 §7.3: redirectUriMatches', () => {
  it.each([
    ['http://127.0.0.1:9/cb', 'http://127.0.0.1:61234/cb', true],
    ['http://127.0.0.1/cb', 'http://127.0.0.1:61234/cb', true],
    ['http://[::1]:1/cb', 'http://[::1]:2/cb', true],
    ['http://localhost:1/cb', 'http://localhost:2/cb', true],
    ['http://127.0.0.1:9/cb', 'http://127.0.0.1:9/cb/', false],
    ['http://127.0.0.1:9/cb', 'http://localhost:9/cb', false],
    ['http://127.0.0.1:9/cb?a=1', 'http://127.0.0.1:8/cb?a=2', false],
    ['http://127.0.0.1:9/cb', 'http://127.0.0.1:8/cb#x', false],
    ['https://app.example/cb', 'https://app.example:444/cb', false],
    ['https://app.example/cb', 'https://app.example/cb', true],
    ['https://app.example/cb', 'https://APP.example/cb', false],
    ['http://127.0.0.1/cb', 'http://127.1/cb', false],
    ['http://127.0.0.1/cb', 'http://127.0.0.1./cb', false],
    ['http://127.0.0.1/cb', 'HTTP://127.0.0.1/cb', false],
    ['http://127.0.0.1/cb', 'http://127.0.0.1:80/cb', true],
    ['http://127.0.0.1:9', 'http://127.0.0.1:8', true],
  ])('%s vs %s → %s', (registered, requested, expected) => {
    expect(redirectUriMatches(registered, requested)).toBe(expected);
  });

  it('validateRedirectUri refuses what RFC 7591 and OAuth 2.1 refuse', () => {
    for (const bad of ['cb', 'http://example.com/cb', 'https://x.example/#', 'javascript:alert(1)', 'http://127.0.0.2.nip.io/cb']) {
      expect(() => validateRedirectUri(bad), bad).toThrow(expect.objectContaining({ error: 'invalid_redirect_uri' }));
    }
  });
});

describe('RFC 7636: PKCE', () => {
  it('§4.1: verifier and challenge are 43-128 unreserved characters', () => {
    expect(isValidPkceValue('a'.repeat(42))).toBe(false);
    expect(isValidPkceValue('a'.repeat(43))).toBe(true);
    expect(isValidPkceValue('a'.repeat(128))).toBe(true);
    expect(isValidPkceValue('a'.repeat(129))).toBe(false);
    expect(isValidPkceValue(`${'a'.repeat(42)}+`)).toBe(false);
  });
  it('Appendix B test vector: S256', () => {
    expect(verifyS256('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')).toBe(true);
    expect(verifyS256('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXl', 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')).toBe(false);
  });
});

describe('spec 2.7: scopes', () => {
  it('splits on spaces, drops duplicates', () => {
    expect(splitScope('ask  research ask')).toEqual(['ask', 'research']);
  });
  it('retired scopes are refused as invalid_scope, naming them', () => {
    expect(() => requireSupportedScopes('ask letters.read')).toThrow(
      expect.objectContaining({ error: 'invalid_scope', message: expect.stringContaining('letters.read') }),
    );
  });
  it('an empty scope is invalid_scope (RFC 6749 §3.3)', () => {
    expect(() => requireSupportedScopes('  ')).toThrow(expect.objectContaining({ error: 'invalid_scope' }));
  });
});

describe('host guard (DNS rebinding)', () => {
  it('allows loopback names with the server port only', () => {
    expect(isAllowedHost('127.0.0.1:4100', 4100)).toBe(true);
    expect(isAllowedHost('LOCALHOST:4100', 4100)).toBe(true);
    expect(isAllowedHost('[::1]:4100', 4100)).toBe(true);
    expect(isAllowedHost('127.0.0.1:4101', 4100)).toBe(false);
    expect(isAllowedHost('evil.example:4100', 4100)).toBe(false);
    expect(isAllowedHost(undefined, 4100)).toBe(false);
  });
  it('also allows the loopback address the server is bound to', () => {
    expect(isAllowedHost('127.0.0.2:4100', 4100, '127.0.0.2')).toBe(true);
    expect(isAllowedHost('127.0.0.2:4100', 4100)).toBe(false);
  });
  it('recognises loopback peers, IPv4-mapped included', () => {
    expect(isLoopbackAddress('::ffff:127.0.0.1')).toBe(true);
    expect(isLoopbackAddress('10.0.0.1')).toBe(false);
  });
});

describe('RFC 6749 §5.2: error_description characters', () => {
  it('keeps %x20-21 / %x23-5B / %x5D-7E only', () => {
    expect(oauthText('client_id "a\\b" ä\n')).toBe("client_id 'a/b' ??");
  });
});

describe('HTML escaping', () => {
  it('escapes everything interpolated, in text and attributes', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&\``)).toBe('&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&#96;');
    expect(html`<p title="${'"><script>'}">${['<b>', html`<i>ok</i>`]}</p>`.value).toBe(
      '<p title="&quot;&gt;&lt;script&gt;">&lt;b&gt;<i>ok</i></p>',
    );
  });
});

/**
 * The command line's text forms of serve's flags (src/cli/flags.ts): each reads the text and leaves the meaning to
 * the core's validator; a bad value is commander's InvalidArgumentError, which commander reports with the flag.
 */
import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { checkedFaultFlag, parseConsentFlag, parseFaultFlag, parseRateLimitFlag, parseSeed } from '../../src/cli/flags.js';

describe('serve flags', () => {
  it('--fault: kind, key=value pairs with numbers, and JSON', () => {
    expect(parseFaultFlag('server_error:route=POST /research,status=503,count=2')).toEqual({
      kind: 'server_error',
      route: 'POST /research',
      status: 503,
      count: 2,
    });
    expect(parseFaultFlag('ask_timeout:match=Hufschmied')).toEqual({ kind: 'ask_timeout', match: 'Hufschmied' });
    expect(parseFaultFlag('{"kind":"latency","ms":10}')).toEqual({ kind: 'latency', ms: 10 });
    expect(() => parseFaultFlag('latency:ms')).toThrow(/not key=value/);
    expect(() => parseFaultFlag('{"kind":')).toThrow(InvalidArgumentError);
  });

  it('--fault: the core validates what the text says (parseFaultSpec)', () => {
    expect(checkedFaultFlag('latency:ms=500', Date.now())).toEqual({ kind: 'latency', ms: 500 });
    expect(() => checkedFaultFlag('latency:ms=fast', Date.now())).toThrow(InvalidArgumentError);
    expect(() => checkedFaultFlag('latency:ms=fast', Date.now())).toThrow(/ms must be a whole number/);
  });

  it('--fault drop_response:count=1 (issue 42.2 lost-answer): route or tool, count, rate and the caller; nothing else', () => {
    expect(checkedFaultFlag('drop_response:count=1', Date.now())).toEqual({ kind: 'drop_response', count: 1 });
    expect(checkedFaultFlag('drop_response:route=POST /mcp,rate=0.5', Date.now())).toEqual({
      kind: 'drop_response',
      route: 'POST /mcp',
      rate: 0.5,
    });
    expect(checkedFaultFlag('rate_limit:tool=ask,count=2', Date.now())).toEqual({ kind: 'rate_limit', tool: 'ask', count: 2 });
    expect(() => checkedFaultFlag('drop_response:status=503', Date.now())).toThrow(/a drop_response fault takes route, tool, count, rate/);
  });

  it('--consent: DECISION, approve=SCOPE,SCOPE, optionally for one CLIENT_ID:', () => {
    expect(parseConsentFlag('approve')).toEqual({ clientId: null, policy: { decision: 'approve' } });
    expect(parseConsentFlag('client_abc:deny')).toEqual({ clientId: 'client_abc', policy: { decision: 'deny' } });
    expect(parseConsentFlag('approve=ask,research')).toEqual({
      clientId: null,
      policy: { decision: 'approve', scopes: ['ask', 'research'] },
    });
    expect(() => parseConsentFlag('maybe')).toThrow(/is not a consent policy/);
    // Spec 2.7: retired scopes can never be granted; the core's parseConsentPolicy says so.
    expect(() => parseConsentFlag('approve=documents.read')).toThrow(InvalidArgumentError);
    expect(() => parseConsentFlag('approve=documents.read')).toThrow(/retired scope documents\.read/);
  });

  it('--vary-unspecified: seeds are whole numbers from 0 to 2^32-1, typed as digits', () => {
    expect(parseSeed('0')).toBe(0);
    expect(parseSeed('4294967295')).toBe(4_294_967_295);
    for (const bad of ['', '-1', '1.5', 'abc', '4294967296', '0x10']) {
      expect(() => parseSeed(bad), bad).toThrow(InvalidArgumentError);
      expect(() => parseSeed(bad), bad).toThrow(/a variation seed is a whole number from 0 to 4294967295/);
    }
  });

  it('--rate-limit: N/s, N/min or N/h, kept as text', () => {
    expect(parseRateLimitFlag('60/min')).toBe('60/min');
    expect(() => parseRateLimitFlag('lots')).toThrow(InvalidArgumentError);
  });
});

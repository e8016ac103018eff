import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { FAULT_FIELDS, parseFaultSpec, type FaultSpec } from '../../src/core/emulation/fault-spec.js';
import { IDEMPOTENCY_KEY, parseIdempotencyKey } from '../../src/core/state/idempotency.js';
import { QUESTION, fileNameProblem, satisfies, type InputSchema } from '../../src/core/state/inputs.js';
import { adminFaultSchema, askSchema } from '../../src/server/schemas.js';

// The route schemas are compiled as fastify compiles them (no coercion), to compare with the core's checker.
const ajv = new Ajv({ coerceTypes: false, strict: false });
const agree = (schema: InputSchema, values: unknown[]) => {
  const validate = ajv.compile(schema);
  for (const value of values) expect(satisfies(schema, value), JSON.stringify(value)).toBe(validate(value));
};

describe('one definition per input', () => {
  it('the core checks an input exactly as the route schema (ajv) does: question, Idempotency-Key, every fault field', () => {
    agree(QUESTION, ['', 'a', 'x'.repeat(4000), 'x'.repeat(4001), '😀'.repeat(4000), 5, null]);
    agree(IDEMPOTENCY_KEY, ['', 'k-1', 'x'.repeat(255), 'x'.repeat(256), 'a\tb', 'schlüssel', ' ', 7]);
    const samples = [
      0,
      1,
      0.5,
      1.5,
      599,
      600,
      120_000,
      120_001,
      86_400,
      86_401,
      1_000_000,
      1_000_001,
      -1,
      '',
      ' ',
      'x',
      '10m',
      'POST /research',
      'chat/ask',
      '*',
      'x'.repeat(201),
      'x'.repeat(501),
      null,
      true,
    ];
    for (const [name, schema] of Object.entries(FAULT_FIELDS)) {
      expect(adminFaultSchema.body.properties[name as keyof FaultSpec], name).toBe(schema);
      agree(schema, samples);
    }
    expect(askSchema.body.properties.question).toBe(QUESTION);
  });

  it('a fault the admin API refuses is refused as a flag or through the programmatic API too (the stricter bound)', () => {
    for (const spec of [
      { kind: 'rate_limit', count: 1_000_001 },
      { kind: 'rate_limit', retry_after: 86_401 },
      { kind: 'ask_timeout', match: 'x'.repeat(501) },
      { kind: 'server_error', client_id: 'c'.repeat(201) },
      { kind: 'revoke', grant_id: 'g', after_requests: 0 },
      { kind: 'latency' },
      { kind: 'latency', ms: 120_001 },
    ]) {
      expect(() => parseFaultSpec(spec as FaultSpec, 0), JSON.stringify(spec)).toThrow(
        expect.objectContaining({ code: 'invalid_fault', status: 400 }),
      );
    }
    expect(() => parseFaultSpec({ kind: 'latency', ms: 'fast' as never }, 0)).toThrow('ms must be a whole number from 1 to 120000');
    expect(parseFaultSpec({ kind: 'rate_limit', count: 1_000_000, retry_after: 86_400 }, 0)).toMatchObject({
      count: 1_000_000,
      retry_after: 86_400,
    });
  });

  it('Idempotency-Key header: bare or quoted (the IETF draft), then the one definition', () => {
    expect(parseIdempotencyKey('"8e03978e"')).toBe('8e03978e');
    expect(parseIdempotencyKey(' k-1 ')).toBe('k-1');
    expect(parseIdempotencyKey(undefined)).toBeUndefined();
    for (const bad of ['', '""', 'x'.repeat(256), ['a', 'b']])
      expect(() => parseIdempotencyKey(bad)).toThrow(expect.objectContaining({ code: 'invalid_idempotency_key' }));
  });
});

describe('41.13: a training file name is a plain name, read in one direction (spec 2.6, docs/serve.md "The REST allowlist")', () => {
  it.each([
    ['notiz.md'],
    ['Protokoll 2026-05-02.markdown'],
    ['Übergabe (final).TXT'],
    ['.hidden.md'],
    ['a.b.md'],
    ['مرحبا.md'], // right-to-left letters are text, not controls
    ['x'.repeat(252) + '.md'],
  ])('%s is accepted', (name) => {
    expect(fileNameProblem(name)).toBeNull();
  });

  it.each([
    ['', 'must be 1 to 255 characters'],
    ['x'.repeat(253) + '.md', 'must be 1 to 255 characters'],
    ['../x.md', 'must be a plain file name, not a path'],
    ['a\\b.md', 'must be a plain file name, not a path'],
    ['a\u2215b.md', 'must be a plain file name, not a path'], // DIVISION SLASH
    ['a\uff0fb.md', 'must be a plain file name, not a path'], // FULLWIDTH SOLIDUS
    ['a\u2044b.md', 'must be a plain file name, not a path'], // FRACTION SLASH
    ['a\uff3cb.md', 'must be a plain file name, not a path'], // FULLWIDTH REVERSE SOLIDUS
    ['a\u0000.md', 'must not contain control characters'],
    ['a\u0085.md', 'must not contain control characters'],
    ['rechnung\u202Edm.exe.md', 'must not contain format characters such as a right-to-left override (U+202E) or a zero-width space'],
    ['a\u2067b.md', 'must not contain format characters such as a right-to-left override (U+202E) or a zero-width space'],
    ['a\u200Bb.md', 'must not contain format characters such as a right-to-left override (U+202E) or a zero-width space'],
    ['a\u2028b.md', 'must not contain format characters such as a right-to-left override (U+202E) or a zero-width space'],
    ['C:x.md', 'must not contain : * ? " < > or |'],
    ['notiz.md:stream.md', 'must not contain : * ? " < > or |'],
    ['a?.md', 'must not contain : * ? " < > or |'],
    ['.md', 'must have a name before its extension'],
    ['...md', 'must have a name before its extension'],
    [' .txt', 'must have a name before its extension'],
    ['notiz.exe', 'must end in .md, .markdown or .txt'],
    ['notiz', 'must end in .md, .markdown or .txt'],
  ])('%j is refused: %s', (name, problem) => {
    expect(fileNameProblem(name)).toBe(problem);
  });
});

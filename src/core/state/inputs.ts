/**
 * Inputs defined once, as JSON Schema (the subset below): fastify validates route bodies with these objects,
 * the MCP tools derive their zod schemas from them (src/server/mcp-server.ts), and the core checks values that
 * reach it some other way (a header, a `--fault` flag, the programmatic API) with `violation`, so every door
 * applies the same bounds.
 */
export type InputSchema =
  | { type: 'string'; minLength?: number; maxLength?: number; pattern?: string; enum?: readonly string[]; description?: string }
  | { type: 'integer' | 'number'; minimum?: number; maximum?: number; exclusiveMinimum?: number; description?: string }
  | { anyOf: readonly InputSchema[]; description?: string };

/** Spec 4.4: `question` of POST /chat/ask and POST /research, and of the `ask` and `start_research` tools. */
export const QUESTION = { type: 'string', minLength: 1, maxLength: 4000 } as const satisfies InputSchema;

/** An id in a path or a tool argument (job, document, action). */
export const RESOURCE_ID = { type: 'string', minLength: 1, maxLength: 200 } as const satisfies InputSchema;

/** Spec 2.6: `file_name` of POST /training and the `add_training_document` tool (its form: `fileNameProblem`). */
export const FILE_NAME = { type: 'string', minLength: 1, maxLength: 255 } as const satisfies InputSchema;

/**
 * The form of a training document's file name (spec 2.6 leaves it open), each rule with what it says when broken.
 * A file name is shown to the person (the document page, its link) and may become a file on someone's disk, so it
 * must read as what it is: a name, not a path, in one direction, with a name before its extension.
 */
const FILE_NAME_RULES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^.{1,255}$/su, 'must be 1 to 255 characters'],
  // Slashes, and the characters that look like one (division, fraction and fullwidth slashes, set minus, ...).
  [/^[^/\\\u2044\u2215\u2216\u29f5\u29f8\u29f9\u2571\u2572\ufe68\uff0f\uff3c]*$/u, 'must be a plain file name, not a path'],
  [/^[^\p{Cc}]*$/u, 'must not contain control characters'],
  // Bidi controls (U+202A to U+202E, U+2066 to U+2069, the marks), zero-width and other invisible format characters, line separators.
  [/^[^\p{Cf}\u2028\u2029]*$/u, 'must not contain format characters such as a right-to-left override (U+202E) or a zero-width space'],
  // A drive (`C:x.md`) or an alternate data stream, and what Windows refuses in a name.
  [/^[^:*?"<>|]*$/u, 'must not contain : * ? " < > or |'],
  [/\.(md|markdown|txt)$/iu, 'must end in .md, .markdown or .txt'],
  // `.md` alone, or only dots and spaces before the extension.
  [/^.*[^.\s].*\.[^.]*$/su, 'must have a name before its extension'],
];

/** What is wrong with a training document's file name, or null when it is a plain one (`FILE_NAME_RULES`). */
export function fileNameProblem(name: string): string | null {
  for (const [rule, problem] of FILE_NAME_RULES) if (!rule.test(name)) return problem;
  return null;
}

/** Spec 2.6: `content`; its size limit is the core's (413, not a validation error). */
export const CONTENT = { type: 'string' } as const satisfies InputSchema;

const bounds = (min: number | undefined, max: number | undefined, unit: string): string =>
  min !== undefined && max !== undefined
    ? `from ${min} to ${max}${unit}`
    : min !== undefined
      ? `at least ${min}${unit}`
      : max !== undefined
        ? `at most ${max}${unit}`
        : '';

/** What a value of `schema` is, in words: "a whole number from 1 to 1000000". */
export function describeInput(schema: InputSchema): string {
  if (schema.description) return schema.description;
  if ('anyOf' in schema) return schema.anyOf.map(describeInput).join(' or ');
  if (schema.type === 'string') {
    if (schema.enum) return `one of ${schema.enum.join(', ')}`;
    const bounded = schema.minLength !== undefined || schema.maxLength !== undefined;
    return `a text${bounded ? ` of ${bounds(schema.minLength, schema.maxLength, ' characters')}` : ''}`;
  }
  const what = schema.type === 'integer' ? 'a whole number' : 'a number';
  const lower = schema.exclusiveMinimum !== undefined ? `more than ${schema.exclusiveMinimum}` : undefined;
  if (lower) return `${what} ${lower}${schema.maximum !== undefined ? ` and at most ${schema.maximum}` : ''}`;
  const range = bounds(schema.minimum, schema.maximum, '');
  return range ? `${what} ${range}` : what;
}

/** Whether `value` satisfies `schema` (the same rules ajv applies to these keywords). */
export function satisfies(schema: InputSchema, value: unknown): boolean {
  if ('anyOf' in schema) return schema.anyOf.some((s) => satisfies(s, value));
  if (schema.type === 'string') {
    if (typeof value !== 'string') return false;
    // JSON Schema counts characters as code points.
    const length = [...value].length;
    if (schema.minLength !== undefined && length < schema.minLength) return false;
    if (schema.maxLength !== undefined && length > schema.maxLength) return false;
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) return false;
    return schema.enum === undefined || schema.enum.includes(value);
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) return false;
  if (schema.type === 'integer' && !Number.isInteger(value)) return false;
  if (schema.minimum !== undefined && value < schema.minimum) return false;
  if (schema.maximum !== undefined && value > schema.maximum) return false;
  return schema.exclusiveMinimum === undefined || value > schema.exclusiveMinimum;
}

/** Null if `value` satisfies `schema`, else a sentence naming the input: "count must be a whole number from 1 to 1000000". */
export function violation(schema: InputSchema, value: unknown, name: string): string | null {
  return satisfies(schema, value) ? null : `${name} must be ${describeInput(schema)}`;
}

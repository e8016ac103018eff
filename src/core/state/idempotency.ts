import { DAY } from './clock.js';
import { satisfies, type InputSchema } from './inputs.js';
import { ProblemError } from './errors.js';

/** Spec 8: the idempotency window. */
export const IDEMPOTENCY_WINDOW = DAY;

/**
 * An Idempotency-Key (spec 4.4 rule 5 leaves its syntax open): 1–255 printable ASCII characters, the IETF draft's
 * key once unquoted. The header of the REST routes and the `idempotency_key` argument of the tools.
 */
export const IDEMPOTENCY_KEY = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  pattern: '^[\\x20-\\x7e]+$',
  description: '1 to 255 printable ASCII characters',
} as const satisfies InputSchema;

/**
 * What an operation answered the first time, as the core handed it out: the object (in its variant's shape with
 * --vary-unspecified) and which variant that was. A replay renders it again the way its transport rendered it the
 * first time, so REST sends the same status and bytes, MCP the same tool result.
 */
export interface StoredResult {
  value: unknown;
  variant?: string;
}

/** A response as the REST routes sent it, as state files written before results were stored hold it. */
export interface LegacyStoredResponse {
  status: number;
  content_type: string;
  /** JSON.stringify of the body object. */
  body: string;
  variant?: string;
}

export interface IdempotencyRecord {
  client_id: string;
  route: string;
  key: string;
  /** SHA-256 of the request body that first used the key. */
  fingerprint: string;
  created_at: number;
  expires_at: number;
  result?: StoredResult;
  /** Older state files: the serialised response instead of `result`. */
  response?: LegacyStoredResponse;
}

/**
 * The stored result of a record, older records converted: their body was JSON.stringify of the result object,
 * and only 2xx answers were stored, whose status the route determines; so parsing it back gives the object
 * that renders to the same status and bytes again.
 */
export function storedResult(record: IdempotencyRecord): StoredResult {
  if (record.result) return record.result;
  const response = record.response;
  if (!response) throw new Error(`idempotency record for key "${record.key}" holds neither a result nor a response`);
  return { value: JSON.parse(response.body) as unknown, ...(response.variant ? { variant: response.variant } : {}) };
}

/**
 * Parses an Idempotency-Key header: a bare key or an RFC 8941 sf-string (`"…"`, as the IETF draft writes it),
 * then checks it against IDEMPOTENCY_KEY; anything else is refused as `invalid_idempotency_key`.
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) throw new ProblemError('invalid_idempotency_key', 'send one Idempotency-Key header, not several');
  let key = header.trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1).replace(/\\(["\\])/g, '$1');
  return checkIdempotencyKey(key);
}

/** A key as the tools take it (no quoting): IDEMPOTENCY_KEY or `invalid_idempotency_key`. */
export function checkIdempotencyKey(key: string): string {
  if (!satisfies(IDEMPOTENCY_KEY, key))
    throw new ProblemError('invalid_idempotency_key', `Idempotency-Key must be ${IDEMPOTENCY_KEY.description}`);
  return key;
}

/**
 * The state key of a record: keys are scoped to the client, the person it acts for, and the route; one
 * person's stored answer is never replayed to another person using the same client.
 */
export const idempotencyId = (clientId: string, personId: string, route: string, key: string): string =>
  JSON.stringify([clientId, personId, route, key]);

/** Charges, keys and rate-limit events of an MCP tool are kept under this name (its REST twin's are under its route). */
export const toolMeter = (tool: string): string => `tool ${tool}`;

/** The tool a meter name belongs to (`tool ask` → `ask`), or undefined for a REST route. */
export const toolOfMeter = (meter: string): string | undefined => (meter.startsWith('tool ') ? meter.slice(5) : undefined);

/**
 * How the caller of `meter` names its key: the `idempotency_key` argument of an MCP tool, the `Idempotency-Key`
 * header of a REST route. Messages and hints name the one the caller sends.
 */
export const idempotencyKeyName = (meter: string): 'idempotency_key' | 'Idempotency-Key' =>
  meter.startsWith('tool ') ? 'idempotency_key' : 'Idempotency-Key';

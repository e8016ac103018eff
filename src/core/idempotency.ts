import { DAY } from './clock.js';
import { ProblemError } from './errors.js';

/** Spec 8: the idempotency window. */
export const IDEMPOTENCY_WINDOW = DAY;

/** A response as it went out the first time; a replay sends exactly this. */
export interface StoredResponse {
  status: number;
  content_type: string;
  body: string;
  /** With --vary-unspecified: what the response varied (the Agent-Access-Variant header), sent again on a replay. */
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
  response: StoredResponse;
}

/**
 * Parses an Idempotency-Key header: a bare key or an RFC 8941 sf-string (`"…"`, as the IETF draft writes it).
 * 1–255 printable ASCII characters; anything else is a 400 (spec 4.4 rule 5 does not say; the draft's syntax).
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) throw new ProblemError(400, 'invalid_idempotency_key', 'send one Idempotency-Key header, not several');
  let key = header.trim();
  if (key.length >= 2 && key.startsWith('"') && key.endsWith('"')) key = key.slice(1, -1).replace(/\\(["\\])/g, '$1');
  if (key.length === 0) throw new ProblemError(400, 'invalid_idempotency_key', 'Idempotency-Key is empty');
  if (key.length > 255) throw new ProblemError(400, 'invalid_idempotency_key', 'Idempotency-Key is longer than 255 characters');
  if (!/^[\x20-\x7e]+$/.test(key)) throw new ProblemError(400, 'invalid_idempotency_key', 'Idempotency-Key must be printable ASCII');
  return key;
}

/**
 * The state key of a record: keys are scoped to the client, the person it acts for, and the route; one
 * person's stored answer is never replayed to another person using the same client.
 */
export const idempotencyId = (clientId: string, personId: string, route: string, key: string): string => JSON.stringify([clientId, personId, route, key]);

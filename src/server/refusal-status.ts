import type { RefusalCode } from '../core/refusal.js';

/**
 * The HTTP status of each refusal of the metered operations (spec 7 names 409 for a reused key; the rest are the
 * emulator's choices, README). REST answers with it; MCP tool errors carry it in their body.
 */
export const REFUSAL_STATUS: Record<RefusalCode, number> = {
  invalid_request: 400,
  invalid_idempotency_key: 400,
  invalid_file_name: 400,
  empty_content: 400,
  content_too_large: 413,
  not_found: 404,
  idempotency_key_reused: 409,
  idempotency_key_in_flight: 409,
  ask_timeout: 504,
  insufficient_scope: 403,
  record_gone: 409,
};

import { AgentAccessError } from './errors.js';

/**
 * Why a metered operation (spec 4.4, 4.5) refused, as a stable code. The core names the reason only; each
 * transport decides what it looks like (REST: a status and a problem body, src/server/refusal-status.ts; MCP: a
 * tool error that carries the same status).
 */
export type RefusalCode =
  | 'invalid_request'
  | 'invalid_idempotency_key'
  | 'invalid_file_name'
  | 'empty_content'
  | 'content_too_large'
  | 'not_found'
  | 'idempotency_key_reused'
  | 'idempotency_key_in_flight'
  | 'ask_timeout'
  | 'insufficient_scope'
  | 'record_gone';

export class Refusal extends AgentAccessError {
  declare readonly code: RefusalCode;
  constructor(code: RefusalCode, message: string) {
    super(code, message);
  }
}

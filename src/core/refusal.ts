import type { ProblemCode } from '../protocol/problems.js';
import { AgentAccessError } from './errors.js';

/**
 * Why a metered operation (spec 4.4, 4.5) refused, as a stable code of the registry (src/protocol/problems.ts),
 * which also holds its status. The core names the reason only; each transport decides what it looks like (REST: a
 * problem body with that status; MCP: a tool error that carries the same status).
 */
export type RefusalCode = Extract<
  ProblemCode,
  | 'invalid_request'
  | 'invalid_idempotency_key'
  | 'invalid_file_name'
  | 'content_empty'
  | 'content_too_large'
  | 'research_job_not_found'
  | 'training_document_not_found'
  | 'action_not_found'
  | 'idempotency_key_reused'
  | 'idempotency_key_in_flight'
  | 'ask_timeout'
  | 'insufficient_scope'
  | 'record_gone'
>;

export class Refusal extends AgentAccessError {
  declare readonly code: RefusalCode;
  constructor(code: RefusalCode, message: string, hint?: string) {
    super(code, message, { hint });
  }
}

/**
 * What the resource plane asks of the faults on purpose (emulator control; emulation/faults.ts implements it): whether
 * a request fault of a kind fires on this call. An interface of this wing, so that the resource plane imports nothing
 * of emulation.
 */

/** The request faults the resource plane applies itself (the others fire in the transports or at a moment). */
export type ResourceFaultKind = 'rate_limit' | 'drop_response' | 'ask_timeout' | 'research_fail';

/** What a request fault is checked against. */
export interface FaultContext {
  method?: string;
  /** The route template as registered (`/research/:job_id`) and the path as sent. */
  route?: string;
  path?: string;
  /** An MCP tool call's tool. */
  tool?: string;
  client_id?: string;
  grant_id?: string;
  question?: string;
}

/** A fault that fired, as far as the resource plane reads it. */
export interface FiredFault {
  readonly id: string;
  readonly kind: string;
  readonly retry_after: number | null;
}

export interface FaultPoint {
  /** Whether any fault is armed: a call with none skips the rest. */
  readonly armed: boolean;
  /** The fault of `kind` that fires on this call, if one does (it counts as fired). */
  take(kind: ResourceFaultKind, ctx: FaultContext): FiredFault | null;
}

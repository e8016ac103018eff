import { invalidScope } from '../state/errors.js';
import { SUPPORTED_SCOPES, isRetiredScope, isSupportedScope, splitScope, type Scope } from '../../protocol/scopes.js';

export {
  RETIRED_SCOPES,
  SCOPES,
  SUPPORTED_SCOPES,
  isRetiredScope,
  isSupportedScope,
  splitScope,
  type Scope,
} from '../../protocol/scopes.js';

/**
 * Checks a requested scope list: every entry must be a supported scope (spec 2.7, 5.9);
 * retired and unknown scopes are refused as `invalid_scope` (spec 7).
 */
export function requireSupportedScopes(value: string | undefined): Scope[] {
  if (value === undefined || value.trim() === '') {
    throw invalidScope(`scope is required; supported scopes: ${SUPPORTED_SCOPES.join(' ')}`);
  }
  const scopes = splitScope(value);
  const retired = scopes.filter(isRetiredScope);
  if (retired.length > 0) {
    throw invalidScope(`retired scope ${retired.join(', ')} is no longer supported; "ask" covers all reading`);
  }
  const unknown = scopes.filter((s) => !isSupportedScope(s));
  if (unknown.length > 0) {
    throw invalidScope(`unsupported scope ${unknown.join(', ')}; supported scopes: ${SUPPORTED_SCOPES.join(' ')}`);
  }
  return scopes as Scope[];
}

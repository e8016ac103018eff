import { COLLECTION_NAMES, type State } from './state.js';
import { setOwn } from './tables.js';

/** Where a change may point: a collection entry, a charge total, a workspace change, a signing key, the scenario. */
function checkPath(path: readonly string[]): boolean {
  const [head, ...rest] = path;
  if ((COLLECTION_NAMES as readonly string[]).includes(head as string)) return rest.length === 1;
  if (head === 'charges')
    return (
      // ledger_chain: in a journal an earlier version left (the state check drops it).
      (rest.length === 1 && (rest[0] === 'count' || rest[0] === 'ledger_chain')) ||
      (rest.length === 2 && (rest[0] === 'by_client' || rest[0] === 'by_grant'))
    );
  if (head === 'workspace_changes' || head === 'keys') return rest.length === 1 && /^(0|[1-9]\d{0,8})$/.test(rest[0] as string);
  return head === 'scenario' && rest.length === 0;
}

/**
 * Applies changes as `Repository.drain` produced them to a plain state (a journal replayed on start). Throws on
 * a change that names no place a repository writes (the journal was not written by this version, or was edited).
 */
export function applyChanges(state: State, changes: readonly unknown[]): void {
  const root = state as unknown as Record<string, unknown>;
  for (const raw of changes) {
    if (
      !Array.isArray(raw) ||
      raw.length < 1 ||
      raw.length > 2 ||
      !Array.isArray(raw[0]) ||
      !raw[0].every((s) => typeof s === 'string') ||
      !checkPath(raw[0])
    ) {
      throw new Error(`not a change this version writes: ${JSON.stringify(raw).slice(0, 120)}`);
    }
    const path = raw[0];
    let node = root;
    for (const step of path.slice(0, -1)) {
      const next = node[step];
      if (typeof next !== 'object' || next === null) throw new Error(`change at ${path.join('.')}: ${step} is not there`);
      node = next as Record<string, unknown>;
    }
    const last = path[path.length - 1] as string;
    if (raw.length === 2) {
      if (Array.isArray(node) && Number(last) > node.length) throw new Error(`change at ${path.join('.')}: leaves a gap in the list`);
      setOwn(node, last, raw[1]);
    } else if (Array.isArray(node)) {
      throw new Error(`change at ${path.join('.')}: list entries are never removed`);
    } else {
      delete node[last];
    }
  }
}

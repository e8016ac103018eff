/**
 * Freezes a plain JSON value and everything in it, and returns it. Clients, grants, codes and token families are
 * kept frozen: a change puts a new value in place of the old one (`Repository.put`, `Repository.update`), so
 * nothing can change an entry behind the back of whoever read it, and a store may reuse what it serialised for an
 * entry it has seen before.
 */
export function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) frozen(child);
  }
  return value;
}

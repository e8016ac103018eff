import type { State } from './state.js';

/** `table[key] = value` as an own property, also for the key `__proto__` (which assignment would take as the prototype). */
export function setOwn(table: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(table, key, { value, enumerable: true, writable: true, configurable: true });
  else table[key] = value;
}

/** The tables of the charge totals, inside `state.charges`. */
const CHARGE_TABLES: readonly string[] = ['by_client', 'by_grant'];

/** The live object of a table of `state`. */
export const liveTable = (state: State, name: string): Record<string, unknown> =>
  ((CHARGE_TABLES.includes(name) ? state.charges : state) as unknown as Record<string, Record<string, unknown>>)[name]!;

/** Times as people read them, the same in the CLI's output and on the dashboard. */

/** A duration as people say it: `45s`, `14m 3s`, `2h 5m`, `3d 4h`. */
export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1_000));
  if (s < 60) return `${s}s`;
  if (s < 3_600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3_600)}h ${Math.floor((s % 3_600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3_600)}h`;
}

/** `in 14m 3s` for the future, `3m 0s ago` for the past. */
export const relativeTime = (deltaMs: number): string => (deltaMs >= 0 ? `in ${age(deltaMs)}` : `${age(-deltaMs)} ago`);

/**
 * A JSON value as text for people: strings as they are, numbers and booleans as written, lists joined with `, `,
 * objects as JSON; `fallback` for null and undefined (absent fields).
 */
export function textOf(value: unknown, fallback = ''): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map((v) => textOf(v)).join(', ');
  return value === null || value === undefined ? fallback : JSON.stringify(value);
}

/** `1 retry`, `3 retries`: a count with its noun. */
export const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;

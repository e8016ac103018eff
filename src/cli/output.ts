/** Formatting shared by commands: `--json` for scripts, aligned tables and plain times for people. */
export const jsonText = (value: unknown): string => JSON.stringify(value, null, 2) + '\n';

export const printJson = (value: unknown): void => {
  process.stdout.write(jsonText(value));
};

export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')).join('\n') + '\n';
}

export const time = (ms: number | null | undefined): string => (ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '-');

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

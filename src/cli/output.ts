/** Formatting shared by commands: `--json` for scripts, aligned tables and plain times for people. */
export const jsonText = (value: unknown): string => JSON.stringify(value, null, 2) + '\n';

export const printJson = (value: unknown): void => {
  process.stdout.write(jsonText(value));
};

export function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i] ?? 0))).join('  ')).join('\n') + '\n';
}

export const time = (ms: number | null | undefined): string =>
  ms
    ? new Date(ms)
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, 'Z')
    : '-';

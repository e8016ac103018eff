import { clockTime, line, type View } from './common.js';

/** The Faults view: faults armed on purpose, the armed ones first. */
export const faults: View = {
  title: 'Faults',
  table(state) {
    const order = { armed: 0, spent: 1, cleared: 2 } as const;
    return {
      headers: ['STATE', 'FAULT', 'KIND', 'FIRED', 'WHAT'],
      widths: [7, 9, 14, 5, 40],
      rows: Object.values(state.faults)
        .sort((a, b) => order[a.state] - order[b.state] || b.created_at - a.created_at)
        .map((f) => ({
          key: f.id,
          cells: [
            f.state,
            f.id,
            f.kind,
            `${f.fired}${f.remaining !== null && f.state === 'armed' ? `/${f.fired + f.remaining}` : ''}`,
            f.description,
          ],
          tone: f.state === 'armed' ? 'warn' : 'dim',
        })),
    };
  },
  detail(state, key) {
    const f = state.faults[key];
    if (!f) return [];
    return [
      line(`fault ${f.id} (${f.kind}), armed at ${clockTime(f.created_at)}`),
      line(f.description, f.state === 'armed' ? 'warn' : 'normal'),
      line(
        `state    ${f.state}   fired ${f.fired}×${f.remaining !== null ? `, ${f.remaining} left` : ''}${
          f.last_fired_at ? `, last at ${clockTime(f.last_fired_at)}` : ''
        }`,
      ),
      line('faults are armed with serve --fault, POST /_admin/faults or faults.add()', 'dim'),
    ];
  },
};

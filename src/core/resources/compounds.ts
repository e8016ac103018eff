/**
 * German compounds split into the words they are made of, so that `Boxenplatz` finds `Box mit Paddock` and a question
 * about the `Box` finds the `Pferdebox` (issue 45.2). No npm package does this well and without install scripts, so it is
 * a small rule set (docs/retrieval.md), split against the index's own vocabulary:
 *
 * - a compound is a word of more than 2 × MIN_PART letters (`gehört` is no `geh` + `ört`) whose head and tail are both known words (their stems occur
 *   in the indexed text), each at least MIN_PART letters;
 * - between them may stand a linking element (`-es-`, `-en-`, `-s-`, `-n-`, `-e-`): `Boxen|platz` → Box + Platz,
 *   `Pferde|box` → Pferd + Box, `Heizungs|wartung` → Heizung + Wartung;
 * - the longest known head wins, then head and tail are split again (`Weidezaunreparatur` → Weide + Zaun + Reparatur);
 * - words longer than MAX_WORD are not split, and a word whose split needs more than MAX_TRIES look-ups stays whole:
 *   no German word needs more, and a training document of hostile compounds (256 KiB of 40-letter chains of known
 *   words) must not hold up the event loop (issue 41.6). The budget is counted the same way every time, so the result
 *   stays deterministic.
 *
 * Pure and deterministic: the same word over the same vocabulary splits the same.
 */

/** The shortest part of a compound, in letters (`Box`, `Hof`, `Tag`). */
export const MIN_PART = 3;
/** Longer words are left whole. */
export const MAX_WORD = 40;
/**
 * Look-ups in the vocabulary one word may cost before it is left whole. Over the fixtures the most any compound needs
 * is 60 (`Tierhalterhaftpflichtversicherung`), 9 in 10 need 20 or fewer.
 */
export const MAX_TRIES = 100;
/** Linking elements between the parts, longest first. */
const LINKS = ['es', 'en', 's', 'n', 'e'] as const;

/**
 * The parts of `word` (lower case, letters only) as written (`['pferd', 'box']`), or `[]` when it is no compound of
 * known words. `known` says whether a written word is in the vocabulary (its stem occurs in the index).
 */
export function splitCompound(word: string, known: (part: string) => boolean): string[] {
  if (word.length <= 2 * MIN_PART || word.length > MAX_WORD || !/^\p{L}+$/u.test(word)) return [];
  const memo = new Map<string, string[] | null>();
  let tries = 0;
  // Over the budget every part is unknown: the search unwinds at once, and the word stays whole (below).
  const isKnown = (part: string): boolean => ++tries <= MAX_TRIES && known(part);
  const split = (w: string): string[] | null => {
    const cached = memo.get(w);
    if (cached !== undefined) return cached;
    let found: string[] | null = null;
    for (let i = w.length - MIN_PART; i >= MIN_PART && !found; i--) {
      const head = w.slice(0, i);
      const tail = w.slice(i);
      const heads = [
        head,
        ...LINKS.filter((l) => head.endsWith(l) && head.length - l.length >= MIN_PART).map((l) => head.slice(0, -l.length)),
      ];
      const h = heads.find(isKnown);
      if (h === undefined) continue;
      const tailParts = split(tail) ?? (isKnown(tail) ? [tail] : null);
      if (!tailParts) continue;
      found = [...(split(h) ?? [h]), ...tailParts];
    }
    memo.set(w, found);
    return found;
  };
  const parts = split(word);
  return parts && tries <= MAX_TRIES ? parts : [];
}

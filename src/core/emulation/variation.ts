/**
 * `serve --vary-unspecified`: answers that vary what the spec leaves open (sections 2.4–2.6, 3.1, 4.4), so a
 * client author can prove their code does not depend on what the spec does not promise. Everything the spec
 * does promise stays: the listed fields with their types and values.
 *
 * Pure: how a response object is assigned its variants from the catalogue (variant-catalogue.ts), deterministic from
 * a seed and the object's ordinal. The resource plane turns its canonical answers into the selected variant
 * (resources/variants.ts).
 */
import { fnv1a, type VariantSource } from '../resources/variants.js';
import { CATALOGUE, type Choices, type PinnedChoices, type VariantSelection, type VariedKind } from '../state/variant-catalogue.js';

// The catalogue and a selection's type live apart so that jobs.ts can store a selection without importing this module.
export {
  CATALOGUE,
  type Catalogue,
  type Choices,
  type Dimension,
  type PinnedChoices,
  type VariantSelection,
  type VariedKind,
} from '../state/variant-catalogue.js';

/** The option: on, with the seed every variant is chosen from. */
export interface VaryUnspecified {
  seed: number;
}

/** Seeds are unsigned 32-bit integers, so a seed printed anywhere can be typed back exactly. */
export const MAX_SEED = 0xffff_ffff;

export function checkSeed(seed: number): number {
  if (!Number.isInteger(seed) || seed < 0 || seed > MAX_SEED)
    throw new RangeError(`a variation seed is a whole number from 0 to ${MAX_SEED}, not ${seed}`);
  return seed;
}

/**
 * The variants of the `ordinal`-th object of a kind. Each dimension goes round-robin from a start its seed
 * picks, so any run of consecutive objects as long as a dimension's list shows every variant of it.
 */
export function selectVariant<K extends VariedKind>(seed: number, kind: K, ordinal: number): VariantSelection<K> {
  const dimensions = CATALOGUE[kind] as Record<string, readonly string[]>;
  const choices: Record<string, string> = {};
  for (const [dimension, variants] of Object.entries(dimensions)) {
    choices[dimension] = variants[(fnv1a(`${seed}:${kind}.${dimension}`) + ordinal) % variants.length]!;
  }
  return { kind, seed, ordinal, choices: choices as Choices<K> };
}

/** The emulator's own choice in every dimension: the first variant of each (the README's "the emulator does"). */
export function emulatorChoices<K extends VariedKind>(kind: K): Choices<K> {
  const dimensions = CATALOGUE[kind] as Record<string, readonly string[]>;
  return Object.fromEntries(Object.entries(dimensions).map(([dimension, variants]) => [dimension, variants[0]])) as Choices<K>;
}

/** `serve --profile`: the pinned dimensions and the profile's name, as the header shows it. */
export interface PinnedProfile {
  name: string;
  pins: PinnedChoices;
}

/**
 * Hands out selections in order, one counter per kind (in memory: ordinals count from the emulator's start). With a
 * seed, the dimensions vary; without, each is the emulator's own; a profile's pinned dimensions override both.
 */
export class Variation implements VariantSource {
  readonly #next: Record<VariedKind, number> = { ask: 0, research: 0, training: 0 };
  constructor(
    readonly seed: number | null,
    readonly profile: PinnedProfile | null = null,
  ) {
    if (seed !== null) checkSeed(seed);
  }

  next<K extends VariedKind>(kind: K): VariantSelection<K> {
    const ordinal = this.#next[kind]++;
    const selection: VariantSelection<K> =
      this.seed === null ? { kind, seed: null, ordinal, choices: emulatorChoices(kind) } : selectVariant(this.seed, kind, ordinal);
    if (!this.profile) return selection;
    const pins = this.profile.pins[kind] as Partial<Choices<K>> | undefined;
    return { ...selection, choices: { ...selection.choices, ...pins }, profile: this.profile.name };
  }
}

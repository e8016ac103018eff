import { newId, randomBytesFor } from '../state/crypto.js';
import { formatId } from './variants.js';
import type { VariantSelection } from '../state/variant-catalogue.js';

/** A new id of an answer, job or document: in the form the variant chose (--vary-unspecified), else the emulator's own. */
export const idFor = (variant: VariantSelection | undefined, prefix: string, plain: () => string = () => newId(prefix)): string =>
  variant ? formatId(variant.choices.ids, prefix, randomBytesFor(16)) : plain();

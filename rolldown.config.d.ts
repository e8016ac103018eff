// The types of rolldown.config.js, which test/compile-cache.test.ts reads (what is left out of the bundle).
import type { RolldownOptions } from 'rolldown';

declare const config: RolldownOptions;
export default config;

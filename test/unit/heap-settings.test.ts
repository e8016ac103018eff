import { describe, expect, it } from 'vitest';
import { SEMI_SPACE_FLAG as SEMI_SPACE, userGave } from '../../src/cli/heap-settings.js';

describe("the CLI's V8 settings leave a user's own flag alone", () => {
  it.each([
    [['--max-semi-space-size=16'], ''],
    [['--max_semi_space_size=16'], ''],
    [['--max-semi-space-size', '16'], ''],
    [['--min-semi-space-size=2'], ''],
    [['--semi-space-growth-factor=3'], ''],
    [[], '--max-semi-space-size=16'],
    [[], '--inspect  "--max-semi-space-size=16"'],
    [[], "'--max_semi_space_size=16'"],
  ])("a semi-space flag in %j or NODE_OPTIONS %j is the user's", (execArgv, nodeOptions) => {
    expect(userGave(SEMI_SPACE, execArgv, nodeOptions)).toBe(true);
  });

  it.each([
    [['--max-old-space-size=512'], '--max-old-space-size=512'],
    [['--heap-growing-percent=30'], ''],
    [[], ''],
    [[], '--require ./max-semi-space-size.js'],
  ])('no semi-space flag in %j or NODE_OPTIONS %j', (execArgv, nodeOptions) => {
    expect(userGave(SEMI_SPACE, execArgv, nodeOptions)).toBe(false);
  });
});

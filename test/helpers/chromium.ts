import { accessSync, constants } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`). Playwright's own browser downloads are never used. */
export const CHROMIUM_PATH = '/usr/bin/chromium';

const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** True when an executable Chromium is installed at {@link CHROMIUM_PATH}. */
export function chromiumAvailable(): boolean {
  try {
    accessSync(CHROMIUM_PATH, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** CI installs Chromium (`.ci/run`), so there a missing browser is a failure, not a reason to skip. */
export const inCi = (): boolean => {
  const ci = process.env.CI;
  return ci !== undefined && ci !== '' && ci !== '0' && ci.toLowerCase() !== 'false';
};

export const MISSING_CHROMIUM = `${CHROMIUM_PATH} is missing: install it with "apt-get install -y chromium" (CI does this in .ci/run)`;

/**
 * How a browser test file should treat this machine: run, skip (with a visible warning), or fail in CI.
 * Call once at module level; pass `run` to `describe.skipIf(!run)` and call `requireChromium()` in `beforeAll`.
 */
export function chromiumPlan(file: string): { run: boolean; note: string } {
  if (chromiumAvailable()) return { run: true, note: '' };
  if (inCi()) return { run: true, note: '' }; // runs, and fails in beforeAll with the reason
  console.warn(`[${file}] SKIPPED: ${MISSING_CHROMIUM}`);
  return { run: false, note: ` (SKIPPED: ${CHROMIUM_PATH} missing)` };
}

/** Throws the reason when Chromium is missing (used in CI, where skipping would hide the gap). */
export function requireChromium(): void {
  if (!chromiumAvailable()) throw new Error(`Chromium is required in CI: ${MISSING_CHROMIUM}`);
}

/** Launches headless Debian Chromium through playwright-core. The caller closes it. */
export async function launchChromium(): Promise<Browser> {
  requireChromium();
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ARGS, timeout: 20_000 });
}

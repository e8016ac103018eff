import type { Key } from 'ink';

/** More keys than this in one read is a paste, not typing: the rest is dropped (each key is one render). */
export const MAX_KEYS_PER_READ = 256;

const NO_KEY: Key = {
  upArrow: false,
  downArrow: false,
  leftArrow: false,
  rightArrow: false,
  pageDown: false,
  pageUp: false,
  home: false,
  end: false,
  return: false,
  escape: false,
  ctrl: false,
  shift: false,
  tab: false,
  backspace: false,
  delete: false,
  meta: false,
  super: false,
  hyper: false,
  capsLock: false,
  numLock: false,
};

/** A control character as the key Ink names when it comes alone. */
function keyOf(char: string): [string, Key] {
  const code = char.codePointAt(0) ?? 0;
  if (char === '\r' || char === '\n') return ['', { ...NO_KEY, return: true }];
  if (char === '\t') return ['', { ...NO_KEY, tab: true }];
  if (char === '\u007f' || char === '\b') return ['', { ...NO_KEY, backspace: true }];
  if (code > 0 && code < 0x20) return [String.fromCharCode(code + 0x60), { ...NO_KEY, ctrl: true }];
  return [char, { ...NO_KEY, shift: /^[A-Z]$/.test(char) }];
}

/**
 * The keys of one read, one by one. Ink splits a read at escape sequences (arrows, Esc) but hands the plain characters
 * between them on as one `input` ('jjj' typed fast, key repeat over SSH, `tmux send-keys jjj`, a paste); a handler that
 * compares `input` with one key would drop them all.
 */
export function keysOf(input: string, key: Key): Array<[string, Key]> {
  const chars = [...input];
  if (chars.length <= 1) return [[input, key]];
  return chars.slice(0, MAX_KEYS_PER_READ).map(keyOf);
}

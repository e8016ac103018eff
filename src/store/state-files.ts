/**
 * The files a state is stored in, named after the state file (`state.json`): its journal and its charge ledger.
 * They belong together; every message that tells the user to move a state file away names all of them. The core
 * gets this advice through the persistence port (StatePersistence.resetAdvice): it never names the files itself.
 */

/** The journal beside the state file: `state.json` → `state.journal.jsonl`. */
export const journalFileFor = (stateFile: string): string => `${stateFile.replace(/\.json$/i, '')}.journal.jsonl`;

/** The charge ledger beside the state file: `state.json` → `state.charges.jsonl`. */
export const ledgerFileFor = (stateFile: string): string => `${stateFile.replace(/\.json$/i, '')}.charges.jsonl`;

/** A path quoted for a POSIX shell. */
export const shellQuoted = (path: string): string => `'${path.replace(/'/g, `'\\''`)}'`;

/** A shell command that moves the state file, its journal and its ledger away together (those that exist): never one alone. */
export const moveAwayCommand = (stateFile: string): string =>
  `for f in ${[stateFile, journalFileFor(stateFile), ledgerFileFor(stateFile)].map(shellQuoted).join(' ')}; do [ -e "$f" ] && mv "$f" "$f.bak"; done`;

/** What to do when a state file is refused: said in every such message, so that no message leaves the user stuck. */
export const resetAdvice = (file: string): string =>
  `Nothing was changed. To start over, move the state file away together with its journal and charge ` +
  `ledger (${moveAwayCommand(file)}), or start with --state OTHER_FILE or --in-memory. Snapshots saved beside it are kept: after the ` +
  `fresh start, \`agent-access snapshot list\` shows them and \`agent-access snapshot restore NAME\` brings one back (\`_baseline\`: the ` +
  `state as first created).`;

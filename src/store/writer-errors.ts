/**
 * Error codes the state writer thread (state-writer.ts) answers a commit with when it must not be acknowledged for a
 * reason that is not an I/O error: here, not there, so that the main thread need not load the writer's module.
 */

/**
 * The state's files were found gone from their paths after appending (a journal removed by hand, the state folder
 * removed with it): what the commit appended is in a file no path names, and would be lost.
 */
export const FILES_GONE = { journal: 'JOURNAL_GONE', folder: 'STATE_FOLDER_GONE' } as const;

/** The single-writer lock is no longer this process's: the commit wrote nothing (or is not acknowledged). */
export const LOCK_LOST = 'LOCK_LOST';

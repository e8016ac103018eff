import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, extname, isAbsolute, join, relative, sep } from 'node:path';
import { Script } from 'node:vm';

/**
 * V8's code cache for the command line's bundle (rolldown.config.js): each of its CommonJS chunks is compiled from
 * the bytecode an earlier run left, and a chunk that had none, or whose cache V8 refused, has its own made: by
 * `saveCompileCache()` (serve calls it once it has started and built its index) and as the process exits. Made then,
 * a cache holds the functions the run compiled, not only the top level that Node's own compile cache
 * (module.enableCompileCache, Node >= 22.1) holds, made as a module compiles. Taken from the cache, `serve` reaches
 * its first 200 about 40 ms sooner (docs/bench.md).
 *
 * V8 checks a cache against its own version and flags and the source's length only: the file's name holds a hash of
 * the source, and V8 bytecode is code, so the cache is used only from folders that are the user's own and that no
 * one else may write (`privateFolder`). Nothing here is needed for a command to work: a folder that cannot be made,
 * written or trusted means no cache.
 */
export interface CompileCacheOptions {
  /** the folder whose `.cjs` files are compiled through the cache: the bundle's */
  bundleDir: string;
  /** the root of the cache files, as `compileCacheDir` answers it; folders made below it are 0700, files 0600 */
  cacheDir: string;
  /** runs a compile, or the making of a cache, with V8's flags as a process has them at its start */
  atV8FlagDefaults?: <T>(fn: () => T) => T;
}

/**
 * Where the cache goes, or undefined for none: under `$NODE_COMPILE_CACHE` where the user points Node's own, else
 * `$XDG_CACHE_HOME/agent-access`, else `~/.cache/agent-access`; a folder per Node version. A relative path is not
 * taken (it would change with the working directory). `NODE_DISABLE_COMPILE_CACHE` turns it off, as it does Node's.
 */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.NODE_DISABLE_COMPILE_CACHE) return undefined;
  const absolute = (value: string | undefined) => (value?.trim() && isAbsolute(value.trim()) ? value.trim() : undefined);
  const node = absolute(env.NODE_COMPILE_CACHE);
  if (env.NODE_COMPILE_CACHE?.trim() && !node) return undefined;
  const base = node ? join(node, 'agent-access') : join(absolute(env.XDG_CACHE_HOME) ?? join(homedir(), '.cache'), 'agent-access');
  return join(base, 'compile-cache', `${process.version}-${process.arch}`);
}

/** The folder of one copy of the bundle's cache files. */
export const cacheFolder = (cacheDir: string, bundleDir: string) => join(cacheDir, hash(bundleDir).slice(0, 16));

/** A cache file's name: the chunk's, and a hash of what Node compiles of it. */
const CACHE_FILE = /^[\w-]+\.cjs\.[0-9a-f]{32}$/;
/** The file in each folder that names the bundle it caches, so that a folder whose bundle is gone can go too. */
const BUNDLE_FILE = 'bundle-path';
/** A temp file older than this was left by a run that died while writing. */
const STALE_TEMP_MS = 3_600_000;

interface Compiled {
  script: Script;
  file: string;
}

let active: { save: () => void } | undefined;

/**
 * Compiles the bundle's chunks through the cache from now on, and saves what they lacked when the process exits;
 * once the folder exists and is private, Node's own compile cache goes beside it.
 * Each copy of the bundle (a global install, a project's, a checkout) has a folder of its own; a run that saves
 * removes from it the caches of chunks its copy no longer has and those of a chunk's earlier contents, and removes the
 * folders of copies that are gone.
 */
export function useCompileCache({ bundleDir, cacheDir, atV8FlagDefaults = (fn) => fn() }: CompileCacheOptions): void {
  const folder = cacheFolder(cacheDir, bundleDir);
  const root = rootOf(cacheDir);
  // Whether cache files may be read from the folder (and so, its parents being private too, Node's own may go beside).
  const readable = privateFolder(folder, root);
  // Node's own (>= 22.1) for what is not in the bundle (the dashboard, the packages left out), beside ours rather than
  // in its default folder under the shared temp folder; typings of Node 20 lack it.
  if (readable) (Module as { enableCompileCache?: (dir: string) => unknown }).enableCompileCache?.(join(cacheDir, 'node'));
  let toSave: Compiled[] = [];
  /** The cache file of each chunk this run loaded, by the chunk's name. */
  const loaded = new Map<string, string>();
  // Module's loader calls _compile with the source it read; Node's typings leave this internal out.
  const proto = Module.prototype as unknown as { _compile: (this: Module, content: string, filename: string) => unknown };
  const compile = proto._compile;
  proto._compile = function (this: Module, content: string, filename: string) {
    if (dirname(filename) !== bundleDir || extname(filename) !== '.cjs') return compile.call(this, content, filename);
    const source = Module.wrap(content);
    const name = `${basename(filename)}.${hash(source).slice(0, 32)}`;
    loaded.set(basename(filename), name);
    const cachedData = readable ? readCache(join(folder, name)) : undefined;
    // No import() in a chunk: Node gives code compiled here no loader for it (rolldown.config.js routes each one).
    const script = atV8FlagDefaults(() => new Script(source, { filename, cachedData }));
    if (cachedData === undefined || script.cachedDataRejected === true) toSave.push({ script, file: join(folder, name) });
    const wrapper = script.runInThisContext({ displayErrors: true }) as (...args: unknown[]) => unknown;
    return wrapper.call(this.exports, this.exports, createRequire(filename), this, filename, dirname(filename));
  };
  const save = () => {
    const saving = toSave;
    toSave = [];
    if (saving.length === 0) return;
    try {
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      if (!privateFolder(folder, root)) return;
      for (const { script, file } of saving) {
        // A whole file or none: another run may read it meanwhile. `wx`: never through a file that is there.
        const temp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
        try {
          writeFileSync(
            temp,
            atV8FlagDefaults(() => script.createCachedData()),
            { mode: 0o600, flag: 'wx' },
          );
          renameSync(temp, file);
        } finally {
          rmSync(temp, { force: true });
        }
      }
      writeFileSync(join(folder, BUNDLE_FILE), bundleDir, { mode: 0o600 });
      tidy(folder, bundleDir, loaded);
      for (const other of readdirSync(cacheDir)) {
        const otherFolder = join(cacheDir, other);
        if (otherFolder !== folder && privateFolder(otherFolder, root) && bundleGone(otherFolder))
          rmSync(otherFolder, { recursive: true, force: true });
      }
    } catch {
      // No cache this time: the next run compiles as this one did.
    }
  };
  active = { save };
  process.once('exit', save);
}

/** The folder the user (or ~/.cache) gives, of a cacheDir `<root>/agent-access/compile-cache/<node version>`. */
const rootOf = (cacheDir: string) => dirname(dirname(dirname(cacheDir)));

/**
 * Makes the cache of every chunk loaded so far that lacked one, now rather than at exit: `serve` calls it once it has
 * started, while what its start compiled is still there (V8 drops the bytecode of functions that have not run for a
 * while, and a server may run for days). A no-op without the cache.
 */
export function saveCompileCache(): void {
  active?.save();
}

/**
 * Whether `folder` is a folder of this user's that no one else may write, and so are the folders from `root` down to
 * it (`root`, given by the user, may be shared if it is sticky, as /tmp is). Where there are no user ids (Windows),
 * only that each is a real folder.
 */
function privateFolder(folder: string, root: string): boolean {
  const uid = process.getuid?.();
  try {
    const rootStat = statSync(root);
    if (uid !== undefined && rootStat.uid !== uid && rootStat.uid !== 0) return false;
    if (uid !== undefined && (rootStat.mode & 0o022) !== 0 && (rootStat.mode & 0o1000) === 0) return false;
    const below = relative(root, folder).split(sep);
    for (let i = 1; i <= below.length; i++) {
      const s = lstatSync(join(root, ...below.slice(0, i)));
      if (!s.isDirectory()) return false;
      if (uid !== undefined && (s.uid !== uid || (s.mode & 0o022) !== 0)) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** Removes the cache files of chunks the bundle no longer has, of earlier contents of the chunks loaded, and old temp files. */
function tidy(folder: string, bundleDir: string, loaded: ReadonlyMap<string, string>): void {
  const chunks = new Set(readdirSync(bundleDir));
  for (const file of readdirSync(folder, { withFileTypes: true })) {
    if (!file.isFile()) continue;
    const path = join(folder, file.name);
    if (file.name.endsWith('.tmp')) {
      if (Date.now() - lstatSync(path).mtimeMs > STALE_TEMP_MS) rmSync(path, { force: true });
      continue;
    }
    if (!CACHE_FILE.test(file.name)) continue;
    const chunk = file.name.slice(0, file.name.lastIndexOf('.'));
    if (!chunks.has(chunk) || (loaded.has(chunk) && loaded.get(chunk) !== file.name)) rmSync(path, { force: true });
  }
}

/** Whether the bundle a folder caches is gone; a folder that does not say is left alone. */
function bundleGone(folder: string): boolean {
  try {
    const bundle = readFileSync(join(folder, BUNDLE_FILE), 'utf8');
    return isAbsolute(bundle) && !existsSync(bundle);
  } catch {
    return false;
  }
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function readCache(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

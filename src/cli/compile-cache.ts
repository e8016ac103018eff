import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, extname, isAbsolute, join } from 'node:path';
import { Script } from 'node:vm';

/**
 * V8's code cache for the command line's bundle (rolldown.config.js): each of its CommonJS chunks is compiled from
 * the bytecode a run before this one left, and a chunk that had none, or whose cache V8 refused, leaves its own as
 * the process exits. Made at exit, a cache holds every function the run compiled, the server's request path too;
 * Node's own compile cache (module.enableCompileCache, Node >= 22.1) is made as a module compiles, before any of its
 * functions has run, and holds little more than the top level. Taken from the cache, `serve` reaches its first 200
 * about 35 ms sooner (docs/bench.md).
 *
 * V8 checks a cache against its own version and flags and against the source's length; the file's name holds a hash
 * of the source itself. Nothing here is needed for a command to work: a folder that cannot be made or written means
 * no cache.
 */
export interface CompileCacheOptions {
  /** the folder whose `.cjs` files are compiled through the cache: the bundle's */
  bundleDir: string;
  /** where the cache files are (made 0700, files 0600) */
  cacheDir: string;
  /** runs a compile, or the making of a cache, with V8's flags as a process has them at its start */
  atV8FlagDefaults?: <T>(fn: () => T) => T;
}

interface Compiled {
  script: Script;
  file: string;
}

/**
 * Where the cache goes, or undefined for none: under `$NODE_COMPILE_CACHE` where the user points Node's own, else
 * `$XDG_CACHE_HOME/agent-access`, else `~/.cache/agent-access`; a folder per Node version. `NODE_DISABLE_COMPILE_CACHE`
 * turns it off, as it does Node's.
 */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.NODE_DISABLE_COMPILE_CACHE) return undefined;
  const node = env.NODE_COMPILE_CACHE?.trim();
  const xdg = env.XDG_CACHE_HOME?.trim();
  const base = node ? join(node, 'agent-access') : join(xdg && isAbsolute(xdg) ? xdg : join(homedir(), '.cache'), 'agent-access');
  return join(base, 'compile-cache', `${process.version}-${process.arch}`);
}

/**
 * Compiles the bundle's chunks through the cache from now on, and saves what it lacked when the process exits. Each
 * copy of the bundle (a global install, a project's, a checkout) has a folder of its own; a run that saves removes
 * from it the caches of chunks its copy no longer has, and those of a chunk's earlier contents.
 */
export function useCompileCache({ bundleDir, cacheDir, atV8FlagDefaults = (fn) => fn() }: CompileCacheOptions): void {
  const folder = cacheFolder(cacheDir, bundleDir);
  const toSave: Compiled[] = [];
  /** The cache file of each chunk this run loaded, by the chunk's name. */
  const loaded = new Map<string, string>();
  // Module's loader calls _compile with the source it read; Node's typings leave this internal out.
  const proto = Module.prototype as unknown as { _compile: (this: Module, content: string, filename: string) => unknown };
  const compile = proto._compile;
  proto._compile = function (this: Module, content: string, filename: string) {
    if (dirname(filename) !== bundleDir || extname(filename) !== '.cjs') return compile.call(this, content, filename);
    const name = `${basename(filename)}.${hash(content).slice(0, 32)}`;
    loaded.set(basename(filename), name);
    const cachedData = readCache(join(folder, name));
    const script = atV8FlagDefaults(
      () =>
        // No import() here: the bundle's chunks import through a file Node compiles itself (rolldown.config.js).
        new Script(Module.wrap(content), { filename, cachedData }),
    );
    if (cachedData === undefined || script.cachedDataRejected === true) toSave.push({ script, file: join(folder, name) });
    const wrapper = script.runInThisContext({ displayErrors: true }) as (...args: unknown[]) => unknown;
    return wrapper.call(this.exports, this.exports, createRequire(filename), this, filename, dirname(filename));
  };
  process.once('exit', () => {
    if (toSave.length === 0) return;
    try {
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      for (const { script, file } of toSave) {
        // A whole file or none: another run may read it meanwhile.
        const temp = `${file}.${process.pid}.tmp`;
        writeFileSync(
          temp,
          atV8FlagDefaults(() => script.createCachedData()),
          { mode: 0o600 },
        );
        renameSync(temp, file);
      }
      const chunks = new Set(readdirSync(bundleDir));
      for (const file of readdirSync(folder)) {
        const chunk = file.slice(0, file.lastIndexOf('.'));
        const stale = !chunks.has(chunk) || (loaded.has(chunk) && loaded.get(chunk) !== file);
        if (stale && !file.endsWith('.tmp')) rmSync(join(folder, file), { force: true });
      }
    } catch {
      // No cache this time: the next run compiles as this one did.
    }
  });
}

const hash = (text: string) => createHash('sha256').update(text).digest('hex');

/** The folder of one copy of the bundle's cache files. */
export const cacheFolder = (cacheDir: string, bundleDir: string) => join(cacheDir, hash(bundleDir).slice(0, 16));

function readCache(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

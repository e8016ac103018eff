import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { FastifyServerOptions } from 'fastify';

const require = createRequire(import.meta.url);

/** The emulator's two servers: `{base_url}` and `{auth_url}`. */
export type AppName = 'api' | 'auth';
export type SchemaKind = 'validator' | 'serializer';

type Validate = ((data: unknown) => unknown) & { errors?: unknown };
type Serialize = (data: unknown) => string;
/** What fastify hands a compiler for one part of one route. */
export interface RouteSchemaRequest {
  schema: unknown;
  method: string | string[];
  url: string;
  httpPart?: string;
  httpStatus?: string;
  contentType?: string;
}
type RouteCompiler<F> = (request: RouteSchemaRequest) => F;
type Builder<F> = (externalSchemas: unknown, options: unknown) => RouteCompiler<F>;

/** Where each server's validators and serializers come from: precompiled code at run time, a recorder at build time. */
export interface SchemaCompilers {
  schemaController(app: AppName): FastifyServerOptions['schemaController'];
  /** Said once the servers are built, if what they compiled needs the person's attention. */
  notice?(): string | undefined;
}

/** Names one schema of one route: the app, method, URL and the part it checks (body, querystring, …) or the status it serialises. */
export function routeSchemaKey(app: AppName, request: RouteSchemaRequest): string {
  const method = Array.isArray(request.method) ? request.method.join(',') : request.method;
  const part = request.httpPart ?? request.httpStatus ?? '';
  return [app, method, request.url, part, ...(request.contentType ? [request.contentType] : [])].join(' ');
}

/**
 * What every schema of one context depends on: the schemas added to it and the compiler's options (ajv's
 * coerceTypes, allErrors, …). Hashed once per context, not per route: it is most of the text.
 */
export function contextHash(externalSchemas: unknown, options: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify([externalSchemas, options]))
    .digest('base64url');
}

/**
 * Everything a compiled function depends on besides the compiler's version: the schema and its context (contextHash).
 * Generated code is used only while it matches.
 */
export function routeSchemaHash(kind: SchemaKind, request: RouteSchemaRequest, context: string): string {
  return createHash('sha256')
    .update(JSON.stringify([kind, request.schema, context]))
    .digest('base64url');
}

/** One entry of the generated file: the hash of what it was compiled from, and its module code wrapped in a function. */
type GeneratedEntry = [hash: string, code: (module: { exports: unknown }, exports: unknown, require: NodeJS.Require) => void];
/** The generated file (`npm run build` writes it; see compile-route-schemas.ts). */
export interface GeneratedRouteSchemas {
  versions: Record<'ajv' | 'fast-json-stringify', string>;
  validators: Record<string, GeneratedEntry>;
  serializers: Record<string, GeneratedEntry>;
}

/** How one route schema came to be served. */
export interface RouteSchemaUse {
  kind: SchemaKind;
  key: string;
  precompiled: boolean;
  /** Why it was compiled at start instead. */
  reason?: string;
}

/** A require that resolves as the package `specifier` does. */
const requireFrom = (specifier: string) => createRequire(require.resolve(specifier));
let requires: Record<SchemaKind, NodeJS.Require> | undefined;

/**
 * The generated code's requires resolve from the compiler that generated it: a validator's helpers from the ajv of
 * @fastify/ajv-compiler, a serializer's (and its inlined validators') from fast-json-stringify. Resolving loads neither.
 */
export function generatedCodeRequire(kind: SchemaKind): NodeJS.Require {
  requires ??= {
    validator: requireFrom('@fastify/ajv-compiler'),
    serializer: createRequire(requireFrom('@fastify/fast-json-stringify-compiler').resolve('fast-json-stringify')),
  };
  return requires[kind];
}

/** The versions of ajv and fast-json-stringify that compile the route schemas. */
export function compilerVersions(): GeneratedRouteSchemas['versions'] {
  const version = (kind: SchemaKind, file: string) => (generatedCodeRequire(kind)(file) as { version: string }).version;
  return { ajv: version('validator', 'ajv/package.json'), 'fast-json-stringify': version('serializer', './package.json') };
}

/**
 * The validators (ajv) and serializers (fast-json-stringify) of both servers, compiled by `npm run build` into
 * `dist/generated/route-schemas.cjs`: starting compiles nothing and loads neither compiler, only their small run-time
 * helpers. A schema the generated code does not match (a route added through `extendApi`, a schema changed after the
 * build, a missing or foreign file) is compiled when fastify registers its route, never on a first request, with the
 * same compilers and options fastify would use.
 */
export class PrecompiledSchemas implements SchemaCompilers {
  /** Every schema fastify asked for, in order: what served it, and why it was compiled if it was. */
  readonly uses: RouteSchemaUse[] = [];
  readonly #generated: GeneratedRouteSchemas | undefined;
  /** Why the generated file is not used at all. */
  readonly #unusable: string | undefined;
  /** Whether a mismatch is news: running from source, the build's file may well be older than the code. */
  readonly #expected: boolean;

  private constructor(generated: GeneratedRouteSchemas | undefined, unusable: string | undefined, expected: boolean) {
    this.#generated = generated;
    this.#unusable = unusable;
    this.#expected = expected;
  }

  /** The build's generated file beside this module (running from source: the one in dist/). */
  static load(file = defaultGeneratedFile()): PrecompiledSchemas {
    const expected = !import.meta.url.endsWith('.ts');
    let generated: GeneratedRouteSchemas;
    try {
      generated = require(file) as GeneratedRouteSchemas;
    } catch (e) {
      const missing = (e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND';
      return new PrecompiledSchemas(
        undefined,
        missing ? `${file} is missing` : `${file} does not load (${(e as Error).message})`,
        expected,
      );
    }
    const schemas = new PrecompiledSchemas(generated, undefined, expected);
    return schemas.#checkVersions() ?? schemas;
  }

  /** Code generated by another major version of ajv or fast-json-stringify may call helpers the installed one lacks. */
  #checkVersions(): PrecompiledSchemas | undefined {
    const installed = compilerVersions();
    const major = (version: string | undefined) => version?.split('.')[0];
    const foreign = (['ajv', 'fast-json-stringify'] as const).filter(
      (name) => major(this.#generated?.versions[name]) !== major(installed[name]),
    );
    if (foreign.length === 0) return undefined;
    const which = foreign.map((name) => `${name} ${this.#generated?.versions[name]}, installed ${installed[name]}`).join('; ');
    return new PrecompiledSchemas(undefined, `the generated code is for another major version (${which})`, this.#expected);
  }

  /** The generated function for this schema, or why there is none that fits. */
  #precompiled<F>(kind: SchemaKind, key: string, hash: string): F | string {
    if (!this.#generated) return this.#unusable ?? 'no generated code';
    const entry = (kind === 'validator' ? this.#generated.validators : this.#generated.serializers)[key];
    if (!entry) return 'not generated';
    if (entry[0] !== hash) return 'changed since the build';
    const module = { exports: undefined as unknown };
    entry[1](module, module.exports, generatedCodeRequire(kind));
    return module.exports as F;
  }

  #builder<F>(app: AppName, kind: SchemaKind, compile: (externalSchemas: unknown, options: unknown) => RouteCompiler<F>): Builder<F> {
    return (externalSchemas, options) => {
      let compiler: RouteCompiler<F> | undefined;
      const context = contextHash(externalSchemas, options);
      return (request) => {
        const key = routeSchemaKey(app, request);
        const found = this.#precompiled<F>(kind, key, routeSchemaHash(kind, request, context));
        if (typeof found !== 'string') {
          this.uses.push({ kind, key, precompiled: true });
          return found;
        }
        this.uses.push({ kind, key, precompiled: false, reason: found });
        return (compiler ??= compile(externalSchemas, options))(request);
      };
    };
  }

  schemaController(app: AppName): FastifyServerOptions['schemaController'] {
    // The compilers fastify itself would use, with the options it gives them: the same validation, the same errors.
    const buildValidator = this.#builder<Validate>(app, 'validator', (externalSchemas, options) =>
      (require('@fastify/ajv-compiler') as () => Builder<Validate>)()(externalSchemas, options),
    );
    const buildSerializer = this.#builder<Serialize>(app, 'serializer', (externalSchemas, options) =>
      (require('@fastify/fast-json-stringify-compiler') as { SerializerSelector: () => Builder<Serialize> }).SerializerSelector()(
        externalSchemas,
        options,
      ),
    );
    return { compilersFactory: { buildValidator: buildValidator as never, buildSerializer: buildSerializer as never } };
  }

  /**
   * One line for the person at the terminal when schemas of the service were compiled at start: the build is out of
   * date or incomplete. Routes the generated code never had (`extendApi`) are expected and not mentioned.
   */
  notice(): string | undefined {
    if (!this.#expected) return undefined;
    const compiled = this.uses.filter((use) => !use.precompiled && use.reason !== 'not generated');
    if (compiled.length === 0) return undefined;
    if (this.#unusable) return `compiled all ${compiled.length} route schemas at start: ${this.#unusable}; run npm run build`;
    const names = compiled.map((use) => `${use.key} (${use.kind})`);
    return `compiled ${compiled.length} route schemas at start, changed since the build: ${names.join(', ')}; run npm run build`;
  }
}

/** Where `npm run build` writes the generated code: dist/generated/, beside dist/server/. */
export function defaultGeneratedFile(): string {
  const fromSource = import.meta.url.endsWith('.ts');
  return fileURLToPath(new URL(fromSource ? '../../dist/generated/route-schemas.cjs' : '../generated/route-schemas.cjs', import.meta.url));
}

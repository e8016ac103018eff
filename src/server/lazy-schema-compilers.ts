import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

const require = createRequire(import.meta.url);

type Validate = ((data: unknown) => unknown) & { errors?: unknown };
type RouteCompiler<F> = (routeSchema: unknown) => F;
type Builder<F> = (externalSchemas: unknown, options: unknown) => RouteCompiler<F>;

/**
 * Fastify's own compilers (ajv for input, fast-json-stringify for output), built and run on first use of a
 * route instead of when the server starts: compiling every schema of both servers took half of the start-up
 * time. `warmUp()` compiles what is left in the background once the emulator is listening. Validation itself
 * is unchanged.
 */
export class LazySchemaCompilers {
  readonly #pending: Array<() => unknown> = [];

  readonly buildValidator: Builder<Validate> = (externalSchemas, options) => {
    let compiler: RouteCompiler<Validate> | undefined;
    const compilerFor = () => (compiler ??= (require('@fastify/ajv-compiler') as () => Builder<Validate>)()(externalSchemas, options));
    return (routeSchema) => {
      let validate: Validate | undefined;
      const compiled = () => (validate ??= compilerFor()(routeSchema));
      this.#pending.push(compiled);
      const lazy: Validate = (data) => {
        const inner = compiled();
        const result = inner(data);
        lazy.errors = inner.errors;
        return result;
      };
      return lazy;
    };
  };

  readonly buildSerializer: Builder<(data: unknown) => string> = (externalSchemas, options) => {
    let compiler: RouteCompiler<(data: unknown) => string> | undefined;
    const compilerFor = () =>
      (compiler ??= (
        require('@fastify/fast-json-stringify-compiler') as { SerializerSelector: () => Builder<(data: unknown) => string> }
      ).SerializerSelector()(externalSchemas, options));
    return (routeSchema) => {
      let serialize: ((data: unknown) => string) | undefined;
      const compiled = () => (serialize ??= compilerFor()(routeSchema));
      this.#pending.push(compiled);
      return (data) => compiled()(data);
    };
  };

  /** Fastify options that install these compilers. */
  get schemaController(): FastifyServerOptions['schemaController'] {
    return { compilersFactory: { buildValidator: this.buildValidator as never, buildSerializer: this.buildSerializer as never } };
  }

  /** Compiles every schema not compiled yet, one per turn of the event loop so requests are not held up. */
  async warmUp(): Promise<void> {
    while (this.#pending.length > 0) {
      this.#pending.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}

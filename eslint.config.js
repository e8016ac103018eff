// Lint: typescript-eslint's type-aware recommended rules on every TypeScript file; formatting is prettier's
// (eslint-config-prettier turns off the rules that would fight it).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'build/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['vitest.config.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // fastify handlers and the persistence interfaces are async by contract: returning a value from an async function
      // without an await is how they answer.
      '@typescript-eslint/require-await': 'off',
      // Control characters in patterns are deliberate: input validation refuses them, tests strip terminal escapes.
      'no-control-regex': 'off',
      // `_`-prefixed names mark parameters an interface requires but this implementation does not use.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Tests read JSON bodies from the wire and assert on them: `any` there is the point, and a wrong field fails the
    // assertion. Every other type-aware rule applies to tests as to the source.
    files: ['test/**/*.ts', 'test/**/*.tsx'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  { files: ['**/*.js', '**/*.cjs', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  // bin/ is CommonJS (bin/package.json): see bin/agent-access.js.
  {
    files: ['**/*.cjs', 'bin/**/*.js'],
    languageOptions: { sourceType: 'commonjs', globals: { module: 'writable', require: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  prettier,
  {
    // No source line over 160 characters (issue 47): long messages are split with `+`, the text unchanged. ESLint 9
    // deprecates its core max-len for @stylistic's, which is not installed here; the core rule still works. After
    // eslint-config-prettier, which turns it off.
    files: ['src/**/*.ts'],
    rules: { 'max-len': ['error', { code: 160 }] },
  },
);

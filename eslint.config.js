import js from '@eslint/js';
import tseslint from 'typescript-eslint';
// Last: turns off the stylistic rules Prettier decides.
import prettier from 'eslint-config-prettier';

export default tseslint.config(
  { ignores: ['dist/**', '**/dist/**', 'release/**', 'node_modules/**', '.dunwall/**', 'coverage/**', 'test-results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Build scripts run on Node.
    files: ['**/*.mjs'],
    languageOptions: { globals: { console: 'readonly', process: 'readonly' } },
  },
  {
    rules: {
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  prettier,
);

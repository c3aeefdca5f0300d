// @ts-check
// ESLint for every JavaScript file of the viewer (`npm run lint`). The rule set: eslint:recommended
// (@eslint/js "recommended"), plus the rules below, each for a reason given beside it.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["dist/", "node_modules/"] },
  js.configs.recommended,
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.browser } },
    rules: {
      eqeqeq: "error",                          // no coercing ==: ids and indices are compared as they are
      "no-var": "error",
      "prefer-const": "error",
      "no-implicit-globals": "error",
      "no-shadow": "error",                     // a shadowed `g` (graph, group, context) reads wrong
      "no-unused-vars": ["error", { args: "after-used", argsIgnorePattern: "^_" }],
      "no-restricted-properties": ["error",     // names are text, never markup (see STYLE.md)
        { property: "innerHTML", message: "insert names with textContent" },
        { property: "outerHTML", message: "insert names with textContent" },
        { property: "insertAdjacentHTML", message: "insert names with textContent" }],
      "no-eval": "error",
      "no-new-func": "error",
      "no-console": "error",
    },
  },
  {
    files: ["test/**/*.js", "build.mjs", "eslint.config.js"],
    languageOptions: { globals: { ...globals.node } },
  },
];

// @ts-check
// Bundles src/ into dist/viewer.js (one IIFE defining `GraphvizAppViewer`) and dist/viewer.css.
// Run by `npm run build` (the Makefile's setup); nothing is fetched at run time.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";

mkdirSync("dist", { recursive: true });
await build({
  entryPoints: ["src/main.js"],
  bundle: true,
  format: "iife",
  globalName: "GraphvizAppViewer",
  target: ["chrome100", "firefox113"],
  minify: true,
  legalComments: "none",
  outfile: "dist/viewer.js",
  logLevel: "warning",
});
copyFileSync("src/viewer.css", "dist/viewer.css");

// The bundle goes inside a <script> element: "</script" would end it and "<!--" change how HTML
// reads it. Both occur only inside string literals (Graphviz's own texts), where these escapes mean the same.
const text = readFileSync("dist/viewer.js", "utf8").replaceAll("<!--", "<\\x21--").replaceAll("</script", "<\\/script");
writeFileSync("dist/viewer.js", text);

// The conformance CLI imports `globSync` from `fs`, which Node gained in 22; CI runs Node
// 20. Only its `tier-check` command calls it, which these tests do not use, so the import
// is rewritten to a stub that fails loudly if it is ever reached. Loaded with `--import`.
import { register } from "node:module";

const major = Number(process.versions.node.split(".")[0]);
if (major < 22) {
  register("./node20-compat-hooks.mjs", import.meta.url);
}

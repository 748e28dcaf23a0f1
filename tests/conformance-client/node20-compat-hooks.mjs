// Module hook for node20-compat.mjs: drops `globSync` from the conformance CLI's `fs`
// import and defines it as a stub instead.
const STUB = "const __globSyncUnavailable = () => { throw new Error(\"fs.globSync needs Node 22\"); };\n";

export async function load(url, context, nextLoad) {
  const result = await nextLoad(url, context);
  if (!url.includes("/@modelcontextprotocol/conformance/dist/")) {
    return result;
  }
  const source = String(result.source);
  const match = source.match(/globSync as (\w+),/);
  if (!match) {
    return result;
  }
  const rewritten = source.replace(match[0], "");
  const stub = STUB.replace("__globSyncUnavailable", match[1]);
  // A `#!` line must stay first.
  const shebang = rewritten.startsWith("#!") ? rewritten.indexOf("\n") + 1 : 0;
  return {
    ...result,
    source: rewritten.slice(0, shebang) + stub + rewritten.slice(shebang),
  };
}

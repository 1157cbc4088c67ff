// Builds one JavaScript plugin into a WebAssembly component: `node componentize.mjs
// PLUGIN_DIR OUT.wasm WIT_DIR`. Run by `build`, from the folder where the pinned
// componentize-js is installed.
//
// The plugin folder holds a `package.json` (its name and version are what `describe`
// answers) and the module its `main` names, which exports `process(event, config)` and
// optionally `init(params)`. The plugin folder and `sluice.js` are copied into a work folder
// next to a generated entry module that exports the WIT `processor` interface.

import { componentize } from "@bytecodealliance/componentize-js";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const [pluginDir, out, witDir] = process.argv.slice(2).map((p) => resolve(p));
if (!witDir) {
  console.error("usage: node componentize.mjs PLUGIN_DIR OUT.wasm WIT_DIR");
  process.exit(2);
}
const helper = join(dirname(fileURLToPath(import.meta.url)), "sluice.js");
const manifest = JSON.parse(await readFile(join(pluginDir, "package.json"), "utf8"));
const name = basename(pluginDir);
// The host interface is imported by its versioned name, that of the WIT package built against.
const wit = await readFile(join(witDir, "plugin.wit"), "utf8");
const witPackage = /^package\s+(sluice:plugin@[^;\s]+);/m.exec(wit)?.[1];
if (!witPackage) throw new Error(`no \`package sluice:plugin@VERSION;\` in ${witDir}/plugin.wit`);

const work = await mkdtemp(join(tmpdir(), "sluice-js-"));
try {
  await cp(helper, join(work, "sluice.js"));
  await cp(pluginDir, join(work, name), { recursive: true });
  const main = `./${name}/${manifest.main ?? "index.js"}`;
  const entry = join(work, "entry.js");
  await writeFile(
    entry,
    `import * as plugin from ${JSON.stringify(main)};\n` +
      `import * as host from ${JSON.stringify(witPackage.replace("@", "/host@"))};\n` +
      `import { processorOf } from "./sluice.js";\n` +
      `export const processor = processorOf(plugin, ${JSON.stringify(manifest.name)}, ` +
      `${JSON.stringify(manifest.version)}, host);\n`,
  );
  process.chdir(work);
  const { component } = await componentize({
    sourcePath: entry,
    witPath: witDir,
    worldName: "event-processor",
    // The sandbox grants no network; clocks are frozen and randomness seeded unless the
    // stage grants them, so a plugin gets neither from the engine: all of it is left out.
    disableFeatures: ["http", "fetch-event", "clocks", "random", "stdio"],
  });
  await writeFile(out, component);
} finally {
  await rm(work, { recursive: true, force: true });
}

// Builds one JavaScript plugin into a WebAssembly component: `node componentize.mjs
// PLUGIN_DIR OUT.wasm WIT_DIR [HELPER]`, from a folder where the pinned componentize-js is
// installed: run by `build` in this repository, and by `npm run build` in a project of
// `sluice plugin new --lang js` (which writes this file, the helper and the WIT there).
//
// The plugin folder holds a `package.json` (its name and version are what `describe`
// answers) and the module its `main` names, which exports `process(event, config)` and
// optionally `init(params)`. The plugin folder (without `node_modules`, dot files and
// components) is copied into a work folder next to a generated entry module that exports
// the WIT `processor` interface. The helper (HELPER, by default the `sluice.js` beside this
// file, with its modules `sluice-*.js` beside it) is put where the plugin imports it from, relative to the plugin's folder
// (`../sluice.js` in udfs/js, `sluice/sluice.js` in a generated project), and the entry
// imports that same module: the plugin's `log` and `Rejection` are the entry's.

import { componentize } from "@bytecodealliance/componentize-js";
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const [pluginDir, out, witDir, helperArg] = process.argv.slice(2).map((p) => resolve(p));
if (!witDir) {
  console.error("usage: node componentize.mjs PLUGIN_DIR OUT.wasm WIT_DIR [HELPER]");
  process.exit(2);
}
const helper = helperArg ?? join(dirname(fileURLToPath(import.meta.url)), "sluice.js");
const manifest = JSON.parse(await readFile(join(pluginDir, "package.json"), "utf8"));
const name = basename(pluginDir);
// The host and lookup interfaces are imported by their versioned names, those of the WIT
// package built against.
const wit = await readFile(join(witDir, "plugin.wit"), "utf8");
const witPackage = /^package\s+(sluice:plugin@[^;\s]+);/m.exec(wit)?.[1];
if (!witPackage) throw new Error(`no \`package sluice:plugin@VERSION;\` in ${witDir}/plugin.wit`);

const work = await mkdtemp(join(tmpdir(), "sluice-js-"));
try {
  const copy = join(work, name);
  const helperAt = join(copy, relative(pluginDir, helper));
  if (!helperAt.startsWith(work + sep)) {
    throw new Error(`the helper ${helper} is neither in ${pluginDir} nor beside it`);
  }
  const skipped = (path) =>
    path !== pluginDir && (/^(node_modules$|\.)/.test(basename(path)) || path.endsWith(".wasm"));
  await cp(pluginDir, copy, { recursive: true, filter: (path) => !skipped(path) });
  // The helper's own modules beside it (`sluice-*.js`) go with it.
  const helperDir = dirname(helper);
  const modules = (await readdir(helperDir)).filter((f) => /^sluice-[\w-]+\.js$/.test(f));
  for (const file of [basename(helper), ...modules]) {
    await cp(join(helperDir, file), join(dirname(helperAt), file));
  }
  const helperImport = `./${relative(work, helperAt).split(sep).join("/")}`;
  const main = `./${name}/${manifest.main ?? "index.js"}`;
  const entry = join(work, "entry.js");
  await writeFile(
    entry,
    `import * as plugin from ${JSON.stringify(main)};\n` +
      `import * as host from ${JSON.stringify(witPackage.replace("@", "/host@"))};\n` +
      `import * as lookup from ${JSON.stringify(witPackage.replace("@", "/lookup@"))};\n` +
      `import { processorOf } from ${JSON.stringify(helperImport)};\n` +
      `export const processor = processorOf(plugin, ${JSON.stringify(manifest.name)}, ` +
      `${JSON.stringify(manifest.version)}, host, lookup);\n`,
  );
  // The world without the `scan` import (0.2.2): componentize-js imports every interface
  // of its world, and the host reads every event's fields for a plugin that imports it,
  // which the helper's `JSON.parse` has no use for.
  const jsWit = join(work, "wit");
  await mkdir(jsWit);
  await writeFile(join(jsWit, "plugin.wit"), wit.replace(/^\s*import scan;\s*$/m, ""));
  process.chdir(work);
  const { component } = await componentize({
    sourcePath: entry,
    witPath: jsWit,
    worldName: "event-processor",
    // The sandbox grants no network; clocks are frozen and randomness seeded unless the
    // stage grants them, so a plugin gets neither from the engine: all of it is left out.
    disableFeatures: ["http", "fetch-event", "clocks", "random", "stdio"],
  });
  await writeFile(out, component);
} finally {
  await rm(work, { recursive: true, force: true });
}

// A plugin for the tests and the benchmark of the JavaScript helper, in one of these modes
// (parameter `mode`):
// - `keep` (default): keeps every event without reading it: what the chunk crossing and
//   the helper's loop cost;
// - `parse`: parses every value as JSON and keeps the event: what JSON.parse adds;
// - `rewrite`: rewrites `{"n": N}` into `{"n": N + 1}` and rejects other values with
//   `not_a_count`, on field `n`;
// - `patch`: patches `{"n": N}` with `{"doubled": 2N, "source": "js"}`, rejects other values
//   as `rewrite` does;
// - `throw`: throws a TypeError on the value `"boom"`, and logs each value at info level.

import { keep, log, patch, reject, rewrite } from "../sluice.js";

const MODES = ["keep", "parse", "rewrite", "patch", "throw"];

export function init(params) {
  params.only(["mode"]);
  const mode = params.get("mode") ?? "keep";
  if (!MODES.includes(mode)) throw `unknown mode ${mode}; modes: ${MODES.join(", ")}`;
  return mode;
}

function count(event) {
  const value = event.json();
  return typeof value?.n === "number" ? value.n : null;
}

export function process(event, mode) {
  switch (mode) {
    case "parse":
      event.json();
      return keep();
    case "rewrite": {
      const n = count(event);
      if (n === null) return reject("not_a_count", "n must be a number", "n");
      return rewrite({ n: n + 1 });
    }
    case "patch": {
      const n = count(event);
      if (n === null) return reject("not_a_count", "n must be a number", "n");
      return patch({ doubled: 2 * n, source: "js" });
    }
    case "throw": {
      const text = event.text();
      log.info(`judging ${text}`);
      if (text === '"boom"') throw new TypeError("boom is not an event");
      return keep();
    }
    default:
      return keep();
  }
}

// A plugin for the tests and the benchmark of the JavaScript helper, in one of these modes
// (parameter `mode`):
// - `keep` (default): keeps every event without reading it: what the chunk crossing and
//   the helper's loop cost;
// - `parse`: parses every value as JSON and keeps the event: what JSON.parse adds;
// - `rewrite`: rewrites `{"n": N}` into `{"n": N + 1}` and rejects other values with
//   `not_a_count`, on field `n`;
// - `throw`: throws a TypeError on the value `"boom"`, and logs each value at info level.

import { keep, log, reject, rewrite } from "../sluice.js";

const MODES = ["keep", "parse", "rewrite", "throw"];

export function init(params) {
  params.only(["mode"]);
  const mode = params.get("mode") ?? "keep";
  if (!MODES.includes(mode)) throw `unknown mode ${mode}; modes: ${MODES.join(", ")}`;
  return mode;
}

export function process(event, mode) {
  switch (mode) {
    case "parse":
      event.json();
      return keep();
    case "rewrite": {
      const value = event.json();
      if (typeof value?.n !== "number") return reject("not_a_count", "n must be a number", "n");
      return rewrite({ n: value.n + 1 });
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

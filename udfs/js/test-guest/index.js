// A plugin for the tests and the benchmark of the JavaScript helper, in one of these modes
// (parameter `mode`):
// - `keep` (default): keeps every event without reading it: what the chunk crossing and
//   the helper's loop cost;
// - `parse`: parses every value as JSON and keeps the event: what JSON.parse adds;
// - `rewrite`: rewrites `{"n": N}` into `{"n": N + 1}` and rejects other values with
//   `not_a_count`, on field `n`;
// - `patch`: patches `{"n": N}` with `{"doubled": 2N, "source": "js"}`, rejects other values
//   as `rewrite` does;
// - `enrich`: announces each event's `user` in lookup table `profiles` (`prefetch`) and
//   patches the event with the profile's `tier` (read by the host: `lookupFields`), or
//   rejects it with `unknown_user`;
// - `lookup`: the same from whole values, one host call per event (`lookup`, no prefetch);
// - `throw`: throws a TypeError on the value `"boom"`, and logs each value at info level.

import { keep, log, lookup, lookupFields, patch, reject, rewrite } from "../sluice.js";

const MODES = ["keep", "parse", "rewrite", "patch", "enrich", "lookup", "throw"];

export function init(params) {
  params.only(["mode"]);
  const mode = params.get("mode") ?? "keep";
  if (!MODES.includes(mode)) throw `unknown mode ${mode}; modes: ${MODES.join(", ")}`;
  return mode;
}

export function prefetch(event, lookups, mode) {
  if (mode === "enrich") lookups.wantFields("profiles", event.json().user ?? "", ["tier"]);
}

function count(event) {
  const value = event.json();
  return typeof value?.n === "number" ? value.n : null;
}

function enriched(user, profile) {
  if (profile === null) return reject("unknown_user", `no profile for user ${user}`, "user");
  return patch({ tier: profile.tier ?? null });
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
    case "enrich": {
      const user = event.json().user ?? "";
      return enriched(user, lookupFields("profiles", user, ["tier"]));
    }
    case "lookup": {
      const user = event.json().user ?? "";
      return enriched(user, lookup("profiles", user));
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

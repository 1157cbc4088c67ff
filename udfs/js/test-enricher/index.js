// A JavaScript enrichment for the tests of the helper's lookups, in one of these modes
// (parameter `mode`), over events `{"user": ID}`:
// - `enrich` (default): announces each event's `user` in lookup table `profiles`
//   (`prefetch`) and patches the event with the profile's `tier` (read by the host:
//   `lookupFields`), or rejects it with `unknown_user`;
// - `lookup`: the same from whole values, one host call per event (`lookup`, nothing
//   announced).
// (A module of its own: exporting `prefetch` makes the helper run it over every chunk,
// which the test guest's benchmark modes must not pay for.)

import { lookup, lookupFields, patch, reject } from "../sluice.js";

const MODES = ["enrich", "lookup"];

export function init(params) {
  params.only(["mode"]);
  const mode = params.get("mode") ?? "enrich";
  if (!MODES.includes(mode)) throw `unknown mode ${mode}; modes: ${MODES.join(", ")}`;
  return mode;
}

export function prefetch(event, lookups, mode) {
  if (mode === "enrich") lookups.wantFields("profiles", event.json().user ?? "", ["tier"]);
}

export function process(event, mode) {
  const user = event.json().user ?? "";
  const profile = mode === "enrich" ? lookupFields("profiles", user, ["tier"]) : lookup("profiles", user);
  if (profile === null) return reject("unknown_user", `no profile for user ${user}`, "user");
  return patch({ tier: profile.tier ?? null });
}

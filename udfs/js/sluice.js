// Write sluice plugins in plain JavaScript.
//
// A plugin module exports one function that judges one event:
//
//     import { keep, reject } from "../sluice.js";
//
//     export function process(event) {
//       const click = event.json(); // malformed JSON becomes a `malformed_json` rejection
//       if (typeof click.user_id !== "string") {
//         return reject("missing_user", "user_id is required", "user_id");
//       }
//       return keep();
//     }
//
// and, when it takes parameters from the pipeline configuration, an `init(params)` whose
// result is handed to every `process(event, config)` call. Without `init` the plugin takes
// no parameters and refuses any it is given (as a Rust plugin exported with `export!(f)`).
//
// An enrichment answers `patch({ field: value })` (the host adds or replaces those fields as
// it encodes the event) and reads the pipeline's lookup tables with `lookup(table, key)` or
// `lookupFields(table, key, names)`. A module that also exports `prefetch(event, lookups,
// config)` announces each event's lookups (`lookups.want(table, key)`,
// `lookups.wantFields(table, key, names)`) before its chunk is processed: the helper then
// asks the host for all of a chunk's keys in one call per table, and `lookup` and
// `lookupFields` answer from there.
//
// `build` (next to this file) turns such a module into a WebAssembly component of the
// `event-processor` world of `wit/plugin.wit`: it wraps the module with `processorOf`,
// which implements the WIT `processor` interface over the columnar chunk of events.
//
// A plugin's unit tests run in Node.js as they are: `judge(plugin, values, params)` gives the
// verdicts the component would give. It lives in `sluice-judge.js` beside this file (the
// helper's only other module, which the build copies with it) and is exported from here.

export { judge } from "./sluice-judge.js";

/** Rejection codes the helper itself produces (the same as the Rust SDK's). */
export const codes = Object.freeze({
  /** The value is not well-formed JSON (or not valid UTF-8). */
  MALFORMED_JSON: "malformed_json",
  /** A JSON field has the wrong type; the rejection names the field. */
  INVALID_FIELD_TYPE: "invalid_field_type",
  /** The event has a null value (a Kafka tombstone). */
  NULL_VALUE: "null_value",
});

const KEEP = Object.freeze({ action: "keep" });

/** The event goes on unchanged. */
export function keep() {
  return KEEP;
}

/**
 * The event goes on with a new value: a `Uint8Array`, a string (written as UTF-8) or any
 * other value (written as JSON).
 */
export function rewrite(value) {
  return { action: "rewrite", value: encodeValue(value) };
}

/**
 * The event is rejected: `code` is machine-readable (`snake_case`, stable), `message`
 * human-readable, `field` the offending field when one is to blame.
 */
export function reject(code, message, field) {
  return { action: "reject", code: String(code), message: String(message), field: field ?? null };
}

/**
 * A rejection thrown from anywhere inside `process` (as `event.json()` does for malformed
 * JSON) rejects the event, as if it had been returned.
 */
export class Rejection {
  constructor(code, message, field) {
    this.verdict = reject(code, message, field);
  }
}

/** The host's `log` import, connected by `processorOf`. */
let hostLog = () => {};

/** Writes to the host's log, tagged with the plugin's name. */
export const log = Object.freeze({
  trace: (message) => hostLog("trace", String(message)),
  debug: (message) => hostLog("debug", String(message)),
  info: (message) => hostLog("info", String(message)),
  warn: (message) => hostLog("warn", String(message)),
  error: (message) => hostLog("error", String(message)),
});

/** The parameters given to a plugin in the pipeline configuration. */
export class Params {
  constructor(pairs) {
    this.pairs = pairs;
  }

  /** The value of `key` (the last one given), or `undefined`. */
  get(key) {
    let value;
    for (const [k, v] of this.pairs) {
      if (k === key) value = v;
    }
    return value;
  }

  /** The value of `key` as a comma-separated list of trimmed, non-empty items. */
  list(key) {
    const raw = this.get(key);
    if (raw === undefined) return undefined;
    return raw
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  }

  /** Throws, naming the first unknown key, when a parameter outside `known` is given. */
  only(known) {
    const unknown = this.pairs.find(([k]) => !known.includes(k));
    if (unknown === undefined) return;
    const [k] = unknown;
    if (known.length === 0) {
      throw `unknown parameter \`${k}\`: this plugin takes no parameters`;
    }
    throw `unknown parameter \`${k}\`; known parameters: ${known.join(", ")}`;
  }
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const ENCODER = new TextEncoder();

function encodeValue(value) {
  if (value instanceof Uint8Array) return value;
  if (typeof value === "string") return ENCODER.encode(value);
  return ENCODER.encode(JSON.stringify(value));
}

/** One event of a chunk. Fields are read from the chunk only when asked for. */
class Event {
  constructor(chunk, index, keyStart, valueStart) {
    this.chunk = chunk;
    this.index = index;
    this.keyStart = keyStart;
    this.valueStart = valueStart;
  }

  /** The value's bytes (a `Uint8Array`), or `null` for a tombstone. */
  get value() {
    const length = this.chunk.valueLengths[this.index];
    if (length < 0) return null;
    return this.chunk.values.subarray(this.valueStart, this.valueStart + length);
  }

  /** The key's bytes (a `Uint8Array`), or `null`. */
  get key() {
    const length = this.chunk.keyLengths[this.index];
    if (length < 0) return null;
    return this.chunk.keys.subarray(this.keyStart, this.keyStart + length);
  }

  /** The topic the event comes from. */
  get topic() {
    return this.chunk.topics[this.chunk.topicIndex[this.index]];
  }

  /** The event's Kafka partition. */
  get partition() {
    return this.chunk.partitions[this.index];
  }

  /** The event's offset in its partition (a `BigInt`). */
  get offset() {
    return this.chunk.offsets[this.index];
  }

  /** The Kafka timestamp in milliseconds since the Unix epoch (a `BigInt`), or `null`. */
  get timestamp() {
    const t = this.chunk.timestamps[this.index];
    return t >= 0n ? t : null;
  }

  /** The event's headers: `[{ name, value }]`, `value` a `Uint8Array` or `null`. */
  get headers() {
    return this.chunk.headers
      .filter((h) => h.event === this.index)
      .map((h) => ({ name: h.name, value: h.value ?? null }));
  }

  /** The value as text; throws a `Rejection` for a null value or invalid UTF-8. */
  text() {
    const bytes = this.value;
    if (bytes === null) throw new Rejection(codes.NULL_VALUE, "the event has a null value");
    try {
      return UTF8.decode(bytes);
    } catch {
      throw new Rejection(codes.MALFORMED_JSON, "malformed JSON value: not valid UTF-8");
    }
  }

  /** The value parsed as JSON; throws a `Rejection` when it cannot be. */
  json() {
    const text = this.text();
    try {
      return JSON.parse(text);
    } catch (error) {
      throw new Rejection(codes.MALFORMED_JSON, `malformed JSON value: ${error.message}`);
    }
  }
}

/**
 * The event goes on with the fields of `fields` (an object: field name → any value written as
 * JSON) added to its value, or replacing fields of the same name; the value must be a JSON
 * object. The host applies the patch as it encodes the event: nothing is printed again.
 * An empty patch keeps the event as it is.
 */
export function patch(fields) {
  if (fields === null || typeof fields !== "object" || Array.isArray(fields)) {
    throw new TypeError(`patch takes an object of fields, not ${JSON.stringify(fields)}`);
  }
  const names = Object.keys(fields);
  if (names.length === 0) return KEEP;
  const texts = names.map((name) => {
    const text = JSON.stringify(fields[name]);
    if (text === undefined) throw new TypeError(`patch field ${JSON.stringify(name)} has no JSON value`);
    return text;
  });
  return { action: "patch", names, texts };
}

/** The rejection code of an event whose lookup failed (as the Rust SDK's `LOOKUP_FAILED`). */
export const LOOKUP_FAILED = "lookup_failed";

/** The host's `lookup` import, connected by `processorOf` (or a twin of it, by `judge`). */
let host = null;
/** The answers for the chunk being processed: table → key → answer, from `prefetch`. */
let prefetched = new Map();

/** A key as a map key: its bytes, one character each. */
function keyOf(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 4096) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 4096));
  }
  return s;
}

function keyBytes(key) {
  if (key instanceof Uint8Array) return key;
  return ENCODER.encode(String(key));
}

/** Calls the host; its error (`{ code, table, message }`) becomes a `lookup_failed` rejection. */
function ask(call) {
  if (host === null) throw new Rejection(LOOKUP_FAILED, "lookups are answered only while events are processed");
  try {
    return call(host);
  } catch (error) {
    const e = error?.payload ?? error;
    throw new Rejection(LOOKUP_FAILED, e?.message ?? errorText(error));
  }
}

function parseValue(table, bytes) {
  try {
    return JSON.parse(UTF8.decode(bytes));
  } catch (error) {
    throw new Rejection(LOOKUP_FAILED, `a value of lookup table \`${table}\` is not JSON: ${error.message}`);
  }
}

/** The fields of one key from a `lookup-fields` answer: an object, or `null` for an absent key. */
function fieldsAt(answer, names, k, offsets) {
  if (!answer.found[k]) return null;
  const fields = {};
  for (let n = 0; n < names.length; n++) {
    const at = k * names.length + n;
    const length = answer.lengths[at];
    if (length < 0) continue;
    fields[names[n]] = JSON.parse(UTF8.decode(answer.values.subarray(offsets[at], offsets[at] + length)));
  }
  return fields;
}

/** Where each entry of a `lookup-fields` answer starts in its `values`. */
function offsetsOf(lengths) {
  const offsets = new Array(lengths.length);
  let at = 0;
  for (let i = 0; i < lengths.length; i++) {
    offsets[i] = at;
    at += Math.max(lengths[i], 0);
  }
  return offsets;
}

/**
 * The value of `key` (a string or bytes) in lookup table `table`, parsed from JSON, or `null`
 * when the table has no such key. A failed lookup (a table the stage was not granted, or
 * none of that name) throws a `Rejection` with code `lookup_failed`.
 */
export function lookup(table, key) {
  const bytes = keyBytes(key);
  const answers = prefetched.get(table);
  const id = keyOf(bytes);
  if (answers?.values.has(id)) return answers.values.get(id);
  const value = ask((h) => h.lookup(table, bytes));
  return value === undefined || value === null ? null : parseValue(table, value);
}

/**
 * Fields `names` of the value of `key` in `table`, read by the host (the plugin parses no
 * table JSON): an object with the fields the value has, or `null` when the table has no
 * such key. Errors as for `lookup`.
 */
export function lookupFields(table, key, names) {
  const bytes = keyBytes(key);
  const answers = prefetched.get(table);
  const id = keyOf(bytes);
  if (answers?.fields.has(id) && names.every((n) => answers.names.includes(n))) {
    const all = answers.fields.get(id);
    if (all === null) return null;
    const fields = {};
    for (const n of names) if (n in all) fields[n] = all[n];
    return fields;
  }
  const answer = ask((h) => h.lookupFields(table, names, [bytes]));
  return fieldsAt(answer, names, 0, offsetsOf(answer.lengths));
}

/** What `prefetch` announces for a chunk: per table, the keys for whole values and for fields. */
class Lookups {
  constructor() {
    this.tables = new Map();
  }

  table(name) {
    let t = this.tables.get(name);
    if (t === undefined) {
      t = { values: new Map(), fields: new Map(), names: [] };
      this.tables.set(name, t);
    }
    return t;
  }

  /** Announces a `lookup(table, key)`. */
  want(table, key) {
    const bytes = keyBytes(key);
    this.table(table).values.set(keyOf(bytes), bytes);
  }

  /** Announces a `lookupFields(table, key, names)`. */
  wantFields(table, key, names) {
    const t = this.table(table);
    const bytes = keyBytes(key);
    t.fields.set(keyOf(bytes), bytes);
    for (const n of names) if (!t.names.includes(n)) t.names.push(n);
  }

  /** Asks the host for every announced key, one call per table and kind. */
  answer() {
    const answers = new Map();
    for (const [table, t] of this.tables) {
      const a = { values: new Map(), fields: new Map(), names: t.names };
      answers.set(table, a);
      try {
        this.answerTable(table, t, a);
      } catch (error) {
        if (!(error instanceof Rejection)) throw error;
        // Each event that looks the table up is rejected with the host's reason.
        answers.delete(table);
      }
    }
    return answers;
  }

  answerTable(table, t, a) {
    if (t.values.size > 0) {
      const ids = [...t.values.keys()];
      const values = ask((h) => h.lookupMany(table, [...t.values.values()]));
      ids.forEach((id, k) => {
        const v = values[k];
        a.values.set(id, v === undefined || v === null ? null : parseValue(table, v));
      });
    }
    if (t.fields.size > 0) {
      const ids = [...t.fields.keys()];
      const answer = ask((h) => h.lookupFields(table, t.names, [...t.fields.values()]));
      const offsets = offsetsOf(answer.lengths);
      ids.forEach((id, k) => a.fields.set(id, fieldsAt(answer, t.names, k, offsets)));
    }
  }
}

/** The verdict a plugin's answer stands for (`undefined` keeps the event). */
function verdictOf(answer) {
  if (answer === undefined || answer === null) return KEEP;
  if (answer instanceof Rejection) return answer.verdict;
  switch (answer.action) {
    case "keep":
    case "rewrite":
    case "reject":
    case "patch":
      return answer;
    default:
      throw new TypeError(`process returned ${JSON.stringify(answer)}, not keep(), rewrite(), patch() or reject()`);
  }
}

function errorText(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** The patches of a chunk in the WIT's columnar layout. */
class Patches {
  constructor() {
    this.events = [];
    this.nameLengths = [];
    this.names = "";
    this.valueLengths = [];
    this.values = [];
    this.bytes = 0;
  }

  add(event, verdict) {
    verdict.names.forEach((name, j) => {
      const value = ENCODER.encode(verdict.texts[j]);
      this.events.push(event);
      this.nameLengths.push(ENCODER.encode(name).length);
      this.names += name;
      this.valueLengths.push(value.length);
      this.values.push(value);
      this.bytes += value.length;
    });
  }

  toWit() {
    const values = new Uint8Array(this.bytes);
    let at = 0;
    for (const v of this.values) {
      values.set(v, at);
      at += v.length;
    }
    return {
      events: Uint32Array.from(this.events),
      nameLengths: Uint32Array.from(this.nameLengths),
      names: this.names,
      valueLengths: Uint32Array.from(this.valueLengths),
      values,
    };
  }
}

/** The patches of a chunk without any. */
const NO_PATCHES = Object.freeze({
  events: new Uint32Array(0),
  nameLengths: new Uint32Array(0),
  names: "",
  valueLengths: new Uint32Array(0),
  values: new Uint8Array(0),
});

/** The answers of a chunk whose plugin announced nothing. */
const NO_ANSWERS = new Map();

/** The message of an exception (other than a `Rejection`) that fails a chunk at event `i`. */
function failure(chunk, i, error) {
  return `event ${i} (offset ${chunk.offsets[i]}): ${errorText(error)}`;
}

/**
 * Runs `plugin.prefetch` over the chunk's events and asks the host for what they announce
 * (the answers go to `prefetched`). Returns the verdicts of events rejected in `prefetch`.
 */
function prefetchChunk(plugin, chunk, config) {
  const lookups = new Lookups();
  const rejected = new Map();
  let keyAt = 0;
  let valueAt = 0;
  for (let i = 0; i < chunk.partitions.length; i++) {
    const event = new Event(chunk, i, keyAt, valueAt);
    keyAt += Math.max(chunk.keyLengths[i], 0);
    valueAt += Math.max(chunk.valueLengths[i], 0);
    try {
      plugin.prefetch(event, lookups, config);
    } catch (error) {
      if (!(error instanceof Rejection)) throw failure(chunk, i, error);
      rejected.set(i, error.verdict);
    }
  }
  prefetched = lookups.answer();
  return rejected;
}

/**
 * The WIT `processor` interface for a plugin module `{ process, init?, prefetch? }`, named
 * `name` at version `version` (what `describe` answers); `hostImport` and `lookupImport` are
 * the world's `host` and `lookup` imports.
 */
export function processorOf(plugin, name, version, hostImport, lookupImport = null) {
  hostLog = hostImport.log;
  host = lookupImport;
  if (typeof plugin.process !== "function") {
    throw new TypeError("a sluice plugin module must export a function `process(event, config)`");
  }
  let config;
  let ready = false;
  return {
    describe() {
      return { name, version };
    },

    init(pairs) {
      const params = new Params(pairs);
      try {
        if (typeof plugin.init === "function") {
          config = plugin.init(params);
        } else {
          params.only([]);
        }
      } catch (error) {
        throw errorText(error);
      }
      ready = true;
    },

    process(chunk) {
      if (!ready) throw "process was called before init";
      const n = chunk.partitions.length;
      const actions = new Array(n);
      const rewrites = [];
      const rejections = [];
      let patches = null;
      // Verdicts given in `prefetch` (a thrown `Rejection`): those events skip `process`.
      const early = typeof plugin.prefetch === "function" ? prefetchChunk(plugin, chunk, config) : null;
      try {
        let keyAt = 0;
        let valueAt = 0;
        for (let i = 0; i < n; i++) {
          const event = new Event(chunk, i, keyAt, valueAt);
          keyAt += Math.max(chunk.keyLengths[i], 0);
          valueAt += Math.max(chunk.valueLengths[i], 0);
          let verdict = early === null ? undefined : early.get(i);
          if (verdict === undefined) {
            try {
              verdict = verdictOf(plugin.process(event, config));
            } catch (error) {
              if (!(error instanceof Rejection)) throw failure(chunk, i, error);
              verdict = error.verdict;
            }
          }
          const action = verdict.action;
          actions[i] = action;
          if (action === "rewrite") {
            rewrites.push({ event: i, value: verdict.value });
          } else if (action === "reject") {
            rejections.push({ event: i, code: verdict.code, message: verdict.message, field: verdict.field });
          } else if (action === "patch") {
            if (patches === null) patches = new Patches();
            patches.add(i, verdict);
          }
        }
        if (valueAt > chunk.values.length || keyAt > chunk.keys.length) {
          throw "malformed chunk: values or keys are shorter than their lengths";
        }
      } finally {
        prefetched = NO_ANSWERS;
      }
      return { actions, rewrites, rejections, patches: patches === null ? NO_PATCHES : patches.toWit() };
    },
  };
}

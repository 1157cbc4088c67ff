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
// `build` (next to this file) turns such a module into a WebAssembly component of the
// `event-processor` world of `wit/plugin.wit`: it wraps the module with `processorOf`,
// which implements the WIT `processor` interface over the columnar chunk of events.
//
// This file imports nothing, so a plugin's unit tests run in Node.js as they are:
// `judge(plugin, values, params)` gives the verdicts the component would give.

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

/** The verdict a plugin's answer stands for (`undefined` keeps the event). */
function verdictOf(answer) {
  if (answer === undefined || answer === null) return KEEP;
  if (answer instanceof Rejection) return answer.verdict;
  switch (answer.action) {
    case "keep":
    case "rewrite":
    case "reject":
      return answer;
    default:
      throw new TypeError(`process returned ${JSON.stringify(answer)}, not keep(), rewrite() or reject()`);
  }
}

function errorText(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * The WIT `processor` interface for a plugin module `{ process, init? }`, named `name` at
 * version `version` (what `describe` answers); `host` is the world's `host` import.
 */
export function processorOf(plugin, name, version, host) {
  hostLog = host.log;
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
      let keyAt = 0;
      let valueAt = 0;
      for (let i = 0; i < n; i++) {
        const event = new Event(chunk, i, keyAt, valueAt);
        keyAt += Math.max(chunk.keyLengths[i], 0);
        valueAt += Math.max(chunk.valueLengths[i], 0);
        let verdict;
        try {
          verdict = verdictOf(plugin.process(event, config));
        } catch (error) {
          if (!(error instanceof Rejection)) {
            throw `event ${i} (offset ${chunk.offsets[i]}): ${errorText(error)}`;
          }
          verdict = error.verdict;
        }
        actions[i] = verdict.action;
        if (verdict.action === "rewrite") {
          rewrites.push({ event: i, value: verdict.value });
        } else if (verdict.action === "reject") {
          rejections.push({ event: i, code: verdict.code, message: verdict.message, field: verdict.field });
        }
      }
      if (valueAt > chunk.values.length || keyAt > chunk.keys.length) {
        throw "malformed chunk: values or keys are shorter than their lengths";
      }
      return { actions, rewrites, rejections };
    },
  };
}

/**
 * Judges `values` with a plugin module `{ process, init? }` as its component does, but in
 * Node.js, for unit tests (`node --test`): the same `processorOf`, over a chunk of one
 * event per value. A value is a `Uint8Array`, a string (its UTF-8 text), `null` (a
 * tombstone) or any other value (written as JSON); `params` is an object of the plugin's
 * parameters. Returns one verdict per value: `{ action: "keep" }`, `{ action: "rewrite",
 * value }` (a `Uint8Array`) or `{ action: "reject", code, message, field }`. What fails
 * the component's `init` or a chunk is thrown (a string), and `log` calls go to `logs`.
 */
export function judge(plugin, values, params = {}, logs = []) {
  const processor = processorOf(plugin, "test", "0", {
    log: (level, message) => logs.push({ level, message }),
  });
  processor.init(Object.entries(params).map(([k, v]) => [k, String(v)]));
  const { actions, rewrites, rejections } = processor.process(chunkOf(values));
  const verdicts = actions.map(() => KEEP);
  for (const { event, value } of rewrites) verdicts[event] = { action: "rewrite", value };
  for (const { event, code, message, field } of rejections) {
    verdicts[event] = { action: "reject", code, message, field };
  }
  return verdicts;
}

/** The WIT `event-chunk` of one event per value, on topic `test`, partition 0, from offset 0. */
function chunkOf(values) {
  const encoded = values.map((v) => (v === null ? null : encodeValue(v)));
  const n = values.length;
  const bytes = new Uint8Array(encoded.reduce((sum, b) => sum + (b?.length ?? 0), 0));
  let at = 0;
  for (const b of encoded) {
    if (b === null) continue;
    bytes.set(b, at);
    at += b.length;
  }
  return {
    topics: ["test"],
    topicIndex: new Uint16Array(n),
    partitions: new Int32Array(n),
    offsets: BigInt64Array.from(encoded, (_, i) => BigInt(i)),
    timestamps: new BigInt64Array(n).fill(-1n),
    keyLengths: new Int32Array(n).fill(-1),
    keys: new Uint8Array(0),
    valueLengths: Int32Array.from(encoded, (b) => (b === null ? -1 : b.length)),
    values: bytes,
    headers: [],
  };
}

// `judge`: a plugin module run in Node.js as its component runs it, for unit tests
// (`node --test`). Part of the helper (`sluice.js` exports it); imports nothing but it.

import { keep, processorOf } from "./sluice.js";

const UTF8 = new TextDecoder("utf-8", { fatal: true });
const ENCODER = new TextEncoder();

/**
 * Judges `values` with a plugin module `{ process, init?, prefetch? }` as its component
 * does, but in Node.js, for unit tests (`node --test`): the same `processorOf`, over a chunk
 * of one event per value. A value is a `Uint8Array`, a string (its UTF-8 text), `null` (a
 * tombstone) or any other value (written as JSON); `params` is an object of the plugin's
 * parameters; `tables` the lookup tables, `{ table: { key: value } }`. Returns one verdict
 * per value: `{ action: "keep" }`, `{ action: "rewrite", value }` (a `Uint8Array`),
 * `{ action: "patch", fields }` (the fields parsed back from JSON) or `{ action: "reject",
 * code, message, field }`. What fails the component's `init` or a chunk is thrown (a
 * string), and `log` calls go to `logs`.
 */
export function judge(plugin, values, params = {}, logs = [], tables = {}) {
  const processor = processorOf(
    plugin,
    "test",
    "0",
    { log: (level, message) => logs.push({ level, message }) },
    lookupTwin(tables),
  );
  processor.init(Object.entries(params).map(([k, v]) => [k, String(v)]));
  const { actions, rewrites, rejections, patches } = processor.process(chunkOf(values));
  const verdicts = actions.map(() => keep());
  for (const { event, value } of rewrites) verdicts[event] = { action: "rewrite", value };
  for (const { event, code, message, field } of rejections) {
    verdicts[event] = { action: "reject", code, message, field };
  }
  let nameAt = 0;
  let valueAt = 0;
  const names = ENCODER.encode(patches.names);
  patches.events.forEach((event, j) => {
    const name = UTF8.decode(names.subarray(nameAt, nameAt + patches.nameLengths[j]));
    const text = UTF8.decode(patches.values.subarray(valueAt, valueAt + patches.valueLengths[j]));
    nameAt += patches.nameLengths[j];
    valueAt += patches.valueLengths[j];
    if (verdicts[event].action !== "patch") verdicts[event] = { action: "patch", fields: {} };
    verdicts[event].fields[name] = JSON.parse(text);
  });
  return verdicts;
}

/**
 * The host's `lookup` import over `tables` (`{ table: { key: value } }`, each value any
 * JSON value), for `judge`: a table not in `tables` fails as an unknown one does.
 */
function lookupTwin(tables) {
  const valueOf = (table, key) => {
    if (!Object.hasOwn(tables, table)) {
      const message = `no lookup table \`${table}\` in this test`;
      throw Object.assign(new Error(message), { payload: { code: "unknown_table", table, message } });
    }
    const id = UTF8.decode(key);
    return Object.hasOwn(tables[table], id) ? tables[table][id] : undefined;
  };
  const twin = {
    lookup: (table, key) => {
      const value = valueOf(table, key);
      return value === undefined ? undefined : ENCODER.encode(JSON.stringify(value));
    },
    lookupMany: (table, keys) => keys.map((key) => twin.lookup(table, key)),
    lookupFields: (table, names, keys) => {
      const found = [];
      const lengths = [];
      const texts = [];
      for (const key of keys) {
        const value = valueOf(table, key);
        found.push(value !== undefined);
        for (const name of names) {
          const has = value !== undefined && value !== null && Object.hasOwn(value, name);
          const text = has ? ENCODER.encode(JSON.stringify(value[name])) : new Uint8Array(0);
          lengths.push(has ? text.length : -1);
          texts.push(text);
        }
      }
      const values = new Uint8Array(texts.reduce((sum, t) => sum + t.length, 0));
      let at = 0;
      for (const t of texts) {
        values.set(t, at);
        at += t.length;
      }
      return { found, lengths: Int32Array.from(lengths), values };
    },
  };
  return twin;
}

/** The WIT `event-chunk` of one event per value, on topic `test`, partition 0, from offset 0. */
function chunkOf(values) {
  const encoded = values.map((v) => (v === null ? null : bytesOf(v)));
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

/** A value's bytes: bytes as they are, a string's UTF-8 text, anything else as JSON. */
function bytesOf(value) {
  if (value instanceof Uint8Array) return value;
  if (typeof value === "string") return ENCODER.encode(value);
  return ENCODER.encode(JSON.stringify(value));
}

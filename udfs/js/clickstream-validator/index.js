// Validates retail clickstream events: the rules of the Rust plugin in
// `udfs/clickstream-validator`, with the same codes, fields and parameter, in JavaScript.
//
// Rules, checked in this order; the first violation rejects the event:
// 1. the value is a JSON object whose known fields have the right JSON types
//    (`malformed_json`, `invalid_field_type`; unknown fields are ignored);
// 2. the required fields are present (`missing_required_field`) and not blank
//    (`blank_required_field`);
// 3. `event_time` is an RFC 3339 timestamp (`invalid_event_time`);
// 4. `event_type` is one of the allowed types (`invalid_event_type`);
// 5. the fields an event type needs are present and not blank (`missing_event_type_field`);
// 6. `quantity`, when present, is a JSON integer from 1 to 2147483647 (`invalid_quantity`);
// 7. `price`, when present, is a number (or numeric string) ≥ 0 with at most two decimals
//    that fits DECIMAL(10,2) (`invalid_price`).
//
// Parameter `allowed-event-types`: a comma-separated list replacing the default event types.
//
// One difference with the Rust plugin: JSON.parse gives numbers, not their text, so a
// `quantity` written `2.0` is the integer 2 here (Rust refuses it), and a `price` is judged
// by its shortest JavaScript spelling (`0.10000000000000001` is `0.1`).

import { codes, keep, reject } from "../sluice.js";

/** The event types accepted when `allowed-event-types` is not given. */
export const DEFAULT_EVENT_TYPES = [
  "page_view",
  "search",
  "product_view",
  "add_to_cart",
  "remove_from_cart",
  "checkout_start",
  "purchase",
];

const REQUIRED = [
  "event_id",
  "event_time",
  "user_id",
  "session_id",
  "event_type",
  "page_url",
  "device_type",
  "browser",
  "traffic_source",
];

/** Fields that must be strings (or null) when present. */
const STRING_FIELDS = new Set([
  ...REQUIRED,
  "search_query",
  "product_id",
  "cart_id",
  "order_id",
  "referrer_url",
  "product_name",
  "category",
]);

const FIELDS_NEEDED_BY = {
  search: ["search_query"],
  product_view: ["product_id"],
  add_to_cart: ["product_id", "cart_id", "quantity"],
  remove_from_cart: ["product_id", "cart_id", "quantity"],
  checkout_start: ["cart_id"],
  purchase: ["order_id"],
};

const INT32_MAX = 2147483647;
/** Largest number of integer digits, and of decimals, of a DECIMAL(10,2). */
const PRICE_INTEGER_DIGITS = 8;
const PRICE_SCALE = 2;

export function init(params) {
  params.only(["allowed-event-types"]);
  const types = params.list("allowed-event-types");
  if (types !== undefined && types.length === 0) {
    throw "parameter `allowed-event-types` lists no event type";
  }
  return { eventTypes: new Set(types ?? DEFAULT_EVENT_TYPES), allowed: (types ?? DEFAULT_EVENT_TYPES).join(", ") };
}

export function process(event, config) {
  const value = event.value;
  if (value !== null) {
    const first = value.find((b) => !isAsciiWhitespace(b));
    if (first !== undefined && first !== 0x7b /* { */) {
      return reject(codes.MALFORMED_JSON, "the value is not a JSON object");
    }
  }
  const click = event.json();

  for (const [name, v] of Object.entries(click)) {
    if (STRING_FIELDS.has(name) && v !== null && typeof v !== "string") {
      return reject(codes.INVALID_FIELD_TYPE, `${name}: expected a string, found ${describe(v)}`, name);
    }
  }

  for (const name of REQUIRED) {
    const v = click[name];
    if (v === undefined || v === null) {
      return reject("missing_required_field", `${name} is required`, name);
    }
    if (isBlank(v)) {
      return reject("blank_required_field", `${name} must not be blank`, name);
    }
  }

  if (!isRfc3339(click.event_time)) {
    return reject(
      "invalid_event_time",
      `event_time ${JSON.stringify(click.event_time)} is not an RFC 3339 timestamp`,
      "event_time",
    );
  }

  const eventType = click.event_type;
  if (!config.eventTypes.has(eventType)) {
    return reject(
      "invalid_event_type",
      `event_type ${JSON.stringify(eventType)} is not one of ${config.allowed}`,
      "event_type",
    );
  }

  for (const name of FIELDS_NEEDED_BY[eventType] ?? []) {
    const v = click[name];
    const present = name === "quantity" ? v !== undefined && v !== null : typeof v === "string" && !isBlank(v);
    if (!present) {
      return reject("missing_event_type_field", `${eventType} events need a non-blank ${name}`, name);
    }
  }

  if (click.quantity !== undefined && click.quantity !== null) {
    const why = quantityProblem(click.quantity);
    if (why) return reject("invalid_quantity", `quantity ${JSON.stringify(click.quantity)} ${why}`, "quantity");
  }
  if (click.price !== undefined && click.price !== null) {
    const why = priceProblem(click.price);
    if (why) return reject("invalid_price", `price ${JSON.stringify(click.price)} ${why}`, "price");
  }
  return keep();
}

function describe(v) {
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

function isAsciiWhitespace(b) {
  return b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0c || b === 0x0d;
}

/** Empty or only white space (Unicode's White_Space, as Rust's `str::trim`). */
const BLANK = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$/;
const EDGE_SPACE = /^[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+|[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/g;

function isBlank(s) {
  return BLANK.test(s);
}

function quantityProblem(q) {
  if (typeof q === "string") return "must be a JSON integer, not a string";
  if (typeof q !== "number" || !Number.isInteger(q)) return "must be an integer";
  if (q < 1) return "must be at least 1";
  if (q > INT32_MAX) return "does not fit a 32-bit integer";
  return null;
}

function priceProblem(p) {
  let text;
  if (typeof p === "string") text = p.replace(EDGE_SPACE, "");
  else if (typeof p === "number") text = String(p);
  else return "is not a number";
  const d = parseDecimal(text);
  if (d === null) return "is not a number";
  if (d.negative && d.significant !== 0) return "must not be negative";
  if (d.scale > PRICE_SCALE) return "has more than two decimals";
  if (Math.max(d.significant - d.scale, 0) > PRICE_INTEGER_DIGITS) return "does not fit DECIMAL(10,2)";
  return null;
}

/**
 * JSON number syntax (leading zeros tolerated, as in numeric strings) as a count of
 * significant digits and a scale: value = digits × 10^-scale. `null` when not a number.
 */
function parseDecimal(text) {
  const m = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/.exec(text);
  if (m === null) return null;
  const [, sign, int, frac = "", exp = "0"] = m;
  const exponent = Number(exp);
  if (Math.abs(exponent) > 1000) return null;
  const digits = (int + frac).replace(/^0+/, "");
  const significant = digits.replace(/0+$/, "");
  if (significant === "") return { negative: sign === "-", significant: 0, scale: 0 };
  const trailing = digits.length - significant.length;
  return { negative: sign === "-", significant: significant.length, scale: frac.length - exponent - trailing };
}

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

/** An RFC 3339 date-time with a real calendar date; no leap seconds. */
export function isRfc3339(s) {
  const m = RFC3339.exec(s);
  if (m === null) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 59) return false;
  if (m[7] !== undefined && (Number(m[7]) > 23 || Number(m[8]) > 59)) return false;
  return true;
}

function daysInMonth(year, month) {
  if ([4, 6, 9, 11].includes(month)) return 30;
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return 31;
}

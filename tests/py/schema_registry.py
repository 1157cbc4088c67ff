#!/usr/bin/env python3
"""A stand-in for the Confluent Schema Registry, for the integration tests.

No Confluent-API schema registry can be installed from the package registries the tests
reach (PyPI, npm, crates.io, Debian), so this small in-memory server takes its place. It
keeps to Confluent's documented REST API
(https://docs.confluent.io/platform/current/schema-registry/develop/api.html) for the calls
below, answering as Karapace 3.16.0, a real Confluent-API registry, was recorded answering.
Python standard library only.

    schema_registry.py --port PORT [--user USER:PASSWORD] [--token TOKEN]
                       [--cert CERT.pem --key KEY.pem] [--delay-ms N] [--fail-first N]
                       [--fail-id-lookups N]

Binds 127.0.0.1:PORT (0 picks a free port), prints `listening on http(s)://127.0.0.1:PORT`
(flushed) and serves until killed (SIGTERM/SIGINT stop it cleanly), logging each request to
stderr as `METHOD PATH -> STATUS`, never its headers. With --user and/or --token every request
needs `Authorization: Basic` with those credentials or `Bearer TOKEN`, else 401. --cert/--key
serve HTTPS. --delay-ms sleeps before each answer; --fail-first N answers the first N requests
with 500 (an outage that heals: the client retries 5xx); --fail-id-lookups N does so to the
first N `GET /schemas/ids/…` only (what a consumer asks; a producer's registration passes).

    POST /subjects/{s}/versions      {"schema", "schemaType"?, "references"?} -> {"id"}
    POST /subjects/{s}               is it registered under s? -> {"subject","id","version","schema"}
    GET  /schemas/ids/{id}           {"schema", "schemaType" unless AVRO, "references" if any}
    GET  /schemas/ids/{id}/versions  [{"subject", "version"}]    (/subjects: [subject])
    GET  /schemas/types              ["JSON", "PROTOBUF", "AVRO"]
    GET  /subjects                   [subject]
    GET  /subjects/{s}/versions      [1, 2, ...]
    GET  /subjects/{s}/versions/{v|latest|-1}          {"subject","id","version","schema",...}
    GET  /subjects/{s}/versions/{v}/schema             the schema text itself
    GET/PUT /config, /config/{s}     {"compatibilityLevel"} / {"compatibility"}

Bodies are `application/vnd.schemaregistry.v1+json`; errors {"error_code", "message"}: 401
unauthorized, 404 unknown path (the client's /associations query then falls back to the
topic-name strategy, as with Karapace), 40401 subject, 40402 version, 40403 schema not found,
40408 no subject-level config, 42201 invalid schema, 42202 invalid version, 42203 invalid
compatibility level, 50001 the outage of --fail-first.

Schemas: schemaType AVRO (default), PROTOBUF or JSON. Ids are global, from 1: the same schema
(type, canonical form, references) gets the same id under every subject, and registering it
again under a subject adds no version. Avro must be valid (JSON, type shapes, every named type
defined, here or in a referenced schema) and is served canonical as Karapace serves it:
compact JSON, keys sorted. JSON Schema must be JSON. Protobuf comes as .proto text (kept and
served as is, not parsed) or, as confluent-kafka's ProtobufSerializer sends it, as a base64
FileDescriptorProto, served as .proto text as Confluent and Karapace do (fully qualified type
names; nested types in the descriptor's order, so that message indexes agree), or base64 as
it came with `format=serialized` (what the client's deserializer asks for). The rendering
covers proto2/proto3 messages, nested types, enums, maps, oneofs, imports and the options
`default` and `packed`; no other options, services or extensions.

Not implemented: compatibility. The level is stored (default BACKWARD) and served, but not
enforced (no 409), and there is no /compatibility endpoint. Nor DELETE, modes, contexts, rules.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import re
import signal
import ssl
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

TYPES = ["JSON", "PROTOBUF", "AVRO"]
LEVELS = {"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"}
AVRO_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class ApiError(Exception):
    """An error answered as {"error_code", "message"} with an HTTP status."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def invalid(message: str) -> ApiError:
    return ApiError(422, 42201, f"Invalid schema: {message}")


def avro_names(node: Any, names: set[str], namespace: str = "") -> None:
    """Checks an Avro schema, adding the full names that it defines to `names`; a named type
    must be in `names` (defined before, or by a referenced schema) where it is used."""
    if isinstance(node, str):
        if node not in AVRO_PRIMITIVES and node not in names and f"{namespace}.{node}" not in names:
            raise invalid(f"unknown type {node!r}")
    elif isinstance(node, list):
        if not node or any(isinstance(branch, list) for branch in node):
            raise invalid("a union must be a non-empty list without nested unions")
        for branch in node:
            avro_names(branch, names, namespace)
    elif not isinstance(node, dict) or "type" not in node:
        raise invalid(f"not an Avro schema: {json.dumps(node)[:80]}")
    elif node["type"] in ("record", "error", "enum", "fixed"):
        kind, name = node["type"], node.get("name")
        if not isinstance(name, str) or not name:
            raise invalid(f"a {kind} needs a name")
        namespace = name.rpartition(".")[0] if "." in name else node.get("namespace", namespace) or ""
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        if full in names:
            raise invalid(f"{full!r} is defined twice")
        names.add(full)
        symbols, fields = node.get("symbols"), node.get("fields")
        if kind == "enum" and not (isinstance(symbols, list) and all(isinstance(s, str) for s in symbols)):
            raise invalid(f"enum {full!r} needs a list of string symbols")
        if kind == "fixed" and not isinstance(node.get("size"), int):
            raise invalid(f"fixed {full!r} needs an integer size")
        if kind in ("record", "error"):
            if not isinstance(fields, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str)
                                                       and "type" in f for f in fields):
                raise invalid(f"record {full!r} needs a list of fields with a name and a type")
            for field in fields:
                avro_names(field["type"], names, namespace)
    elif node["type"] in ("array", "map"):
        avro_names(node.get("items" if node["type"] == "array" else "values"), names, namespace)
    else:  # a primitive with attributes (a logical type, say), a named type, a nested schema
        avro_names(node["type"], names, namespace)


# --- A FileDescriptorProto as .proto text ----------------------------------------------------

SCALARS = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
           9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64"}
Fields = dict[int, list[Any]]


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]  # IndexError when truncated
        result, shift, pos = result | (byte & 0x7F) << shift, shift + 7, pos + 1
        if not byte & 0x80:
            return result, pos


def fields_of(buf: bytes) -> Fields:
    """A protobuf message's fields by number: varints as ints, everything else as bytes."""
    fields: Fields = {}
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        wire = key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire in (1, 2, 5):
            size, pos = varint(buf, pos) if wire == 2 else (8 if wire == 1 else 4, pos)
            value, pos = buf[pos:pos + size], pos + size
            if pos > len(buf):
                raise ValueError("truncated field")
        else:
            raise ValueError(f"unexpected wire type {wire}")
        fields.setdefault(key >> 3, []).append(value)
    return fields


def text(fields: Fields, number: int, default: str = "") -> str:
    return fields[number][-1].decode("utf-8") if number in fields else default


def last(fields: Fields, number: int, default: Any = 0) -> Any:
    return fields[number][-1] if number in fields else default


def render_enum(enum: Fields, indent: str) -> list[str]:
    lines = [f"{indent}enum {text(enum, 1)} {{"]
    for value in map(fields_of, enum.get(2, [])):
        number = last(value, 2)  # an int32: a negative one comes as a 64-bit two's complement
        lines.append(f"{indent}  {text(value, 1)} = {number - (1 << 64) if number >> 63 else number};")
    return lines + [f"{indent}}}"]


def field_type(field: Fields) -> str:
    return SCALARS.get(last(field, 5)) or text(field, 6)


def field_line(field: Fields, maps: dict[str, str], proto2: bool) -> str:
    kind, label = field_type(field), last(field, 4, 1)
    if kind in maps:
        kind = maps[kind]
    elif last(field, 17) or (proto2 and label == 1):  # proto3 `optional`, or proto2's
        kind = f"optional {kind}"
    elif label != 1:
        kind = f"{'required' if label == 2 else 'repeated'} {kind}"
    options = []  # the two that change what is on the wire
    if 7 in field:
        quoted = {9: json.dumps(text(field, 7), ensure_ascii=False), 12: f'"{text(field, 7)}"'}  # bytes: C-escaped
        options.append(f"default = {quoted.get(last(field, 5), text(field, 7))}")
    if 2 in (packed := fields_of(last(field, 8, b""))):
        options.append(f"packed = {'true' if last(packed, 2) else 'false'}")
    return f"{kind} {text(field, 1)} = {last(field, 3)}{' [' + ', '.join(options) + ']' if options else ''};"


def render_message(message: Fields, scope: str, proto2: bool, indent: str) -> list[str]:
    """The .proto text of a DescriptorProto whose full name is `scope`. Its nested messages
    keep the descriptor's order, map entries included (protoc adds a map field's entry type
    where the field is), so that the text compiles to the same message indexes."""
    nested = [fields_of(n) for n in message.get(3, [])]
    maps = {}  # the map entry types' full names -> "map<K, V>"
    for entry in nested:
        if last(fields_of(last(entry, 7, b"")), 7):  # MessageOptions.map_entry
            key, value = (fields_of(f) for f in entry[2])
            maps[f".{scope}.{text(entry, 1)}"] = f"map<{field_type(key)}, {field_type(value)}>"
    oneofs = [text(fields_of(o), 1) for o in message.get(8, [])]
    fields = [fields_of(f) for f in message.get(2, [])]
    lines, done_oneofs = [f"{indent}message {text(message, 1)} {{"], set()

    def block(more: list[str]) -> None:  # a nested definition, set apart by blank lines
        lines.extend(([""] if lines[-1] and len(lines) > 1 else []) + more + [""])

    def fields_until(end: int) -> None:
        for field in fields[:end]:
            oneof = last(field, 9, None) if not last(field, 17) else None
            if oneof is None:
                lines.append(f"{indent}  {field_line(field, maps, proto2)}")
            elif oneof not in done_oneofs:
                done_oneofs.add(oneof)
                lines.append(f"{indent}  oneof {oneofs[oneof]} {{")
                lines.extend(f"{indent}    {field_line(f, maps, False)}" for f in fields if f.get(9) == [oneof])
                lines.append(f"{indent}  }}")
        del fields[:end]

    for enum in map(fields_of, message.get(4, [])):
        block(render_enum(enum, indent + "  "))
    for entry in nested:
        full = f".{scope}.{text(entry, 1)}"
        if full in maps:
            fields_until(next(i for i, f in enumerate(fields) if text(f, 6) == full) + 1)
        else:
            block(render_message(entry, full[1:], proto2, indent + "  "))
    fields_until(len(fields))
    while lines[-1] == "":
        lines.pop()
    return lines + [f"{indent}}}"]


def render_proto(descriptor: bytes) -> str:
    """The .proto text of a serialized FileDescriptorProto."""
    file = fields_of(descriptor)
    syntax, package = text(file, 12, "proto2"), text(file, 2)
    if syntax not in ("proto2", "proto3"):
        raise invalid(f"syntax {syntax!r} is not supported by this stand-in")
    lines = [f'syntax = "{syntax}";'] + ([f"package {package};"] if package else [])
    if 3 in file:
        lines += [""] + [f'import "{dependency.decode()}";' for dependency in file[3]]
    for message in map(fields_of, file.get(4, [])):
        scope = f"{package}.{text(message, 1)}" if package else text(message, 1)
        lines += [""] + render_message(message, scope, syntax == "proto2", "")
    for enum in map(fields_of, file.get(5, [])):
        lines += [""] + render_enum(enum, "")
    return "\n".join(lines) + "\n"


# --- The registry ----------------------------------------------------------------------------


class Registry:
    """Schemas, subjects and the compatibility config, in memory; one request at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.schemas: list[dict[str, Any]] = []  # id - 1 -> what parse() made of it
        self.ids: dict[str, int] = {}  # parse()'s "key" -> id
        self.subjects: dict[str, list[int]] = {}  # subject -> the ids of its versions 1, 2, ...
        self.config: dict[str | None, str] = {None: "BACKWARD"}  # None: the global level

    def parse(self, body: Any) -> dict[str, Any]:
        """A registration or lookup body, checked, as a schema (not stored)."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise invalid('the body needs a string "schema"')
        kind, raw, references = body.get("schemaType") or "AVRO", body["schema"], body.get("references") or []
        if kind not in TYPES:
            raise invalid(f"unknown schemaType {kind}")
        # The named types of the referenced schemas (and of theirs) are known to this one.
        names = set().union(*(schema["names"] for schema in self.resolve(references)))
        canonical, serialized = raw, None
        if kind in ("AVRO", "JSON"):
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError as e:
                raise invalid(f"not JSON: {e}") from None
            if kind == "AVRO":
                avro_names(parsed, names)
            canonical = json.dumps(parsed, sort_keys=True, separators=(",", ":"))
        elif not re.search(r"\s", raw):  # base64 has no whitespace; .proto text always has some
            try:
                canonical, serialized = render_proto(base64.b64decode(raw, validate=True)), raw
            except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, IndexError) as e:
                raise invalid(f"neither .proto text nor a base64 FileDescriptorProto ({e})") from None
        return {"type": kind, "canonical": canonical, "serialized": serialized, "references": references,
                "names": names, "key": json.dumps([kind, canonical, references], sort_keys=True)}

    def resolve(self, references: Any) -> list[dict[str, Any]]:
        """The schemas that {"name", "subject", "version"} references name (-1: the latest)."""
        schemas = []
        for ref in references if isinstance(references, list) else [references]:
            ids = self.subjects.get(ref.get("subject"), []) if isinstance(ref, dict) else []
            version = ref.get("version", -1) if isinstance(ref, dict) else None
            if not ids or not isinstance(version, int) or not -1 <= version <= len(ids) or version == 0:
                raise invalid(f"reference {ref!r} is not a registered subject version")
            schemas.append(self.schemas[ids[version - 1 if version > 0 else -1] - 1])
        return schemas

    def register(self, subject: str, body: Any) -> dict[str, Any]:
        schema = self.parse(body)
        if schema["key"] not in self.ids:
            self.schemas.append(schema)
            self.ids[schema["key"]] = len(self.schemas)
        schema_id = self.ids[schema["key"]]
        versions = self.subjects.setdefault(subject, [])
        if schema_id not in versions:
            versions.append(schema_id)
        return {"id": schema_id}

    def versions(self, subject: str) -> list[int]:
        if subject not in self.subjects:
            raise ApiError(404, 40401, f"Subject '{subject}' not found.")
        return self.subjects[subject]

    def schema(self, schema_id: str) -> dict[str, Any]:
        if not schema_id.isdigit() or not 1 <= int(schema_id) <= len(self.schemas):
            raise ApiError(404, 40403, "Schema not found")
        return self.schemas[int(schema_id) - 1]

    def schema_body(self, schema: dict[str, Any], fmt: str | None) -> dict[str, Any]:
        """{"schema", "schemaType" unless AVRO, "references" if any}; "schema" is the base64
        descriptor for format=serialized if it came so, else the canonical text."""
        serialized = fmt == "serialized" and schema["serialized"]
        body: dict[str, Any] = {"schema": schema["serialized"] if serialized else schema["canonical"]}
        if schema["type"] != "AVRO":
            body["schemaType"] = schema["type"]
        if schema["references"]:
            body["references"] = schema["references"]
        return body

    def version_body(self, subject: str, version: str, fmt: str | None) -> dict[str, Any]:
        versions = self.versions(subject)
        if not re.fullmatch(r"latest|-1|\d+", version):
            raise ApiError(422, 42202, "The specified version is not a valid version id.")
        number = len(versions) if version in ("latest", "-1") else int(version)
        if not 1 <= number <= len(versions):
            raise ApiError(404, 40402, f"Version {version} not found.")
        schema_id = versions[number - 1]
        body = self.schema_body(self.schemas[schema_id - 1], fmt)
        return {"subject": subject, "version": number, "id": schema_id} | body

    def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        level = body.get("compatibility") if isinstance(body, dict) else None
        if level not in LEVELS:
            raise ApiError(422, 42203, f"Invalid compatibility level {level!r}")
        self.config[subject] = level
        return {"compatibility": level}

    def get_config(self, subject: str | None, default_to_global: bool) -> dict[str, Any]:
        if subject not in self.config and not default_to_global:
            raise ApiError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
        return {"compatibilityLevel": self.config.get(subject, self.config[None])}

    def handle(self, method: str, path: list[str], query: dict[str, str], body: Any) -> Any:
        """The answer to one request (the body to send with 200), or ApiError."""
        fmt = query.get("format")
        with self.lock:
            match method, path:
                case "GET", ["schemas", "types"]:
                    return TYPES
                case "GET", ["schemas", "ids", schema_id]:
                    return self.schema_body(self.schema(schema_id), fmt)
                case "GET", ["schemas", "ids", schema_id, "versions" | "subjects" as what]:
                    self.schema(schema_id)  # 40403 if unknown
                    found = [{"subject": s, "version": v + 1} for s, ids in self.subjects.items()
                             for v, i in enumerate(ids) if i == int(schema_id)]
                    return found if what == "versions" else [f["subject"] for f in found]
                case "GET", ["subjects"]:
                    return list(self.subjects)
                case "POST", ["subjects", subject, "versions"]:
                    return self.register(subject, body)
                case "POST", ["subjects", subject]:
                    versions, schema_id = self.versions(subject), self.ids.get(self.parse(body)["key"])
                    if schema_id not in versions:
                        raise ApiError(404, 40403, "Schema not found")
                    return self.version_body(subject, str(versions.index(schema_id) + 1), None)
                case "GET", ["subjects", subject, "versions"]:
                    return list(range(1, len(self.versions(subject)) + 1))
                case "GET", ["subjects", subject, "versions", version]:
                    return self.version_body(subject, version, fmt)
                case "GET", ["subjects", subject, "versions", version, "schema"]:
                    return RawText(self.version_body(subject, version, fmt)["schema"])
                case "GET", ["config"] | ["config", _]:
                    subject = path[1] if len(path) > 1 else None
                    return self.get_config(subject, subject is None or query.get("defaultToGlobal") == "true")
                case "PUT", ["config"] | ["config", _]:
                    return self.set_config(path[1] if len(path) > 1 else None, body)
        raise ApiError(404, 404, "HTTP 404 Not Found")


class RawText(str):
    """An answer sent as it is, not as JSON (GET .../versions/{v}/schema)."""


class Handler(BaseHTTPRequestHandler):
    """HTTP: auth, --delay-ms, --fail-first, JSON bodies, the log line."""

    protocol_version = "HTTP/1.1"
    registry: Registry
    credentials: set[str]  # accepted Authorization header values; empty: no auth
    delay: float
    failures: list[int]  # [requests still to fail, id lookups still to fail]
    failures_lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # answer() logs one line per request, without headers

    def answer(self, status: int, payload: Any) -> None:
        data = (payload if isinstance(payload, RawText) else json.dumps(payload)).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="SchemaRegistry"')
        self.end_headers()
        self.wfile.write(data)
        sys.stderr.write(f"[schema_registry] {self.command} {self.path} -> {status}\n")

    def dispatch(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        time.sleep(self.delay)
        lookup = self.command == "GET" and self.path.startswith("/schemas/ids/")
        with self.failures_lock:
            fail = self.failures[0] > 0
            self.failures[0] -= fail
            if lookup and not fail and self.failures[1] > 0:
                fail = True
                self.failures[1] -= 1
        try:
            if fail:
                raise ApiError(500, 50001, "Error in the backend data store (--fail-first)")
            if self.credentials and self.headers.get("Authorization") not in self.credentials:
                raise ApiError(401, 401, "Unauthorized")
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                body = json.loads(raw) if raw.strip() else None
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise ApiError(400, 400, f"Malformed JSON: {e}") from None
            path = [unquote(s) for s in url.path.split("/") if s]
            self.answer(200, self.registry.handle(self.command, path, query, body))
        except ApiError as e:
            self.answer(e.status, {"error_code": e.code, "message": e.message})
        except Exception as e:  # noqa: BLE001 (a bug here: answered as an internal error)
            traceback.print_exc(file=sys.stderr)
            self.answer(500, {"error_code": 500, "message": f"{type(e).__name__}: {e}"})

    do_GET = do_POST = do_PUT = do_DELETE = dispatch


def main() -> None:
    parser = argparse.ArgumentParser(description="In-memory stand-in for the Confluent Schema Registry")
    parser.add_argument("--port", type=int, required=True, help="port on 127.0.0.1 (0 picks a free one)")
    parser.add_argument("--user", help="USER:PASSWORD that HTTP basic auth must present")
    parser.add_argument("--token", help="a bearer token that is accepted")
    parser.add_argument("--cert", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--key", help="the certificate's private key (PEM)")
    parser.add_argument("--delay-ms", type=int, default=0, help="sleep this long before each answer")
    parser.add_argument("--fail-first", type=int, default=0, help="answer the first N requests with 500")
    parser.add_argument("--fail-id-lookups", type=int, default=0,
                        help="answer the first N GET /schemas/ids/... requests with 500")
    args = parser.parse_args()
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")

    credentials = set()
    if args.user:
        credentials.add("Basic " + base64.b64encode(args.user.encode("utf-8")).decode("ascii"))
    if args.token:
        credentials.add(f"Bearer {args.token}")
    handler = type("BoundHandler", (Handler,), {"registry": Registry(), "credentials": credentials,
                                                "delay": args.delay_ms / 1000, "failures": [args.fail_first, args.fail_id_lookups]})
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    server.daemon_threads = True
    scheme = "http"
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"

    def stop(_signum: int, _frame: Any) -> None:
        # shutdown() waits for serve_forever(), so it must run on another thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"listening on {scheme}://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()

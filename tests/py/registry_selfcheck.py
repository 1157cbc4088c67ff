#!/usr/bin/env python3
"""Self-check of schema_registry.py and produce_registry.py, by hand (CI does not run it):

    "$(tests/py/setup-registry-venv | tail -n 1)" tests/py/registry_selfcheck.py BOOTSTRAP

BOOTSTRAP is a running Kafka broker (tansu 0.6 as tests/src/broker.rs starts it). Starts the
stand-in registry itself (--port 0, subprocesses), then:
  * auth: no, wrong and right credentials (401 {"error_code": 401}); the client without
    credentials gets SchemaRegistryError 401;
  * produces Avro records (string, long, timestamp-micros/-millis, decimal bytes, nullable
    unions, array, map, nested record with a date, enum, uuid) and Protobuf records (string,
    int64, nested message, repeated string, google.protobuf.Timestamp, enum, map, oneof, a
    message of an imported money.proto, which the serializer registers as a reference; and
    one record of the nested message) with produce_registry.py, i.e. confluent-kafka's
    serializers;
  * reads the records back raw and checks the framing: 0x00, the subject's schema id
    big-endian, for Protobuf the message indexes ([0] as 00, [0, 0] as 04 00 00);
  * decodes them with AvroDeserializer / ProtobufDeserializer through the registry (the
    Protobuf class is built from the descriptor the registry serves, not from the .proto) and
    compares with what was produced;
  * compiles the .proto texts the registry serves for the Protobuf schema and its reference
    with protoc and compares the result with the descriptors that the serializer registered;
  * the REST API: ids, versions, lookups, canonical Avro, config, error codes;
  * --fail-first and --delay-ms (an outage the client rides out), HTTPS with --cert/--key
    and a bearer --token.
Prints "N passed, 0 failed" and exits 0 when every check passes, 1 otherwise; the temporary
directory (schemas, registry logs) is kept, and named, when a check fails.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
import uuid
from typing import Any

import grpc_tools
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = uuid.uuid4().hex[:8]  # in the topic names, so that a rerun on the same broker reads its own records
USER = "sluice:secret"
UTC = dt.timezone.utc

AVRO_SCHEMA = {"type": "record", "name": "Payment", "namespace": "sluice.check", "fields": [
    {"name": "id", "type": "string"},
    {"name": "count", "type": "long"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"},
        {"name": "since", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None}]}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "seen", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None}]}
REFS = [str(uuid.UUID(int=i + 1)) for i in range(3)]
AVRO_IN = [
    {"id": "p0", "count": 10**12, "at": "2026-01-02T03:04:05.678901Z", "amount": "1234.50", "note": "n0",
     "tags": [], "attrs": {"a": 0}, "customer": {"name": "c0", "since": "2020-02-29"}, "status": "NEW",
     "ref": REFS[0], "seen": 1767323045678},
    {"id": "p1", "count": -1, "at": "2026-01-02T03:04:05", "amount": "-0.01", "note": None,
     "tags": ["x"], "attrs": {}, "customer": {"name": "c1", "since": None}, "status": "PAID",
     "ref": REFS[1], "seen": None},
    {"id": "p2", "count": 2, "at": 1767323045678901, "amount": 99999999.99, "tags": ["x", "y"],
     "attrs": {"a": 1, "b": -2}, "customer": {"name": "c2"}, "status": "PAID", "ref": REFS[2],
     "seen": "2026-01-02T03:04:05.678+00:00"}]
AT = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
SEEN = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
AVRO_OUT = [  # what AvroDeserializer must give back
    {"id": "p0", "count": 10**12, "at": AT, "amount": decimal.Decimal("1234.50"), "note": "n0", "tags": [],
     "attrs": {"a": 0}, "customer": {"name": "c0", "since": dt.date(2020, 2, 29)}, "status": "NEW",
     "ref": REFS[0], "seen": SEEN},
    {"id": "p1", "count": -1, "at": AT.replace(microsecond=0), "amount": decimal.Decimal("-0.01"), "note": None,
     "tags": ["x"], "attrs": {}, "customer": {"name": "c1", "since": None}, "status": "PAID", "ref": REFS[1],
     "seen": None},
    {"id": "p2", "count": 2, "at": AT, "amount": decimal.Decimal("99999999.99"), "note": None, "tags": ["x", "y"],
     "attrs": {"a": 1, "b": -2}, "customer": {"name": "c2", "since": None}, "status": "PAID", "ref": REFS[2],
     "seen": SEEN}]
MONEY = """syntax = "proto3";
package sluice.common;
message Money { string currency = 1; int64 units = 2; }
"""
PROTO = """syntax = "proto3";
package sluice.check;
import "google/protobuf/timestamp.proto";
import "money.proto";
message Order {
  message Customer { string name = 1; int32 tier = 2; }
  enum Status { NEW = 0; PAID = 1; }
  string id = 1;
  int64 quantity = 2;
  Customer customer = 3;
  repeated string tags = 4;
  google.protobuf.Timestamp placed_at = 5;
  Status status = 6;
  map<string, int64> counts = 7;
  oneof pick { string word = 8; int32 number = 9; }
  sluice.common.Money total = 10;
}
"""


def order(i: int) -> dict[str, Any]:
    """Order record i, in MessageToDict's own form (int64 as strings, RFC 3339 timestamps, no
    default values: no empty tags, no status NEW), so that it compares with what is read back."""
    record = {"id": f"o{i}", "quantity": str(10**12 + i), "customer": {"name": f"c{i}", "tier": i + 1},
              "placedAt": f"2026-01-02T03:04:0{i}.678901Z", "counts": {"k": str(i + 1)}, "word": "w",
              "total": {"currency": "EUR", "units": str(i + 1)}}
    if i:
        record |= {"tags": [f"t{j}" for j in range(i)], "status": "PAID"}
    return record


PROTO_IN = [order(i) for i in range(3)]
NESTED_IN = [{"name": "nested", "tier": 7}]

passed = failed = 0


def check(what: str, ok: bool, detail: Any = "") -> None:
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}\n     {detail}")


class Registry:
    """schema_registry.py as a subprocess, stopped by stop()."""

    def __init__(self, tmp: str, name: str, *args: str):
        self.log = os.path.join(tmp, f"{name}.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "schema_registry.py"), "--port", "0", *args],
                stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("listening on "):
            self.proc.kill()
            raise SystemExit(f"schema_registry.py {name} did not start: {line!r}")
        self.url = line.split()[-1]

    def stop(self) -> int | None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def http(method: str, url: str, body: Any = None, auth: str | None = USER, cafile: str | None = None,
         bearer: str | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    context = ssl.create_default_context(cafile=cafile) if cafile else None
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as e:
        raw, status = e.read().decode(), e.code
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


def produce(tmp: str, bootstrap: str, url: str, topic: str, records: list[dict[str, Any]], *args: str) -> bool:
    run = subprocess.run([sys.executable, os.path.join(HERE, "produce_registry.py"), "--bootstrap", bootstrap,
                          "--registry", url, "--topic", topic, *args], cwd=tmp, capture_output=True, text=True,
                         input="".join(json.dumps(r) + "\n" for r in records), timeout=180)
    ok = run.returncode == 0 and run.stdout.strip().endswith(f"produced {len(records)}")
    check(f"produce_registry.py produced {len(records)} records to {topic}", ok, run.stdout + run.stderr)
    return ok


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"selfcheck-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.time() + 60
    while len(values) < count and time.time() < deadline:
        message = consumer.poll(1)
        if message is not None and not message.error():
            values.append(message.value())
    consumer.close()
    return values


def framing(value: bytes, protobuf: bool) -> tuple[int, int, list[int], bytes]:
    """(magic, schema id, message indexes, the index bytes) of a record's value."""
    pos, indexes = 5, []
    if protobuf:
        def zigzag_varint() -> int:
            nonlocal pos
            result = shift = 0
            while True:
                byte = value[pos]
                pos, result, shift = pos + 1, result | (byte & 0x7F) << shift, shift + 7
                if not byte & 0x80:
                    return (result >> 1) ^ -(result & 1)
        count = zigzag_varint()
        indexes = [zigzag_varint() for _ in range(count)] or [0]
    return value[0], int.from_bytes(value[1:5], "big"), indexes, value[5:pos]


def check_avro(tmp: str, bootstrap: str, url: str, sr: SchemaRegistryClient) -> None:
    schema_file = os.path.join(tmp, "payment.avsc")
    with open(schema_file, "w") as f:
        json.dump(AVRO_SCHEMA, f, indent=2)
    topic = f"check-avro-{RUN}"
    if not produce(tmp, bootstrap, url, topic, AVRO_IN, "--format", "avro", "--schema", schema_file,
                   "--auth", USER, "--key-field", "id"):
        return
    _, latest = http("GET", f"{url}/subjects/{topic}-value/versions/latest")
    values = consume(bootstrap, topic, len(AVRO_IN))
    heads = [framing(v, False)[:2] for v in values]
    check("Avro records: magic 0x00 and the subject's schema id, big-endian",
          len(values) == 3 and heads == [(0, latest["id"])] * 3, (heads, latest))
    deserialize = AvroDeserializer(sr)
    decoded = [deserialize(v, SerializationContext(topic, MessageField.VALUE)) for v in values]
    for record in decoded:
        record["ref"] = str(record["ref"])  # fastavro gives uuid.UUID
    check("AvroDeserializer through the registry gives back what was produced", decoded == AVRO_OUT,
          f"{decoded}\n     expected {AVRO_OUT}")
    check("GET /schemas/ids/{id}: canonical Avro (compact, sorted keys), no schemaType",
          http("GET", f"{url}/schemas/ids/{latest['id']}")[1]
          == {"schema": json.dumps(AVRO_SCHEMA, sort_keys=True, separators=(",", ":"))})


def registered_files(url: str, path: str) -> list[Any]:
    """The FileDescriptorProto that the registry serves at `path` (format=serialized), after
    those of its references."""
    _, served = http("GET", f"{url}/{path}?format=serialized")
    files = [file for ref in served.get("references", [])
             for file in registered_files(url, f"subjects/{ref['subject']}/versions/{ref['version']}")]
    return files + [descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(served["schema"]))]


def registered_class(url: str, schema_id: int, indexes: list[int]) -> Any:
    """The message class at `indexes` in the registry's descriptor of schema `schema_id`,
    built in a pool of its own (not from the .proto)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    files = registered_files(url, f"schemas/ids/{schema_id}")
    for file in files:
        pool.Add(file)
    message = pool.FindFileByName(file.name).message_types_by_name[file.message_type[indexes[0]].name]
    for index in indexes[1:]:
        message = message.nested_types[index]
    return GetMessageClass(message)


def compile_served(tmp: str, url: str, schema_id: int) -> tuple[int, list[Any]]:
    """protoc's exit code and descriptors for the .proto text the registry serves for
    `schema_id` and its references."""
    served_dir = os.path.join(tmp, "served")
    os.makedirs(served_dir, exist_ok=True)
    _, served = http("GET", f"{url}/schemas/ids/{schema_id}")
    for ref in served.get("references", []):
        with open(os.path.join(served_dir, ref["name"]), "w") as f:
            f.write(http("GET", f"{url}/subjects/{ref['subject']}/versions/{ref['version']}/schema")[1])
    with open(os.path.join(served_dir, "served.proto"), "w") as f:
        f.write(served["schema"])
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    out = os.path.join(tmp, "served.pb")
    code = protoc.main(["protoc", f"-I{served_dir}", f"-I{well_known}", f"--descriptor_set_out={out}",
                        "--include_imports", os.path.join(served_dir, "served.proto")])
    if code != 0:
        return code, []
    with open(out, "rb") as f:
        return code, list(descriptor_pb2.FileDescriptorSet.FromString(f.read()).file)


def check_protobuf(tmp: str, bootstrap: str, url: str, sr: SchemaRegistryClient) -> None:
    proto_file = os.path.join(tmp, "order.proto")
    for name, text in (("order.proto", PROTO), ("money.proto", MONEY)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    topics = {f"check-proto-{RUN}": ("sluice.check.Order", PROTO_IN, [0], b"\x00"),
              f"check-nested-{RUN}": ("Order.Customer", NESTED_IN, [0, 0], b"\x04\x00\x00")}
    ids = []
    for topic, (message, records, want_indexes, want_bytes) in topics.items():
        if not produce(tmp, bootstrap, url, topic, records, "--format", "protobuf", "--proto", proto_file,
                       "--message", message, "--auth", USER):
            return
        ids.append(http("GET", f"{url}/subjects/{topic}-value/versions/latest")[1]["id"])
        values = consume(bootstrap, topic, len(records))
        heads = [framing(v, True)[:4] for v in values]
        check(f"{topic}: magic 0x00, schema id {ids[-1]} big-endian, message indexes {want_indexes} "
              f"as {want_bytes.hex(' ')}",
              len(values) == len(records) and heads == [(0, ids[-1], want_indexes, want_bytes)] * len(records),
              heads)
        deserialize = ProtobufDeserializer(registered_class(url, ids[-1], want_indexes), None, sr)
        decoded = [json_format.MessageToDict(deserialize(v, SerializationContext(topic, MessageField.VALUE)))
                   for v in values]
        check(f"{topic}: ProtobufDeserializer through the registry gives back what was produced",
              decoded == records, f"{decoded}\n     expected {records}")
    check("the same .proto under two subjects has one id", ids[0] == ids[1], ids)
    _, money = http("GET", f"{url}/subjects/money.proto/versions/latest")
    _, served = http("GET", f"{url}/schemas/ids/{ids[0]}")
    print(f"     GET /schemas/ids/{ids[0]} -> {json.dumps(served)}")
    check("GET /schemas/ids/{id} for Protobuf: .proto text, schemaType PROTOBUF, the reference to money.proto",
          served.get("schemaType") == "PROTOBUF" and served["schema"].startswith('syntax = "proto3";')
          and served.get("references") == [{"name": "money.proto", "subject": "money.proto",
                                            "version": money["version"]}], served)

    # The .proto text the registry serves compiles to the descriptors that were registered.
    code, compiled = compile_served(tmp, url, ids[0])
    registered = registered_files(url, f"schemas/ids/{ids[0]}")
    for file in registered + compiled:
        file.ClearField("name")
        for message in [*file.message_type, *(n for m in file.message_type for n in m.nested_type)]:
            for field in message.field:
                field.ClearField("json_name")
    compiled = [f for f in compiled if f.package != "google.protobuf"]
    check("protoc compiles the served .proto texts to the registered descriptors",
          code == 0 and compiled == registered, f"protoc exit {code}\n{compiled}\n{registered}")


def check_api(url: str) -> None:
    subject = f"{url}/subjects/api-value"
    first = {"schema": json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]})}
    spaced = {"schema": json.dumps({"fields": [{"type": "string", "name": "a"}], "name": "R", "type": "record"},
                                   indent=2)}
    second = {"schema": json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "string"}, {"name": "b", "type": "long", "default": 0}]})}
    one = http("POST", f"{subject}/versions", first)
    check("register: {id}; the same Avro (other key order, spacing) elsewhere gets the same id",
          one[0] == 200 and http("POST", f"{url}/subjects/other-value/versions", spaced) == one
          and http("POST", f"{subject}/versions", first) == one, one)
    two = http("POST", f"{subject}/versions", second)
    check("a new schema gets the next id and version 2", two == (200, {"id": one[1]["id"] + 1})
          and http("GET", f"{subject}/versions") == (200, [1, 2]), two)
    latest = http("GET", f"{subject}/versions/latest")[1]
    check("GET versions/latest", latest.get("version") == 2 and latest.get("id") == two[1]["id"], latest)
    check("GET versions/1/schema is the schema text itself",
          http("GET", f"{subject}/versions/1/schema")[1] == json.loads(first["schema"]))
    canonical = json.dumps(json.loads(first["schema"]), sort_keys=True, separators=(",", ":"))
    check("POST /subjects/{s} finds a registered schema", http("POST", subject, spaced)
          == (200, {"subject": "api-value", "version": 1, "id": one[1]["id"], "schema": canonical}))
    check("GET /schemas/ids/{id}/versions", http("GET", f"{url}/schemas/ids/{one[1]['id']}/versions")[1]
          == [{"subject": "api-value", "version": 1}, {"subject": "other-value", "version": 1}])
    check("GET /schemas/types", http("GET", f"{url}/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"]))
    check("GET /subjects lists api-value", "api-value" in http("GET", f"{url}/subjects")[1])
    check("config: BACKWARD by default, PUT and GET",
          http("GET", f"{url}/config") == (200, {"compatibilityLevel": "BACKWARD"})
          and http("PUT", f"{url}/config", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
          and http("GET", f"{url}/config") == (200, {"compatibilityLevel": "FULL"}))
    errors = {
        "unknown subject 40401": (http("GET", f"{url}/subjects/nope/versions/latest"), 404, 40401),
        "unknown version 40402": (http("GET", f"{subject}/versions/9"), 404, 40402),
        "unknown id 40403": (http("GET", f"{url}/schemas/ids/999"), 404, 40403),
        "lookup of an unregistered schema 40403": (http("POST", subject, {"schema": '"string"'}), 404, 40403),
        "invalid Avro JSON 42201": (http("POST", f"{subject}/versions", {"schema": "{nope"}), 422, 42201),
        "Avro with an undefined type 42201":
            (http("POST", f"{subject}/versions", {"schema": '{"type": "array", "items": "Nope"}'}), 422, 42201),
        "invalid compatibility level 42203": (http("PUT", f"{url}/config", {"compatibility": "SOME"}), 422, 42203),
    }
    for what, ((status, body), want_status, want_code) in errors.items():
        check(f"error: {what}", status == want_status and body.get("error_code") == want_code, (status, body))


def check_auth(url: str) -> None:
    for what, auth, bearer in (("no credentials", None, None), ("a wrong password", "sluice:nope", None),
                               ("a bearer token", None, "secret")):
        status, body = http("GET", f"{url}/subjects", auth=auth, bearer=bearer)
        check(f"basic auth: {what} gets 401 {{error_code: 401}}", status == 401 and body.get("error_code") == 401,
              (status, body))
    check("basic auth: the right credentials get 200", http("GET", f"{url}/subjects")[0] == 200)
    try:
        SchemaRegistryClient({"url": url}).get_subjects()
        check("the client without credentials is refused", False, "no error")
    except SchemaRegistryError as e:
        check("the client without credentials is refused (SchemaRegistryError 401)", e.http_status_code == 401, e)


def check_outage_and_tls(tmp: str, bootstrap: str) -> None:
    flaky = Registry(tmp, "flaky", "--fail-first", "2", "--delay-ms", "200")
    started = time.time()
    answers = [http("GET", f"{flaky.url}/schemas/types", auth=None) for _ in range(3)]
    took = time.time() - started
    check("--fail-first 2: two 500 {error_code: 50001}, then 200",
          [a[0] for a in answers] == [500, 500, 200] and answers[0][1].get("error_code") == 50001, answers)
    check("--delay-ms 200: three requests take >= 0.6 s", took >= 0.6, took)
    flaky.stop()
    healing = Registry(tmp, "healing", "--fail-first", "3")
    produce(tmp, bootstrap, healing.url, f"check-heal-{RUN}", AVRO_IN[:1], "--format", "avro",
            "--schema", os.path.join(tmp, "payment.avsc"))
    healing.stop()
    with open(healing.log) as f:
        log = f.read()
    check("... through an outage of 3 failed requests (the client retried them)", log.count("-> 500") == 3, log)

    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    secure = Registry(tmp, "secure", "--cert", cert, "--key", key, "--token", "tok3n")
    check("--cert/--key: listening on https://127.0.0.1:PORT", secure.url.startswith("https://127.0.0.1:"), secure.url)
    check("HTTPS: a wrong bearer token gets 401",
          http("GET", f"{secure.url}/subjects", auth=None, bearer="nope", cafile=cert)[0] == 401)
    produce(tmp, bootstrap, secure.url, f"check-tls-{RUN}", AVRO_IN[:1], "--format", "avro",
            "--schema", os.path.join(tmp, "payment.avsc"), "--token", "tok3n", "--ca", cert)
    check("HTTPS: the right bearer token lists the subject", http("GET", f"{secure.url}/subjects", auth=None,
                                                                  bearer="tok3n", cafile=cert)
          == (200, [f"check-tls-{RUN}-value"]))
    secure.stop()


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    bootstrap = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="sluice-registry-check-")
    registry = Registry(tmp, "registry", "--user", USER)
    print(f"registry at {registry.url}, logs in {tmp}")
    sr = SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": USER})
    try:
        check_auth(registry.url)
        check_avro(tmp, bootstrap, registry.url, sr)
        check_protobuf(tmp, bootstrap, registry.url, sr)
        check_api(registry.url)
        check_outage_and_tls(tmp, bootstrap)
    except Exception:  # noqa: BLE001
        check("no unexpected exception", False, traceback.format_exc())
    finally:
        check("the registry stops on SIGTERM", registry.stop() == 0)
        with open(registry.log) as f:
            log = f.read()
        secret = base64.b64encode(USER.encode()).decode()
        check("the registry logged request lines, no credentials, no traceback",
              f"POST /subjects/check-avro-{RUN}-value/versions?normalize=False -> 200" in log
              and "secret" not in log and secret not in log and "Traceback" not in log, log[-3000:])
    if failed:
        print(f"(kept {tmp} for inspection)")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

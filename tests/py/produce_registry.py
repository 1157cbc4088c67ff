#!/usr/bin/env python3
"""Produces records in the Confluent wire format with confluent-kafka-python's own
serializers, through a schema registry, so that the framing is not sluice's.

Run with the python that tests/py/setup-registry-venv prints:

    produce_registry.py --bootstrap B --registry URL --topic T --format avro --schema FILE.avsc
                        [--auth USER:PASSWORD | --token TOKEN] [--ca CA.pem]
                        [--key-field NAME] [--partitions N] < records.jsonl
    produce_registry.py ... --format protobuf --proto FILE.proto --message NAME < records.jsonl

Reads one JSON object per line from stdin and produces each as one record to topic T
(created with N partitions, default 1, if missing), its value serialized by AvroSerializer
(`auto.register.schemas`, so the schema is registered under `T-value`) or ProtobufSerializer
(which registers the .proto's FileDescriptorProto, base64, under `T-value`). With --key-field the record
key is that field's value as a UTF-8 string; else there is no key. Prints `produced N` on
stdout when every record is acknowledged (acks=all), and exits 1 if one is not.

Avro: JSON values are converted to what fastavro expects, following the schema (records,
arrays, maps, unions, named types): timestamp-millis/-micros and local-timestamp-* take an
ISO-8601 string (no offset: UTC) or the integer itself; date takes "YYYY-MM-DD" or days;
time-millis/-micros take "HH:MM:SS[.ffffff]"; decimal takes a string or a number (kept
exact: Decimal(str(x))); uuid takes a string; bytes and fixed without a logical type take a
string whose characters are the bytes (U+0000..U+00FF, Avro's JSON encoding). In a union the
first non-null branch that the value converts for is used.

Protobuf: the .proto (and the files it imports, looked up in its folder) is compiled at run
time with grpcio-tools' protoc (which has the well-known types) into a temporary directory
and imported. ProtobufSerializer registers each imported file but google/protobuf/* first,
as a subject of its own named after the file, and refers to it. Each line fills message NAME
(full name, or relative to the file's package; nested messages as Outer.Inner) with
google.protobuf.json_format.ParseDict, which takes Timestamps as RFC 3339 strings, int64 as
numbers or strings, enums by name.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import importlib
import json
import os
import sys
import tempfile
from typing import Any, Callable

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
PRIMITIVES = {"null": type(None), "boolean": bool, "int": int, "long": int, "float": (int, float),
              "double": (int, float), "string": str, "bytes": str}
TIMESTAMP_UNITS = {"timestamp-millis": "milliseconds", "timestamp-micros": "microseconds",
                   "local-timestamp-millis": "milliseconds", "local-timestamp-micros": "microseconds"}


def registry_client(args: argparse.Namespace) -> SchemaRegistryClient:
    conf: dict[str, Any] = {"url": args.registry}
    if args.auth:
        conf["basic.auth.user.info"] = args.auth
    if args.token:
        # The client requires a logical cluster with a static token; the registry ignores it.
        conf |= {"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": args.token,
                 "bearer.auth.logical.cluster": "sluice-tests"}
    if args.ca:
        conf["ssl.ca.location"] = args.ca
    return SchemaRegistryClient(conf)


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        return
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


# --- Avro: JSON values to fastavro's ----------------------------------------------------------


def named_types(schema: Any, names: dict[str, Any], namespace: str = "") -> None:
    """Collects the named types of an Avro schema by full and by short name."""
    if isinstance(schema, list):
        for branch in schema:
            named_types(branch, names, namespace)
    elif isinstance(schema, dict):
        if schema.get("type") in ("record", "error", "enum", "fixed"):
            name = schema["name"]
            if "." in name:
                namespace = name.rsplit(".", 1)[0]
            else:
                namespace = schema.get("namespace", namespace) or ""
                name = f"{namespace}.{name}" if namespace else name
            names[name] = names[name.rsplit(".", 1)[-1]] = schema
        for child in [f["type"] for f in schema.get("fields", [])] + [schema.get("items"), schema.get("values")]:
            named_types(child, names, namespace)
        if isinstance(schema.get("type"), (dict, list)):
            named_types(schema["type"], names, namespace)


def timestamp(value: Any, unit: str) -> dt.datetime:
    if isinstance(value, int):
        return EPOCH + dt.timedelta(**{unit: value})
    parsed = dt.datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def convert(schema: Any, value: Any, names: dict[str, Any]) -> Any:
    """`value` (from JSON) as fastavro takes it for `schema`; ValueError/TypeError if it
    does not fit."""
    if value is None:
        return None
    if isinstance(schema, str):
        if schema in names:
            return convert(names[schema], value, names)
        if schema in PRIMITIVES and not isinstance(value, PRIMITIVES[schema]):
            raise TypeError(f"{value!r} is not a {schema}")
        return value.encode("latin-1") if schema == "bytes" else value
    if isinstance(schema, list):
        for branch in schema:
            if branch != "null":
                try:
                    return convert(branch, value, names)
                except (ValueError, TypeError, ArithmeticError):
                    continue
        return value  # fastavro reports the mismatch
    kind, logical = schema["type"], schema.get("logicalType")
    if logical in TIMESTAMP_UNITS:
        return timestamp(value, TIMESTAMP_UNITS[logical])
    if logical == "date":
        return value if isinstance(value, int) else dt.date.fromisoformat(value)
    if logical in ("time-millis", "time-micros"):
        return value if isinstance(value, int) else dt.time.fromisoformat(value)
    if logical == "decimal":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TypeError(f"a decimal must be a string or a number, not {value!r}")
        return decimal.Decimal(str(value))
    if logical == "uuid":
        return str(value)
    if kind == "fixed":
        return convert("bytes", value, names)
    if kind in ("record", "error"):
        if not isinstance(value, dict):
            raise TypeError(f"a record must be an object, not {value!r}")
        types = {f["name"]: f["type"] for f in schema["fields"]}
        return {k: convert(types[k], v, names) if k in types else v for k, v in value.items()}
    if kind == "array":
        if not isinstance(value, list):
            raise TypeError(f"an array must be a list, not {value!r}")
        return [convert(schema["items"], v, names) for v in value]
    if kind == "map":
        if not isinstance(value, dict):
            raise TypeError(f"a map must be an object, not {value!r}")
        return {k: convert(schema["values"], v, names) for k, v in value.items()}
    return value if kind == "enum" else convert(kind, value, names)


def avro_serializer(args: argparse.Namespace, client: SchemaRegistryClient) -> Callable[[Any], Any]:
    from confluent_kafka.schema_registry.avro import AvroSerializer

    with open(args.schema) as f:
        schema_text = f.read()
    schema = json.loads(schema_text)
    names: dict[str, Any] = {}
    named_types(schema, names)
    serializer = AvroSerializer(client, schema_text, conf={"auto.register.schemas": True})
    context = SerializationContext(args.topic, MessageField.VALUE)
    return lambda record: serializer(convert(schema, record, names), context)


# --- Protobuf: the .proto compiled with grpcio-tools ------------------------------------------


def compile_proto(proto: str) -> Any:
    """The Python module that protoc generates for the .proto file `proto` (absolute), with
    those of the files it imports (looked up in its folder) imported too."""
    import grpc_tools
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    root = os.path.dirname(proto)
    command = ["protoc", f"-I{root}", f"-I{os.path.join(os.path.dirname(grpc_tools.__file__), '_proto')}"]
    with tempfile.TemporaryDirectory(prefix="sluice-proto-") as out:
        # The files it imports, then Python for them and it (google/protobuf/* come with protobuf).
        imports = os.path.join(out, "imports.pb")
        if protoc.main(command + [f"--descriptor_set_out={imports}", "--include_imports", proto]) != 0:
            sys.exit(f"protoc could not compile {proto}")
        with open(imports, "rb") as f:
            files = [file.name for file in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file
                     if not file.name.startswith("google/protobuf/")]
        if protoc.main(command + [f"--python_out={out}"] + [os.path.join(root, name) for name in files]) != 0:
            sys.exit(f"protoc could not generate Python for {files}")
        sys.path.insert(0, out)
        try:
            return importlib.import_module(os.path.basename(proto)[: -len(".proto")].replace("-", "_") + "_pb2")
        finally:
            sys.path.remove(out)


def protobuf_serializer(args: argparse.Namespace, client: SchemaRegistryClient) -> Callable[[Any], Any]:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from google.protobuf import json_format
    from google.protobuf.message_factory import GetMessageClass

    proto = os.path.abspath(args.proto)
    module = compile_proto(proto)
    package = module.DESCRIPTOR.package
    descriptors = module.DESCRIPTOR.pool
    for name in (args.message, f"{package}.{args.message}"):
        try:
            descriptor = descriptors.FindMessageTypeByName(name)
            break
        except KeyError:
            continue
    else:
        sys.exit(f"no message {args.message} in {proto} (package {package!r})")
    message_class = GetMessageClass(descriptor)
    serializer = ProtobufSerializer(message_class, client, {"auto.register.schemas": True})
    context = SerializationContext(args.topic, MessageField.VALUE)
    return lambda record: serializer(json_format.ParseDict(record, message_class()), context)


def main() -> None:
    parser = argparse.ArgumentParser(description="Produce JSON lines through a schema registry")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--registry", required=True, help="the registry's URL")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--format", required=True, choices=["avro", "protobuf"])
    parser.add_argument("--schema", help="the Avro schema (.avsc), for --format avro")
    parser.add_argument("--proto", help="the .proto file, for --format protobuf")
    parser.add_argument("--message", help="the message to produce, for --format protobuf")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth", help="USER:PASSWORD for the registry (HTTP basic auth)")
    auth.add_argument("--token", help="a bearer token for the registry")
    parser.add_argument("--ca", help="the CA certificate that the registry's HTTPS certificate is checked against")
    parser.add_argument("--key-field", help="use this field's value as the record key")
    parser.add_argument("--partitions", type=int, default=1, help="for a topic that must be created")
    args = parser.parse_args()
    if args.format == "avro" and not args.schema:
        parser.error("--format avro needs --schema")
    if args.format == "protobuf" and not (args.proto and args.message):
        parser.error("--format protobuf needs --proto and --message")

    client = registry_client(args)
    serialize = (avro_serializer if args.format == "avro" else protobuf_serializer)(args, client)
    ensure_topic(args.bootstrap, args.topic, args.partitions)
    producer = Producer({"bootstrap.servers": args.bootstrap, "compression.type": "none",
                         "enable.idempotence": False, "acks": "all"})
    failures: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    count = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        record = json.loads(line)
        key = None
        if args.key_field:
            key = str(record[args.key_field]).encode("utf-8")
        producer.produce(args.topic, key=key, value=serialize(record), on_delivery=delivered)
        producer.poll(0)
        count += 1
    left = producer.flush(60)
    if failures or left:
        sys.exit(f"{len(failures)} records failed ({failures[:3]}), {left} not acknowledged")
    print(f"produced {count}")


if __name__ == "__main__":
    main()

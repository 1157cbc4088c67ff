#!/usr/bin/env python3
"""Self-check of rest_catalog.py, by hand (CI does not run it):

    "$(tests/py/setup-venv | tail -n 1)" tests/py/rest_selfcheck.py

Starts rest_catalog.py on a free port (--port 0) in a temporary directory, then, through
pyiceberg's REST client (`pyiceberg.catalog.rest.RestCatalog`):
  * creates namespace `tutorial` and table `tutorial.events` (string, timestamptz, int and
    decimal(10,2) columns, partitioned by day(ts));
  * appends rows twice with pyarrow, with snapshot properties (`sluice.offsets`), and reads
    them back; checks the current snapshot's summary holds the property;
  * checks that a commit from a stale table fails with 409 (CommitFailedException) and
    that create-table transactions (stage-create + assert-create) work.
Then checks the REST shapes iceberg-rust's RestCatalog relies on with raw HTTP (config with
?warehouse=, HEAD exists checks, 404 error bodies, a create body without partition field ids,
an add-snapshot + set-snapshot-ref commit with assert-table-uuid / assert-ref-snapshot-id), and
reads the table directly from the server's SQLite database with pyiceberg's SqlCatalog
(catalog name "rest", the server's default) and with read_table.py, to prove the data is real.

The temporary directory is removed when every check passes, kept (and named) otherwise.
Prints "N passed, 0 failed" and exits 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DecimalType, IntegerType, NestedField, StringType, TimestamptzType

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "rest_catalog.py")
READ_TABLE = os.path.join(HERE, "read_table.py")
SERVER_CATALOG_NAME = "rest"  # rest_catalog.py's default --catalog-name
OFFSETS = "sluice.offsets"

passed = 0
failed = 0


def check(what: str, ok: bool, detail: str = "") -> None:
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}\n{detail}")


def start_server(warehouse: str, db: str, log_path: str) -> tuple[subprocess.Popen[str], str]:
    log = open(log_path, "w")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen(
        [sys.executable, SERVER, "--port", "0", "--warehouse", warehouse, "--catalog-db", db],
        stdout=subprocess.PIPE, stderr=log, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()  # type: ignore[union-attr]
    try:
        line = lines.get(timeout=60)
    except queue.Empty:
        line = ""
    prefix = "listening on "
    if not line.startswith(prefix):
        proc.kill()
        with open(log_path) as f:
            raise SystemExit(f"rest_catalog.py did not start (stdout: {line!r})\n{f.read()}")
    return proc, line[len(prefix):].strip()


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return e.code, raw.decode(errors="replace")


def rows_of(table: Any) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["event_id"])


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="sluice-rest-catalog-")
    warehouse = os.path.join(tmp, "warehouse")
    db = os.path.join(tmp, "rest-catalog.db")
    log_path = os.path.join(tmp, "server.log")
    proc, base = start_server(warehouse, db, log_path)
    print(f"server at {base} (log: {log_path})")
    try:
        run_checks(base, warehouse, db, tmp)
    except Exception as e:  # noqa: BLE001
        import traceback

        check("no unexpected exception", False, traceback.format_exc() + f"\n{e}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = None
        check("the server stops on SIGTERM", code == 0, f"exit code {code}")
        with open(log_path) as f:
            log = f.read()
        check("the server logged request lines and no traceback",
              '"POST /v1/namespaces HTTP/1.1" 200' in log and "Traceback" not in log, log[-4000:])

    if failed:
        print(f"(kept {tmp} for inspection)")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def run_checks(base: str, warehouse: str, db: str, tmp: str) -> None:
    v1 = f"{base}/v1"
    catalog = RestCatalog("client", uri=base, warehouse=f"file://{warehouse}")

    # ---- namespace ---------------------------------------------------------------------
    check("namespace tutorial is absent at first", not catalog.namespace_exists("tutorial"))
    catalog.create_namespace("tutorial")
    check("namespace tutorial exists after create", catalog.namespace_exists("tutorial"))
    check("list_namespaces", catalog.list_namespaces() == [("tutorial",)], repr(catalog.list_namespaces()))

    # ---- table -------------------------------------------------------------------------
    schema = Schema(
        NestedField(1, "event_id", StringType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "quantity", IntegerType(), required=False),
        NestedField(4, "price", DecimalType(10, 2), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    check("table is absent at first", not catalog.table_exists("tutorial.events"))
    # No client-side commit retries, so that the stale commit below surfaces the server's 409.
    table = catalog.create_table("tutorial.events", schema=schema, partition_spec=spec,
                                 properties={"commit.retry.num-retries": "0"})
    check("table exists after create", catalog.table_exists("tutorial.events"))
    check("list_tables", catalog.list_tables("tutorial") == [("tutorial", "events")], repr(catalog.list_tables("tutorial")))
    check("created table is format v2 partitioned by day(ts)",
          table.metadata.format_version == 2 and str(table.spec().fields[0].transform) == "day",
          repr(table.metadata))

    utc = dt.timezone.utc
    arrow_schema = pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("quantity", pa.int32(), nullable=True),
            pa.field("price", pa.decimal128(10, 2), nullable=True),
        ]
    )
    first = [
        {"event_id": "e3", "ts": dt.datetime(2026, 1, 10, 0, 0, 1, 250000, tzinfo=utc), "quantity": None, "price": None},
        {"event_id": "e1", "ts": dt.datetime(2026, 1, 9, 10, 4, 0, tzinfo=utc), "quantity": 2, "price": decimal.Decimal("18.00")},
        {"event_id": "e2", "ts": dt.datetime(2026, 1, 9, 23, 59, 59, 999999, tzinfo=utc), "quantity": -1,
         "price": decimal.Decimal("-0.50")},
    ]
    second = [{"event_id": "e0", "ts": dt.datetime(2026, 1, 9, 8, 0, tzinfo=utc), "quantity": 1,
               "price": decimal.Decimal("12345678.90")}]
    stale = catalog.load_table("tutorial.events")
    table.append(pa.Table.from_pylist(first, schema=arrow_schema), snapshot_properties={OFFSETS: '{"0":3}'})
    table.append(pa.Table.from_pylist(second, schema=arrow_schema), snapshot_properties={OFFSETS: '{"0":4}'})
    expected = sorted(first + second, key=lambda r: r["event_id"])

    loaded = catalog.load_table("tutorial.events")
    check("rows read back through the REST catalog", rows_of(loaded) == expected, repr(rows_of(loaded)))
    summary = loaded.current_snapshot().summary if loaded.current_snapshot() else None
    check("the current snapshot summary holds the snapshot property",
          summary is not None and summary.get(OFFSETS) == '{"0":4}' and summary.get("total-records") == "4",
          repr(summary))
    check("two snapshots, metadata version 2",
          len(loaded.metadata.snapshots) == 2 and "/00002-" in loaded.metadata_location, loaded.metadata_location)

    # A commit based on stale metadata fails its assert-ref-snapshot-id requirement -> 409
    # (pyiceberg, like iceberg-rust, would otherwise refresh and retry).
    try:
        stale.append(pa.Table.from_pylist(second, schema=arrow_schema))
        check("a stale commit is rejected with CommitFailedException", False, "the commit succeeded")
    except CommitFailedException as e:
        check("a stale commit is rejected with CommitFailedException", True)
        print(f"     ({e})")
    check("the rejected commit changed nothing", len(catalog.load_table("tutorial.events").metadata.snapshots) == 2)

    # Create transaction: stage-create, then a commit with assert-create.
    with catalog.create_table_transaction("tutorial.staged", schema=schema) as tx:
        tx.append(pa.Table.from_pylist(second, schema=arrow_schema))
    staged = catalog.load_table("tutorial.staged")
    check("create-table transaction (stage-create + assert-create)", rows_of(staged) == second, repr(rows_of(staged)))

    # ---- the shapes iceberg-rust's RestCatalog relies on -------------------------------
    status, body = http("GET", f"{v1}/config?warehouse=file://{warehouse}")
    check("GET /v1/config?warehouse=", status == 200 and body == {"defaults": {}, "overrides": {}}, f"{status} {body}")
    status, _ = http("HEAD", f"{v1}/namespaces/tutorial")
    check("HEAD existing namespace -> 204", status == 204, str(status))
    status, _ = http("HEAD", f"{v1}/namespaces/nope")
    check("HEAD missing namespace -> 404", status == 404, str(status))
    status, body = http("GET", f"{v1}/namespaces/nope")
    check("GET missing namespace -> 404 NoSuchNamespaceException",
          status == 404 and body["error"]["type"] == "NoSuchNamespaceException" and body["error"]["code"] == 404
          and isinstance(body["error"]["message"], str), f"{status} {body}")
    status, _ = http("HEAD", f"{v1}/namespaces/tutorial/tables/events")
    check("HEAD existing table -> 204", status == 204, str(status))
    status, _ = http("HEAD", f"{v1}/namespaces/tutorial/tables/nope")
    check("HEAD missing table -> 404", status == 404, str(status))
    status, body = http("GET", f"{v1}/namespaces/tutorial/tables/nope")
    check("GET missing table -> 404 NoSuchTableException",
          status == 404 and body["error"]["type"] == "NoSuchTableException", f"{status} {body}")

    status, body = http("POST", f"{v1}/namespaces", {"namespace": ["rust", "nested"]})
    check("POST /v1/namespaces (two levels) -> 200 NamespaceResponse",
          status == 200 and body["namespace"] == ["rust", "nested"], f"{status} {body}")
    status, _ = http("HEAD", f"{v1}/namespaces/rust%1Fnested")
    check("HEAD a two-level namespace (%1F) -> 204", status == 204, str(status))
    status, body = http("GET", f"{v1}/namespaces?parent=rust")
    check("GET /v1/namespaces?parent=rust", status == 200 and body["namespaces"] == [["rust", "nested"]], f"{status} {body}")

    # As iceberg-rust sends it: unbound partition spec (no field-id / spec-id), stage-create false.
    create = {
        "name": "rust_events",
        "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "user_id", "required": True, "type": "string"},
            {"id": 2, "name": "event_time", "required": True, "type": "timestamptz"},
            {"id": 3, "name": "qty", "required": False, "type": "int"},
            {"id": 4, "name": "amount", "required": False, "type": "decimal(10, 2)"},
        ]},
        "partition-spec": {"fields": [{"source-id": 2, "name": "event_time_day", "transform": "day"}]},
        "stage-create": False,
        "properties": {"write.parquet.compression-codec": "zstd"},
    }
    status, body = http("POST", f"{v1}/namespaces/rust%1Fnested/tables", create)
    ok = status == 200 and isinstance(body.get("metadata-location"), str) and body.get("config") == {}
    meta = body.get("metadata", {}) if isinstance(body, dict) else {}
    check("create a table the way iceberg-rust does (LoadTableResult)",
          ok and meta.get("format-version") == 2
          and meta["partition-specs"] == [{"spec-id": 0, "fields": [
              {"source-id": 2, "field-id": 1000, "transform": "day", "name": "event_time_day"}]}]
          and meta["default-spec-id"] == 0 and meta["last-partition-id"] == 1000
          and "table-uuid" in meta and "last-sequence-number" in meta and "current-snapshot-id" not in meta,
          f"{status} {json.dumps(body)}")
    status, _ = http("POST", f"{v1}/namespaces/rust%1Fnested/tables", create)
    check("creating it again -> 409", status == 409, str(status))
    status, body = http("POST", f"{v1}/namespaces/nope/tables", create)
    check("creating in a missing namespace -> 404", status == 404, f"{status} {body}")

    # A fast-append commit as iceberg-rust encodes it (the manifest list is not read by the server).
    uuid = meta.get("table-uuid")
    now = int(dt.datetime.now(tz=utc).timestamp() * 1000)
    commit = {
        "identifier": {"namespace": ["rust", "nested"], "name": "rust_events"},
        "requirements": [
            {"type": "assert-table-uuid", "uuid": uuid},
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
        ],
        "updates": [
            {"action": "add-snapshot", "snapshot": {
                "snapshot-id": 4242, "sequence-number": 1, "timestamp-ms": now,
                "manifest-list": f"file://{warehouse}/rust.nested/rust_events/metadata/snap-4242.avro",
                "summary": {"operation": "append", OFFSETS: '{"p0":9}', "added-records": "0"}, "schema-id": 0}},
            {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 4242, "type": "branch"},
        ],
    }
    status, body = http("POST", f"{v1}/namespaces/rust%1Fnested/tables/rust_events", commit)
    m = body.get("metadata", {}) if isinstance(body, dict) else {}
    check("commit add-snapshot + set-snapshot-ref -> CommitTableResponse",
          status == 200 and isinstance(body.get("metadata-location"), str)
          and m.get("current-snapshot-id") == 4242 and m.get("refs") == {"main": {"snapshot-id": 4242, "type": "branch"}}
          and m["snapshots"][0]["summary"][OFFSETS] == '{"p0":9}' and m.get("last-sequence-number") == 1,
          f"{status} {json.dumps(body)}")
    status, body = http("POST", f"{v1}/namespaces/rust%1Fnested/tables/rust_events", commit)
    check("the same commit again -> 409 CommitFailedException",
          status == 409 and body["error"]["type"] == "CommitFailedException", f"{status} {body}")
    wrong_uuid = dict(commit, requirements=[{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}])
    status, body = http("POST", f"{v1}/namespaces/rust%1Fnested/tables/rust_events", wrong_uuid)
    check("assert-table-uuid mismatch -> 409", status == 409, f"{status} {body}")
    status, body = http("POST", f"{v1}/namespaces/rust%1Fnested/tables/nope",
                        {"requirements": [], "updates": []})
    check("commit to a missing table -> 404 NoSuchTableException",
          status == 404 and body["error"]["type"] == "NoSuchTableException", f"{status} {body}")

    # ---- the data is real: read the server's SQLite catalog directly --------------------
    direct = SqlCatalog(SERVER_CATALOG_NAME, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    dtable = direct.load_table("tutorial.events")
    check("SqlCatalog on the server's db sees the same metadata file",
          dtable.metadata_location == loaded.metadata_location, f"{dtable.metadata_location} vs {loaded.metadata_location}")
    check("SqlCatalog on the server's db reads the same rows", rows_of(dtable) == expected, repr(rows_of(dtable)))
    dsummary = dtable.current_snapshot().summary if dtable.current_snapshot() else None
    check("SqlCatalog sees the snapshot property", dsummary is not None and dsummary.get(OFFSETS) == '{"0":4}',
          repr(dsummary))
    files = dtable.inspect.files().to_pylist()
    check("3 data files in 2 day partitions under the warehouse",
          len(files) == 3 and len({str(f["partition"]) for f in files}) == 2
          and all(f["file_path"].startswith(f"file://{warehouse}/") for f in files), repr(files))
    direct.engine.dispose()

    result = subprocess.run(
        [sys.executable, READ_TABLE, "--catalog-uri", f"sqlite:{db}", "--catalog-name", SERVER_CATALOG_NAME,
         "--table", "tutorial.events"],
        capture_output=True, text=True,
    )
    lines = result.stdout.splitlines()
    ok = result.returncode == 0 and len(lines) == 5
    last = json.loads(lines[-1]).get("__snapshot_summary") if ok else None
    check("read_table.py reads the server's table",
          ok and isinstance(last, dict) and last.get(OFFSETS) == '{"0":4}'
          and json.loads(lines[0]) == {"event_id": "e0", "ts": "2026-01-09T08:00:00.000000+00:00", "quantity": 1,
                                        "price": "12345678.90"},
          f"exit {result.returncode}\n{result.stdout}\n{result.stderr}")

    # ---- drop ----------------------------------------------------------------------------
    catalog.drop_table("tutorial.staged")
    check("drop_table", not catalog.table_exists("tutorial.staged"))


if __name__ == "__main__":
    main()

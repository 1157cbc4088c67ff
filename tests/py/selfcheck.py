#!/usr/bin/env python3
"""Self-check of read_table.py, by hand (CI does not run it):

    "$(tests/py/setup-venv | tail -n 1)" tests/py/selfcheck.py

Creates a table with pyiceberg in a temporary SQLite catalog (namespace `tutorial`; string,
timestamptz, int and decimal(10,2) columns; partitioned by day(ts)), appends rows with
pyarrow, runs read_table.py on it with sqlx- and SQLAlchemy-style catalog URIs, and checks
its output line by line. Also checks that a missing table exits with code 2.
The temporary directory is removed when every check passes, kept (and named) otherwise.
Prints "N passed, 0 failed" and exits 0 when every check passes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DecimalType, IntegerType, NestedField, StringType, TimestamptzType

HERE = os.path.dirname(os.path.abspath(__file__))
READ_TABLE = os.path.join(HERE, "read_table.py")
CATALOG_NAME = "sluice"

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


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, READ_TABLE, *args], capture_output=True, text=True)


def main() -> None:
    tmp = tempfile.mkdtemp(prefix="sluice-read-table-")
    db = os.path.join(tmp, "catalog.db")
    warehouse = os.path.join(tmp, "warehouse")
    os.makedirs(warehouse)
    catalog = SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")
    catalog.create_namespace("tutorial")
    schema = Schema(
        NestedField(1, "event_id", StringType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "quantity", IntegerType(), required=False),
        NestedField(4, "price", DecimalType(10, 2), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    table = catalog.create_table("tutorial.events", schema=schema, partition_spec=spec)

    utc = dt.timezone.utc
    arrow_schema = pa.schema(
        [
            pa.field("event_id", pa.string(), nullable=False),
            pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("quantity", pa.int32(), nullable=True),
            pa.field("price", pa.decimal128(10, 2), nullable=True),
        ]
    )
    # Out of order, over two days (two partitions), with nulls and a sub-second timestamp.
    rows = pa.Table.from_pylist(
        [
            {"event_id": "e3", "ts": dt.datetime(2026, 1, 10, 0, 0, 1, 250000, tzinfo=utc), "quantity": None, "price": None},
            {"event_id": "e1", "ts": dt.datetime(2026, 1, 9, 10, 4, 0, tzinfo=utc), "quantity": 2, "price": decimal.Decimal("18.00")},
            {"event_id": "e2", "ts": dt.datetime(2026, 1, 9, 23, 59, 59, 999999, tzinfo=utc), "quantity": -1, "price": decimal.Decimal("-0.50")},
        ],
        schema=arrow_schema,
    )
    table.append(rows)
    table.append(
        pa.Table.from_pylist(
            [{"event_id": "e0", "ts": dt.datetime(2026, 1, 9, 8, 0, tzinfo=utc), "quantity": 1, "price": decimal.Decimal("12345678.9")}],
            schema=arrow_schema,
        )
    )

    expected_rows = [
        '{"event_id":"e0","ts":"2026-01-09T08:00:00.000000+00:00","quantity":1,"price":"12345678.90"}',
        '{"event_id":"e1","ts":"2026-01-09T10:04:00.000000+00:00","quantity":2,"price":"18.00"}',
        '{"event_id":"e2","ts":"2026-01-09T23:59:59.999999+00:00","quantity":-1,"price":"-0.50"}',
        '{"event_id":"e3","ts":"2026-01-10T00:00:01.250000+00:00","quantity":null,"price":null}',
    ]

    uris = [
        f"sqlite:{db}",  # sqlx
        f"sqlite:{db}?mode=rwc",  # sqlx
        f"sqlite://{db}?mode=rwc",  # sqlx: sqlite:///abs
        f"sqlite:///{db}",  # SQLAlchemy: sqlite:////abs
    ]
    for uri in uris:
        result = run("--catalog-uri", uri, "--warehouse", f"file://{warehouse}",
                     "--catalog-name", CATALOG_NAME, "--table", "tutorial.events")
        what = f"read_table.py --catalog-uri {uri}"
        if result.returncode != 0:
            check(what, False, f"exit {result.returncode}\n{result.stderr}")
            continue
        lines = result.stdout.splitlines()
        check(f"{what}: rows", lines[:-1] == expected_rows, "got:\n" + "\n".join(lines))
        summary = json.loads(lines[-1]).get("__snapshot_summary") if lines else None
        ok = (
            isinstance(summary, dict)
            and summary.get("operation") == "append"
            and summary.get("added-records") == "1"
            and summary.get("total-records") == "4"
            and summary.get("changed-partition-count") == "1"
        )
        check(f"{what}: snapshot summary", ok, f"got: {lines[-1] if lines else ''}")

    # The day partitions are real: three files over two days.
    files = table.inspect.files().to_pylist()
    check("the table has 3 data files in 2 day partitions",
          len(files) == 3 and len({str(f["partition"]) for f in files}) == 2, repr(files))

    result = run("--catalog-uri", f"sqlite:{db}", "--catalog-name", CATALOG_NAME, "--table", "tutorial.nope")
    check("a missing table exits 2 with a message",
          result.returncode == 2 and "not found" in result.stderr and result.stdout == "",
          f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}")
    result = run("--catalog-uri", f"sqlite:{db}", "--catalog-name", "other", "--table", "tutorial.events")
    check("another catalog name does not see the table", result.returncode == 2, result.stderr)
    result = run("--catalog-uri", f"sqlite:{tmp}/absent.db", "--catalog-name", CATALOG_NAME, "--table", "tutorial.events")
    check("a missing catalog database exits 2", result.returncode == 2 and not os.path.exists(f"{tmp}/absent.db"),
          result.stderr)

    catalog.create_table("tutorial.empty", schema=schema)
    result = run("--catalog-uri", f"sqlite:{db}", "--catalog-name", CATALOG_NAME, "--table", "tutorial.empty")
    check("an empty table prints only a null summary",
          result.returncode == 0 and result.stdout == '{"__snapshot_summary":null}\n', result.stdout + result.stderr)

    if failed:
        print(f"(kept {tmp} for inspection)")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

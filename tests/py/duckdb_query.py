#!/usr/bin/env python3
"""Times an aggregate query on an Iceberg table with DuckDB's iceberg extension, for the
compaction benchmark's before and after.

Usage (run with the python that tests/py/setup-venv prints):

    duckdb_query.py --catalog-db /abs/path/catalog.db --table namespace.table \
                    --query "SELECT count(*) FROM {table}" [--runs 5]

`{table}` in the query becomes `iceberg_scan(<the table's current metadata file>)`. The
query runs `--runs` times in one connection after one untimed run; prints one JSON line:
{"best_ms": B, "median_ms": M, "rows": [[...], ...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_duckdb import extension, metadata_location  # noqa: E402

import duckdb  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog-db", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--query", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    location = metadata_location(args.catalog_db, args.table)
    db = duckdb.connect()
    db.execute("SET autoinstall_known_extensions = false")
    db.execute("SET autoload_known_extensions = false")
    for dist in ("duckdb-ext-avro", "duckdb-ext-iceberg"):
        db.execute(f"LOAD '{extension(dist)}'")
    query = args.query.replace("{table}", f"iceberg_scan('{location}')")
    rows = db.execute(query).fetchall()
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        db.execute(query).fetchall()
        times.append((time.perf_counter() - start) * 1000)
    print(
        json.dumps(
            {
                "best_ms": round(min(times), 1),
                "median_ms": round(statistics.median(times), 1),
                "rows": [[str(v) for v in row] for row in rows],
            }
        )
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Maintains an Iceberg table the way a pyiceberg user would, for the tests that check that
sluice's checkpoint survives someone else's maintenance.

Usage (run with the python that tests/py/setup-venv prints):

    maintain.py --warehouse /abs/warehouse --table namespace.table [--compact] [--expire]

The catalog is the SQL catalog on SQLite in the warehouse (`catalog.db`, named `sluice`).
--compact   rewrites the whole table in one overwrite snapshot (a compaction: the same rows,
            new files, a snapshot that carries none of sluice's summary).
--expire    expires every snapshot older than now that pyiceberg may expire (all but the
            current one and ref heads).
Prints one JSON line: {"snapshots_before": N, "snapshots_after": M, "rows": R}.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os

from pyiceberg.catalog.sql import SqlCatalog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--compact", action="store_true")
    parser.add_argument("--expire", action="store_true")
    args = parser.parse_args()
    warehouse = os.path.abspath(args.warehouse)
    catalog = SqlCatalog(
        "sluice",
        uri="sqlite:///" + os.path.join(warehouse, "catalog.db"),
        warehouse="file://" + warehouse,
    )
    table = catalog.load_table(args.table)
    before = len(table.metadata.snapshots)
    rows = table.scan().to_arrow()
    if args.compact:
        table.overwrite(rows)
        table = catalog.load_table(args.table)
    if args.expire:
        now = dt.datetime.now(tz=dt.timezone.utc)
        table.maintenance.expire_snapshots().older_than(now).commit()
        table = catalog.load_table(args.table)
    after = len(table.metadata.snapshots)
    print(json.dumps({"snapshots_before": before, "snapshots_after": after, "rows": rows.num_rows}))


if __name__ == "__main__":
    main()

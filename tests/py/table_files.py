#!/usr/bin/env python3
"""Prints what pyiceberg sees of an Iceberg table's data files, as one JSON line.

Usage (run with the python that tests/py/setup-venv prints):

    table_files.py --catalog-db /abs/warehouse/catalog.db --table namespace.table

The catalog is the SQL catalog on SQLite (named `sluice`), as in read_table.py.
OUTPUT: {"data_files": N, "partitions": P, "bytes": B, "records": R,
         "operations": ["append", ..., "replace"]}: the live data files of the current
snapshot, the distinct partitions they are in, their bytes and records (as the manifests
say), and the operation of every snapshot of the current history, oldest first.
"""

from __future__ import annotations

import argparse
import json
import os

from pyiceberg.catalog.sql import SqlCatalog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog-db", required=True)
    parser.add_argument("--table", required=True)
    args = parser.parse_args()
    db = os.path.abspath(args.catalog_db)
    catalog = SqlCatalog("sluice", uri="sqlite:///" + db)
    table = catalog.load_table(args.table)
    files = [task.file for task in table.scan().plan_files()]
    partitions = {repr(f.partition) for f in files}
    history = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        history.append(snapshot.summary.operation.value if snapshot.summary else None)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    print(
        json.dumps(
            {
                "data_files": len(files),
                "partitions": len(partitions),
                "bytes": sum(f.file_size_in_bytes for f in files),
                "records": sum(f.record_count for f in files),
                "operations": list(reversed(history)),
            }
        )
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Prints an Iceberg table's rows as JSON lines, read with DuckDB's iceberg extension (a third
reader, independent of sluice's and pyiceberg's).

Usage (run with the python that tests/py/setup-venv prints):

    read_duckdb.py --catalog-db /abs/path/catalog.db --table namespace.table

The table's current metadata file is looked up in the SQL catalog on SQLite (the
`iceberg_tables` table that iceberg-rust's `iceberg-catalog-sql` writes), and read with
`iceberg_scan`. The extensions come from the PyPI wheels `duckdb-ext-iceberg` and
`duckdb-ext-avro` (DuckDB cannot download them in the tests), loaded by file path.

OUTPUT: as tests/py/read_table.py's (same value formats, same row order), without the
snapshot summary line. A map is an object when every key is a string.

Exit codes: 0 on success; 2 when the catalog or the table is missing; 1 on any other error.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from importlib.metadata import files
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_table import jsonable  # noqa: E402


def fail(message: str) -> None:
    print(f"read_duckdb.py: {message}", file=sys.stderr)
    sys.exit(2)


def extension(dist: str) -> str:
    """The path of the .duckdb_extension file that the wheel `dist` installs."""
    for file in files(dist) or []:
        if file.name.endswith(".duckdb_extension"):
            return str(file.locate())
    fail(f"the wheel {dist} has no .duckdb_extension file")
    return ""


def metadata_location(catalog_db: str, table: str) -> str:
    if not os.path.exists(catalog_db):
        fail(f"no catalog database at {catalog_db}")
    namespace, _, name = table.rpartition(".")
    with sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True) as db:
        row = db.execute(
            "SELECT metadata_location FROM iceberg_tables"
            " WHERE table_namespace = ? AND table_name = ?",
            (namespace, name),
        ).fetchone()
    if row is None:
        fail(f"table {table} not found in {catalog_db}")
    location = row[0]
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return location[len(prefix):]
    return location


def plain(value: Any) -> Any:
    """DuckDB's Python values in the shapes `jsonable` expects (a map is a dict)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description="Print an Iceberg table's rows with DuckDB.")
    parser.add_argument("--catalog-db", required=True)
    parser.add_argument("--table", required=True, help="namespace.table")
    args = parser.parse_args()
    location = metadata_location(args.catalog_db, args.table)

    import duckdb

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET TimeZone = 'UTC'")
    for dist in ("duckdb-ext-avro", "duckdb-ext-iceberg"):
        con.execute(f"LOAD '{extension(dist)}'")
    result = con.execute("SELECT * FROM iceberg_scan(?)", [location])
    columns = [d[0] for d in result.description]
    rows = []
    for values in result.fetchall():
        raw = dict(zip(columns, values))
        row = {c: jsonable(plain(raw[c])) for c in columns}
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        rows.append((raw[columns[0]] if columns else None, line))
    try:
        rows.sort(key=lambda item: (item[0] is None, 0 if item[0] is None else item[0], item[1]))
    except TypeError:
        rows.sort(key=lambda item: (item[0] is None, item[1]))
    out = sys.stdout
    out.reconfigure(encoding="utf-8", newline="\n")
    for _, line in rows:
        out.write(line + "\n")
    out.flush()


if __name__ == "__main__":
    main()

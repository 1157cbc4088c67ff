#!/usr/bin/env python3
"""Prints an Iceberg table's rows as JSON lines, read with pyiceberg (an independent reader).

Usage (run with the python that tests/py/setup-venv prints):

    read_table.py --catalog-uri sqlite:////abs/path/catalog.db \
                  --warehouse file:///abs/path/warehouse \
                  --catalog-name NAME --table namespace.table
    read_table.py --catalog-uri postgres://user:pass@host:port/db --catalog-name NAME --table ..
    read_table.py --rest-uri http://host:port --catalog-name NAME --table namespace.table

The catalog is pyiceberg's SqlCatalog, which reads the same `iceberg_tables` /
`iceberg_namespace_properties` tables as iceberg-rust's `iceberg-catalog-sql`. `--catalog-name`
must be the name the writer gave its catalog (the `catalog_name` column).

--catalog-uri accepts a SQLAlchemy URL (`sqlite:////abs/path/catalog.db`) or an sqlx-style one
(`sqlite:/abs/path/catalog.db`, `sqlite:///abs/path/catalog.db`, `sqlite://rel/path.db`,
with or without a query such as `?mode=rwc`). SQLite URIs are read the way sqlx reads them:
everything after `sqlite://` (or `sqlite:`) up to `?` is the file path; a relative path is
taken from the current directory. Other schemes are passed to SQLAlchemy unchanged.
--warehouse takes a `file://` URI or a plain path; it is optional, since tables are found by
the metadata location recorded in the catalog.

OUTPUT (stdout), exactly:
  * One line per row: a JSON object whose keys are the table's top-level columns, in the
    table schema's order. Produced with `json.dumps(row, ensure_ascii=False,
    separators=(",", ":"))`, so there are no spaces: `{"a":1,"b":"x"}`. UTF-8, non-ASCII
    characters unescaped, lines end with "\n".
  * Rows are sorted by the first column (nulls last), ties broken by the row's JSON text, so
    the output is deterministic whatever the file layout.
  * Last line: `{"__snapshot_summary":{...}}`, the current snapshot's summary as stored in the
    table metadata (all values are strings, e.g. "added-records":"5", plus "operation"), or
    `{"__snapshot_summary":null}` when the table has no snapshot.

Value formats:
  * null                      -> null
  * boolean                   -> true / false
  * int, long                 -> JSON integer
  * float, double             -> JSON number; NaN and infinities -> "NaN", "Infinity", "-Infinity"
  * decimal(P, S)             -> string with exactly S digits after the point, never an
                                 exponent: decimal(10,2) 18 -> "18.00", -0.5 -> "-0.50"
  * string                    -> string
  * uuid                      -> string, "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  * binary, fixed             -> string, lowercase hex
  * date                      -> "YYYY-MM-DD"
  * time                      -> "HH:MM:SS.ffffff"
  * timestamptz               -> UTC, always 6 fractional digits and the offset "+00:00":
                                 "2026-01-09T10:04:00.000000+00:00"
                                 (= chrono's `to_rfc3339_opts(SecondsFormat::Micros, false)`
                                 of a `DateTime<Utc>`)
  * timestamp (no zone)       -> "2026-01-09T10:04:00.000000" (no offset)
  * struct                    -> object; list -> array; map -> object when every key is a
                                 string, else an array of [key, value] pairs

Exit codes: 0 on success; 2 when the catalog database, the namespace or the table is missing
(message on stderr); 1 on any other error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import math
import os
import sys
import uuid
from typing import Any
from urllib.parse import unquote


def fail(message: str, code: int = 2) -> None:
    print(f"read_table.py: {message}", file=sys.stderr)
    sys.exit(code)


def sqlalchemy_url(uri: str) -> tuple[str, str | None]:
    """Returns (SQLAlchemy URL, SQLite file path or None) for a catalog URI."""
    for scheme in ("postgres://", "postgresql://"):
        if uri.startswith(scheme):  # sqlx's form of a PostgreSQL URL
            return "postgresql+psycopg2://" + uri[len(scheme) :], None
    if not uri.startswith("sqlite:"):
        return uri, None
    rest = uri[len("sqlite:") :]
    if rest.startswith("//"):
        rest = rest[2:]
    path = rest.split("?", 1)[0].split("#", 1)[0]
    if path in ("", ":memory:") or path.startswith(":memory:"):
        fail(f"catalog URI {uri!r} names an in-memory database: there is nothing to read")
    path = unquote(path)
    if path.startswith("file:"):
        path = path[len("file:") :]
    # sqlx reads `sqlite:///abs` as `/abs` and `sqlite:////abs` as `//abs`: both absolute.
    path = os.path.abspath(path)
    return "sqlite:///" + path, path


def warehouse_uri(warehouse: str) -> str:
    if "://" in warehouse:
        return warehouse
    return "file://" + os.path.abspath(warehouse)


def _float(value: float) -> Any:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def jsonable(value: Any) -> Any:
    """Converts a value from pyarrow's `as_py()` to its JSON form (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return str(value)
        return format(value, "f")
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc)
            return value.isoformat(timespec="microseconds")
        return value.isoformat(timespec="microseconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat(timespec="microseconds")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # pyarrow returns a map as a list of (key, value) tuples.
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            if all(isinstance(k, str) for k, _ in value):
                return {k: jsonable(v) for k, v in value}
            return [[jsonable(k), jsonable(v)] for k, v in value]
        return [jsonable(item) for item in value]
    return str(value)


def add_catalog_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments that say which catalog to open (see [`open_catalog`])."""
    parser.add_argument("--catalog-uri", default=None, help="sqlite:/abs/catalog.db or postgres://... (sqlx or SQLAlchemy style)")
    parser.add_argument("--rest-uri", default=None, help="a REST catalog's URL, instead of --catalog-uri")
    parser.add_argument("--warehouse", default=None, help="file:///abs/warehouse (optional)")
    parser.add_argument("--catalog-name", required=True, help="the catalog_name the writer used")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="a catalog/FileIO property (s3.endpoint=..., ssl.cabundle=..., credential=...)")


def open_catalog(args: argparse.Namespace) -> tuple[Any, str]:
    """The catalog the arguments of [`add_catalog_arguments`] name, and its URL."""
    extra = dict(p.split("=", 1) for p in args.property)
    if (args.catalog_uri is None) == (args.rest_uri is None):
        fail("give one of --catalog-uri and --rest-uri")
    if args.rest_uri is not None:
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(args.catalog_name, uri=args.rest_uri, **extra), args.rest_uri
    url, sqlite_path = sqlalchemy_url(args.catalog_uri)
    if sqlite_path is not None and not os.path.isfile(sqlite_path):
        fail(f"catalog database {sqlite_path} does not exist (from --catalog-uri {args.catalog_uri})")
    from pyiceberg.catalog.sql import SqlCatalog

    properties = {"uri": url, "init_catalog_tables": "false"}
    if args.warehouse:
        properties["warehouse"] = warehouse_uri(args.warehouse)
    return SqlCatalog(args.catalog_name, **properties, **extra), url


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Print an Iceberg table's rows as JSON lines (see the module docstring)."
    )
    add_catalog_arguments(parser)
    parser.add_argument("--table", required=True, help="namespace.table (the namespace may be dotted)")
    args = parser.parse_args()

    if "." not in args.table:
        fail(f"--table {args.table!r} must be namespace.table")
    namespace, _, name = args.table.rpartition(".")
    identifier = (*namespace.split("."), name)
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog, url = open_catalog(args)
    try:
        table = catalog.load_table(identifier)
    except (NoSuchTableError, NoSuchNamespaceError) as error:
        fail(
            f"table {args.table} not found in catalog {args.catalog_name!r} at {url}: {error}"
        )
    except Exception as error:  # e.g. the catalog tables do not exist at all
        if type(error).__name__ in ("OperationalError", "ProgrammingError"):
            fail(f"cannot read catalog {args.catalog_name!r} at {url}: {error}")
        raise

    columns = [field.name for field in table.schema().fields]
    arrow = table.scan().to_arrow().select(columns)
    snapshot = table.current_snapshot()
    summary = None
    if snapshot is not None and snapshot.summary is not None:
        summary = snapshot.summary.model_dump()
    write_rows(arrow.to_pylist(), columns, summary)


def write_rows(raw_rows: list[dict[str, Any]], columns: list[str], summary: Any) -> None:
    """Prints `raw_rows` (dicts of Python values, as pyarrow's `to_pylist()` gives) as JSON
    lines in the order of the module docstring, then the `__snapshot_summary` line. Shared
    with read_spark.py, so that both readers print the same."""
    rows = []
    for raw in raw_rows:
        row = {column: jsonable(raw[column]) for column in columns}
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        rows.append((raw[columns[0]] if columns else None, line))

    def key(item: tuple[Any, str]) -> tuple[bool, Any, str]:
        first, line = item
        return (first is None, 0 if first is None else first, line)

    try:
        rows.sort(key=key)
    except TypeError:  # a first column that does not order (a struct, a map): by JSON text
        rows.sort(key=lambda item: (item[0] is None, item[1]))

    out = sys.stdout
    out.reconfigure(encoding="utf-8", newline="\n")  # whatever the locale
    for _, line in rows:
        out.write(line + "\n")
    out.write(json.dumps({"__snapshot_summary": summary}, ensure_ascii=False, separators=(",", ":")) + "\n")
    out.flush()


if __name__ == "__main__":
    main()

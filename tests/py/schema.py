#!/usr/bin/env python3
"""Reads, and changes the way a pyiceberg user would, the schema of an Iceberg table: the
evolution tests check what sluice added, and change the table under a running sluice.

Usage (run with the python that tests/py/setup-venv prints):

    schema.py CATALOG --table namespace.table \
              [--add NAME:TYPE]... [--rename OLD:NEW]... [--widen NAME:TYPE]...

CATALOG is given as to read_table.py (`--catalog-uri` or `--rest-uri`, `--catalog-name`,
optionally `--warehouse` and `--property`).
TYPE is one of string, long, int, double, boolean. The changes (if any) are committed in one
schema update, then the table's current schema is printed as one JSON line:
{"schema_id": N, "fields": [{"id": 1, "name": "a", "type": "string"}, ...]}, top-level
fields in order, `type` as pyiceberg prints it (`long`, `struct<...>`, `list<string>`).
"""

from __future__ import annotations

import argparse
import json

from read_table import add_catalog_arguments, open_catalog
from pyiceberg.types import BooleanType, DoubleType, IntegerType, LongType, StringType

TYPES = {
    "string": StringType(),
    "long": LongType(),
    "int": IntegerType(),
    "double": DoubleType(),
    "boolean": BooleanType(),
}


def pairs(values: list[str]) -> list[tuple[str, str]]:
    return [tuple(v.split(":", 1)) for v in values]  # type: ignore[misc]


def main() -> None:
    parser = argparse.ArgumentParser()
    add_catalog_arguments(parser)
    parser.add_argument("--table", required=True)
    parser.add_argument("--add", action="append", default=[])
    parser.add_argument("--rename", action="append", default=[])
    parser.add_argument("--widen", action="append", default=[])
    args = parser.parse_args()
    catalog, _ = open_catalog(args)
    table = catalog.load_table(args.table)
    if args.add or args.rename or args.widen:
        with table.update_schema() as update:
            for name, ty in pairs(args.add):
                update.add_column(name, TYPES[ty])
            for old, new in pairs(args.rename):
                update.rename_column(old, new)
            for name, ty in pairs(args.widen):
                update.update_column(name, field_type=TYPES[ty])
        table = catalog.load_table(args.table)
    schema = table.schema()
    fields = [
        {"id": f.field_id, "name": f.name, "type": str(f.field_type)} for f in schema.fields
    ]
    print(json.dumps({"schema_id": schema.schema_id, "fields": fields}))


if __name__ == "__main__":
    main()

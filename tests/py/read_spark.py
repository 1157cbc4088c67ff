#!/usr/bin/env python3
"""Prints an Iceberg table's rows as JSON lines, read by Java Iceberg in Spark (a reader
independent of sluice's, pyiceberg's and DuckDB's).

Usage (run with the python that tests/py/setup-spark prints):

    read_spark.py --warehouse /abs/warehouse --table namespace.table [--catalog-name sluice]

The table's current metadata file is looked up in the SQL catalog on SQLite of the warehouse
(`WAREHOUSE/catalog.db`, table `iceberg_tables`, the row of `--catalog-name`, namespace and
name), and Spark loads the table from that file (`spark.read.format("iceberg").load(path)`:
Iceberg's static table operations, no catalog; there is no SQLite JDBC driver for Java here).
Spark runs in a JVM that pyspark starts: `local[1]`, 512 MiB, C1 only, no UI, UTC time zone,
logs on stderr at ERROR, scratch files in a temporary folder removed at the end, and the
Iceberg runtime jar that setup-spark put in the venv
(`sys.prefix/jars/iceberg-spark-runtime.jar`, or --jar). Nothing is fetched from a network.

OUTPUT: exactly as tests/py/read_table.py's (the same value formats through its `jsonable`,
the same row order through its `write_rows`), columns in the table schema's order. Spark's
values are first put in the shapes pyarrow gives (a struct a dict, a map a list of (key,
value) pairs in the file's order, a timestamptz an aware UTC datetime), guided by the Spark
schema. The last line is the current snapshot's summary, taken from the same metadata file
(as stored there). Iceberg's `time` has no Spark type: a table with one fails to load.

Exit codes: 0 on success; 2 when the warehouse's catalog database or the table is missing; 1
on any other error (Spark's own, with its message on stderr).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from typing import Any

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_table import write_rows  # noqa: E402


def fail(message: str, code: int = 2) -> None:
    """Prints `message` to stderr and exits with `code`."""
    print(f"read_spark.py: {message}", file=sys.stderr)
    sys.exit(code)


def metadata_location(warehouse: str, catalog_name: str, table: str) -> str:
    """The current metadata file of `table` (`namespace.name`) in the warehouse's SQLite
    catalog, as a path or URI Hadoop's file system reads."""
    catalog_db = os.path.join(warehouse, "catalog.db")
    if not os.path.isfile(catalog_db):
        fail(f"no catalog database at {catalog_db}")
    if "." not in table:
        fail(f"--table {table!r} must be namespace.table")
    namespace, _, name = table.rpartition(".")
    with sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True) as db:
        row = db.execute(
            "SELECT metadata_location FROM iceberg_tables"
            " WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            (catalog_name, namespace, name),
        ).fetchone()
    if row is None or not row[0]:
        fail(f"table {table} of catalog {catalog_name!r} not found in {catalog_db}")
    return row[0]


def snapshot_summary(location: str) -> Any:
    """The current snapshot's summary in the metadata file at `location` (None if no
    snapshot), read as plain JSON."""
    path = location[len("file://"):] if location.startswith("file://") else location
    path = path[len("file:"):] if path.startswith("file:") else path
    with open(path, encoding="utf-8") as file:
        metadata = json.load(file)
    current = metadata.get("current-snapshot-id")
    for snapshot in metadata.get("snapshots") or []:
        if current is not None and snapshot.get("snapshot-id") == current:
            return snapshot.get("summary")
    return None


# Spark's logging: errors only, on stderr (stdout carries the rows). The `org.apache` logger
# is configured too, else Spark's shell logging says it changes the level, on every start.
LOG4J2 = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.apache.name = org.apache
logger.apache.level = error
"""


def start_spark(jar: str, scratch: str) -> Any:
    """A local Spark session with the Iceberg runtime jar, small and quiet, in UTC, its
    scratch files and logging configuration in the folder `scratch`."""
    os.environ["TZ"] = "UTC"  # Spark gives a timestamptz as a naive datetime in local time
    time.tzset()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log_config = os.path.join(scratch, "log4j2.properties")
    with open(log_config, "w", encoding="utf-8") as file:
        file.write(LOG4J2)
    from pyspark.sql import SparkSession

    conf = {
        "spark.jars": jar,
        "spark.local.dir": scratch,
        "spark.driver.memory": "512m",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "1",
        # A short run: the C1 compiler only and the serial collector halve its time.
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        f" -Dlog4j2.configurationFile=file:{log_config}",
    }
    builder = SparkSession.builder.master("local[1]").appName("sluice-read-spark")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def has_map(data_type: Any) -> bool:
    """Whether a Spark type is, or holds at any depth, a map."""
    from pyspark.sql import types

    if isinstance(data_type, types.MapType):
        return True
    if isinstance(data_type, types.ArrayType):
        return has_map(data_type.elementType)
    if isinstance(data_type, types.StructType):
        return any(has_map(f.dataType) for f in data_type.fields)
    return False


def entries(column: Any, data_type: Any) -> Any:
    """`column` (of `data_type`) with each map in it, at any depth, as an array of (key, value)
    structs in the map's own order: Spark hands a map to Python as a dict, whose order is the
    JVM's hash order, not the file's (which pyiceberg keeps)."""
    from pyspark.sql import functions as F, types

    if not has_map(data_type):
        return column
    if isinstance(data_type, types.MapType):
        return F.transform(F.map_entries(column), lambda e: F.struct(
            entries(e["key"], data_type.keyType).alias("key"),
            entries(e["value"], data_type.valueType).alias("value")))
    if isinstance(data_type, types.ArrayType):
        return F.transform(column, lambda item: entries(item, data_type.elementType))
    fields = [entries(column[f.name], f.dataType).alias(f.name) for f in data_type.fields]
    return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*fields))


def plain(value: Any, data_type: Any) -> Any:
    """A Spark value of `data_type` (its maps made arrays by `entries`) in the shape pyarrow's
    `to_pylist()` gives it."""
    from pyspark.sql import types

    if value is None:
        return None
    if isinstance(data_type, types.StructType):
        return {f.name: plain(value[f.name], f.dataType) for f in data_type.fields}
    if isinstance(data_type, types.ArrayType):
        return [plain(item, data_type.elementType) for item in value]
    if isinstance(data_type, types.MapType):
        return [(plain(e["key"], data_type.keyType), plain(e["value"], data_type.valueType)) for e in value]
    if isinstance(data_type, types.TimestampType):  # Iceberg's timestamptz, in UTC (TZ above)
        return value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def read(spark: Any, location: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The rows of the table whose metadata file is at `location`, as dicts of pyarrow-shaped
    values, and the table's top-level (Spark) fields."""
    from pyspark.sql import functions as F

    frame = spark.read.format("iceberg").load(location)
    fields = frame.schema.fields
    columns = [F.col("`" + f.name.replace("`", "``") + "`") for f in fields]
    frame = frame.select(*[entries(c, f.dataType).alias(f.name) for c, f in zip(columns, fields)])
    rows = [{f.name: plain(row[i], f.dataType) for i, f in enumerate(fields)} for row in frame.collect()]
    return rows, fields


def main() -> None:
    """Reads the table with Spark and prints it (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Print an Iceberg table's rows, read by Spark.")
    parser.add_argument("--warehouse", required=True, help="the warehouse folder (with catalog.db)")
    parser.add_argument("--table", required=True, help="namespace.table (the namespace may be dotted)")
    parser.add_argument("--catalog-name", default="sluice", help="the catalog_name the writer used")
    parser.add_argument("--jar", default=os.path.join(sys.prefix, "jars", "iceberg-spark-runtime.jar"),
                        help="the Iceberg Spark runtime jar (default: the one setup-spark made)")
    args = parser.parse_args()
    if not os.path.isfile(args.jar):
        fail(f"no Iceberg runtime jar at {args.jar}: run tests/py/setup-spark", 1)
    warehouse = args.warehouse[len("file://"):] if args.warehouse.startswith("file://") else args.warehouse
    location = metadata_location(os.path.abspath(warehouse), args.catalog_name, args.table)

    scratch = tempfile.mkdtemp(prefix="sluice-read-spark-")
    try:
        spark = start_spark(args.jar, scratch)
        try:
            raw_rows, fields = read(spark, location)
        except Exception as error:  # Py4JJavaError, AnalysisException: Java's message and trace
            fail(f"Spark could not read {args.table} from {location}: {error}", 1)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    write_rows(raw_rows, [f.name for f in fields], snapshot_summary(location))


if __name__ == "__main__":
    main()

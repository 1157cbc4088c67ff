#!/usr/bin/env python3
"""Relocates a package prefix inside a jar's class files: a small jarjar, for the Iceberg runtime
jar that tests/py/setup-spark installs.

Usage:

    reshade_jar.py --input IN.jar --output OUT.jar --relocate FROM=TO [--relocate FROM=TO ...]

FROM and TO are internal (slash-separated) package prefixes, e.g.
`org/apache/iceberg/shaded/com/fasterxml/jackson/=org/apache/iceberg/shaded/org/apache/parquet/shaded/com/fasterxml/jackson/`.
In every `.class` entry (multi-release ones under META-INF/versions/ too, but not
`module-info.class`), each CONSTANT_Utf8 of the constant pool that contains FROM, or its dotted
form (`a.b.c.`), has every occurrence replaced by TO (or its dotted form): class names,
descriptors, signatures and string literals alike, as jarjar does. Entries whose *names* start
with FROM are renamed to start with TO, and so are META-INF/services files named after a
relocated class. Every other entry is copied unchanged.

Why: the iceberg-spark-runtime jar shipped in the PyPI package snowpark-connect-deps-iceberg
refers to Jackson as `org.apache.iceberg.shaded.com.fasterxml.jackson.*`, but its Jackson classes
are only at `org.apache.iceberg.shaded.org.apache.parquet.shaded.com.fasterxml.jackson.*`, so
Spark fails with NoClassDefFoundError on the first metadata file it parses.

The output is deterministic: the same entries in the same order with the same timestamps,
deflated at zlib's default level. It is written to OUT.jar.tmp and renamed, so an interrupted
run leaves no half-written OUT.jar.

Exit codes: 0 on success; 1 with a message on stderr on any error (a missing input, a class
file that does not parse, a relocation that changed nothing).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import warnings
import zipfile

# Constant-pool tags and the size of their payload after the tag byte (Utf8 is variable).
UTF8 = 1
FIXED_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2,
               17: 4, 18: 4, 19: 2, 20: 2}
TWO_SLOTS = {5, 6}  # long and double take two constant-pool indices


def fail(message: str) -> None:
    """Prints `message` to stderr and exits with status 1."""
    print(f"reshade_jar.py: {message}", file=sys.stderr)
    sys.exit(1)


def rewrite_utf8(value: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    """`value` with every FROM of `pairs` replaced by its TO."""
    for old, new in pairs:
        if old in value:
            value = value.replace(old, new)
    return value


def rewrite_class(data: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes:
    """The class file `data` with its constant pool's Utf8 entries rewritten; the rest (after
    the pool) is copied as is, since it only refers to the pool by index."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file (bad magic)")
    count = struct.unpack_from(">H", data, 8)[0]
    out = [data[:10]]
    pos, index = 10, 1
    while index < count:
        tag = data[pos]
        if tag == UTF8:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            value = rewrite_utf8(data[pos + 3 : pos + 3 + length], pairs)
            if len(value) > 0xFFFF:
                raise ValueError("a relocated constant is longer than 65535 bytes")
            out.append(bytes([UTF8]) + struct.pack(">H", len(value)) + value)
            pos += 3 + length
        elif tag in FIXED_SIZES:
            out.append(data[pos : pos + 1 + FIXED_SIZES[tag]])
            pos += 1 + FIXED_SIZES[tag]
        else:
            raise ValueError(f"unknown constant-pool tag {tag} at byte {pos}")
        index += 2 if tag in TWO_SLOTS else 1
    out.append(data[pos:])
    return b"".join(out)


def rename(name: str, pairs: list[tuple[str, str]]) -> str:
    """The entry name `name` after relocation: a class path or a services file name."""
    for old, new in pairs:
        if name.startswith(old) or name.startswith("META-INF/versions/") and old in name:
            return name.replace(old, new, 1)
        dotted_old, dotted_new = old.replace("/", "."), new.replace("/", ".")
        if name.startswith("META-INF/services/" + dotted_old):
            return name.replace(dotted_old, dotted_new, 1)
    return name


def relocate(source: str, target: str, relocations: list[tuple[str, str]]) -> int:
    """Writes `target` from `source` with `relocations` applied; returns how many class files
    changed."""
    byte_pairs = []
    for old, new in relocations:
        byte_pairs.append((old.encode(), new.encode()))
        byte_pairs.append((old.replace("/", ".").encode(), new.replace("/", ".").encode()))
    changed = 0
    # The input has duplicate entries (two LICENSE, two NOTICE): copied as they are.
    warnings.filterwarnings("ignore", message="Duplicate name", category=UserWarning)
    with zipfile.ZipFile(source) as jar_in, zipfile.ZipFile(target + ".tmp", "w") as jar_out:
        for info in jar_in.infolist():
            data = jar_in.read(info)
            if info.filename.endswith(".class") and not info.filename.endswith("module-info.class"):
                try:
                    new_data = rewrite_class(data, byte_pairs)
                except (ValueError, IndexError, struct.error) as error:
                    raise ValueError(f"{info.filename}: {error}") from error
                changed += new_data != data
                data = new_data
            out_info = zipfile.ZipInfo(rename(info.filename, relocations), info.date_time)
            out_info.compress_type = zipfile.ZIP_DEFLATED
            out_info.external_attr = info.external_attr
            jar_out.writestr(out_info, data)
    os.replace(target + ".tmp", target)
    return changed


def main() -> None:
    """Parses the arguments and relocates (see the module docstring)."""
    parser = argparse.ArgumentParser(description="Relocate packages inside a jar (see the docstring).")
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--relocate", action="append", required=True, metavar="FROM=TO")
    args = parser.parse_args()
    relocations = []
    for spec in args.relocate:
        old, sep, new = spec.partition("=")
        if not sep or not old.endswith("/") or not new.endswith("/"):
            fail(f"--relocate {spec!r}: give FROM=TO, both package prefixes ending in '/'")
        relocations.append((old, new))
    if not os.path.isfile(args.input):
        fail(f"input jar {args.input} does not exist")
    try:
        changed = relocate(args.input, args.output, relocations)
    except (ValueError, OSError, zipfile.BadZipFile) as error:
        fail(f"cannot relocate {args.input}: {error}")
    if changed == 0:
        fail(f"no class file in {args.input} refers to {[old for old, _ in relocations]}")
    print(f"reshade_jar.py: {changed} class files relocated into {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()

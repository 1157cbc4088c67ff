//! Java Iceberg, through Spark: a third reader of the tables sluice writes, independent of
//! sluice's, pyiceberg's and DuckDB's. `tests/py/setup-spark` makes (once) a venv with
//! PySpark and the Iceberg runtime jar; `tests/py/read_spark.py` reads a table with it and
//! prints the rows as `tests/py/read_table.py` does, so they compare with
//! [`crate::pyiceberg::read_table`]'s.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::fixture::text;
use crate::repo_root;

/// The Spark venv's Python interpreter; runs `setup-spark` the first time in this process
/// (which makes the venv and the jar if they are missing). Panics if it fails.
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let setup = Command::new(repo_root().join("tests/py/setup-spark"))
            .output()
            .unwrap();
        assert!(setup.status.success(), "setup-spark: {}", text(&setup));
        String::from_utf8_lossy(&setup.stdout)
            .lines()
            .last()
            .expect("setup-spark printed the venv's python")
            .trim()
            .into()
    })
}

/// The rows of `table` (`namespace.name`) in the SQL catalog on SQLite of `warehouse`
/// (catalog `sluice`), as Spark reads them from the table's current metadata file: one
/// JSON object a row, in the form and order of [`crate::pyiceberg::read_table`]'s.
pub fn read_table(warehouse: &Path, table: &str) -> Vec<Value> {
    let warehouse = std::fs::canonicalize(warehouse).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("tests/py/read_spark.py"))
        .arg("--warehouse")
        .arg(&warehouse)
        .args(["--table", table])
        .output()
        .unwrap();
    assert!(out.status.success(), "read_spark.py: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("__snapshot_summary").is_none())
        .collect()
}

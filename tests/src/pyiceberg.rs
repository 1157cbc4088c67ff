//! pyiceberg, an Iceberg reader independent of sluice's, in a Python venv made by
//! `tests/py/setup-venv` (once; later calls only check it): the tests read back what sluice
//! wrote with it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::fixture::text;
use crate::repo_root;

/// The venv's Python interpreter, with pyiceberg; makes the venv if it is missing. Panics
/// if `setup-venv` fails.
pub fn python() -> PathBuf {
    let setup = Command::new(repo_root().join("tests/py/setup-venv"))
        .output()
        .unwrap();
    assert!(setup.status.success(), "setup-venv: {}", text(&setup));
    String::from_utf8_lossy(&setup.stdout)
        .lines()
        .last()
        .unwrap()
        .trim()
        .into()
}

/// The rows of `table` (`namespace.name`) in the SQL catalog on SQLite of `warehouse`, as
/// pyiceberg reads them (`tests/py/read_table.py`), one JSON object a row.
pub fn read_table(warehouse: &Path, table: &str) -> Vec<Value> {
    let python = python();
    let warehouse = std::fs::canonicalize(warehouse).unwrap();
    let out = Command::new(python)
        .arg(repo_root().join("tests/py/read_table.py"))
        .args([
            "--catalog-uri",
            &format!("sqlite:{}/catalog.db", warehouse.display()),
        ])
        .args(["--warehouse", &format!("file://{}", warehouse.display())])
        .args(["--catalog-name", "sluice", "--table", table])
        .output()
        .unwrap();
    assert!(out.status.success(), "read_table.py: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("__snapshot_summary").is_none())
        .collect()
}

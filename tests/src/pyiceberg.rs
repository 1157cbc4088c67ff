//! pyiceberg, an Iceberg reader independent of sluice's, in a Python venv made by
//! `tests/py/setup-venv` (once; later calls only check it): the tests read back what sluice
//! wrote with it (and with DuckDB, from the same venv).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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

/// Where the catalog of a table is, for pyiceberg.
#[derive(Debug, Clone, Copy)]
pub enum CatalogAt<'a> {
    /// The SQL catalog on SQLite inside a warehouse folder, named `sluice` (the default).
    Warehouse(&'a Path),
    /// A SQL catalog at an sqlx URL (`postgres://…`), named `name`.
    Sql {
        /// The URL.
        uri: &'a str,
        /// The catalog's name.
        name: &'a str,
    },
    /// A REST catalog, named `name`.
    Rest {
        /// Its URL.
        url: &'a str,
        /// The catalog's name.
        name: &'a str,
    },
}

/// The rows of `table` (`namespace.name`) in the SQL catalog on SQLite of `warehouse`, as
/// pyiceberg reads them (`tests/py/read_table.py`), one JSON object a row.
pub fn read_table(warehouse: &Path, table: &str) -> Vec<Value> {
    read_table_in(CatalogAt::Warehouse(warehouse), table)
}

/// The rows of `table` (`namespace.name`) in `catalog`, as pyiceberg reads them.
pub fn read_table_in(catalog: CatalogAt<'_>, table: &str) -> Vec<Value> {
    read_table_with(catalog, table, &[])
}

/// The rows of `table` in `catalog`, as pyiceberg reads them with more catalog and FileIO
/// `properties` (`s3.endpoint`, `ssl.cabundle`, `credential`...).
pub fn read_table_with(
    catalog: CatalogAt<'_>,
    table: &str,
    properties: &[(&str, &str)],
) -> Vec<Value> {
    let mut command = Command::new(python());
    command.arg(repo_root().join("tests/py/read_table.py"));
    for (key, value) in properties {
        command.arg(format!("--property={key}={value}"));
    }
    catalog_args(&mut command, catalog);
    let out = command.args(["--table", table]).output().unwrap();
    assert!(out.status.success(), "read_table.py: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v.get("__snapshot_summary").is_none())
        .collect()
}

/// The arguments that name `catalog` to `tests/py/read_table.py` (and the scripts that
/// share its catalog arguments).
fn catalog_args(command: &mut Command, catalog: CatalogAt<'_>) {
    match catalog {
        CatalogAt::Warehouse(warehouse) => {
            let warehouse = std::fs::canonicalize(warehouse).unwrap();
            command
                .args([
                    "--catalog-uri",
                    &format!("sqlite:{}/catalog.db", warehouse.display()),
                ])
                .args(["--warehouse", &format!("file://{}", warehouse.display())])
                .args(["--catalog-name", "sluice"]);
        }
        CatalogAt::Sql { uri, name } => {
            command.args(["--catalog-uri", uri, "--catalog-name", name]);
        }
        CatalogAt::Rest { url, name } => {
            command.args(["--rest-uri", url, "--catalog-name", name]);
        }
    }
}

/// The rows of `table` (`namespace.name`) in the SQL catalog on SQLite of `warehouse`, as
/// DuckDB's iceberg extension reads them (`tests/py/read_duckdb.py`, the same JSON as
/// [`read_table`]'s).
pub fn read_duckdb(warehouse: &Path, table: &str) -> Vec<Value> {
    let warehouse = std::fs::canonicalize(warehouse).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("tests/py/read_duckdb.py"))
        .arg("--catalog-db")
        .arg(warehouse.join("catalog.db"))
        .args(["--table", table])
        .output()
        .unwrap();
    assert!(out.status.success(), "read_duckdb.py: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

/// What pyiceberg sees of `table`'s data files in the SQLite catalog of `warehouse`
/// (`tests/py/table_files.py`): `data_files`, `partitions`, `bytes`, `records`, and the
/// `operations` of the current history, oldest first.
pub fn table_files(warehouse: &Path, table: &str) -> Value {
    let warehouse = std::fs::canonicalize(warehouse).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("tests/py/table_files.py"))
        .arg("--catalog-db")
        .arg(warehouse.join("catalog.db"))
        .args(["--table", table])
        .output()
        .unwrap();
    assert!(out.status.success(), "table_files.py: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Maintains `table` in the SQLite catalog of `warehouse` with pyiceberg
/// (`tests/py/maintain.py`): `--compact` and/or `--expire`. Returns its report
/// (`snapshots_before`, `snapshots_after`, `rows`).
pub fn maintain(warehouse: &Path, table: &str, options: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(repo_root().join("tests/py/maintain.py"))
        .arg("--warehouse")
        .arg(warehouse)
        .args(["--table", table])
        .args(options)
        .output()
        .unwrap();
    assert!(out.status.success(), "maintain.py: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The current schema of `table` in the SQLite catalog of `warehouse`, after committing
/// `changes` to it with pyiceberg first (see [`schema_in`]).
pub fn schema(warehouse: &Path, table: &str, changes: &[&str]) -> Value {
    schema_in(CatalogAt::Warehouse(warehouse), table, changes)
}

/// The current schema of `table` in `catalog`, after committing `changes` to it with
/// pyiceberg first (`tests/py/schema.py`: `--add name:type`, `--rename old:new`, `--widen
/// name:type`): `{"schema_id", "fields": [{"id", "name", "type"}]}`.
pub fn schema_in(catalog: CatalogAt<'_>, table: &str, changes: &[&str]) -> Value {
    let mut command = Command::new(python());
    command.arg(repo_root().join("tests/py/schema.py"));
    catalog_args(&mut command, catalog);
    let out = command
        .args(["--table", table])
        .args(changes)
        .output()
        .unwrap();
    assert!(out.status.success(), "schema.py: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A REST catalog server (`tests/py/rest_catalog.py`: the REST protocol over pyiceberg's SQL
/// catalog) on a free loopback port, sharing a warehouse folder; stopped when dropped.
#[derive(Debug)]
pub struct RestCatalog {
    /// Its URL.
    pub url: String,
    server: Child,
    /// How it was started, to start it again ([`RestCatalog::restart`]).
    warehouse: PathBuf,
    options: Vec<String>,
}

impl RestCatalog {
    /// Starts a server over `warehouse` (created if absent).
    pub fn start(warehouse: &Path) -> RestCatalog {
        Self::start_with(warehouse, &[])
    }

    /// Starts a server over `warehouse` with more options of `rest_catalog.py`
    /// (`--tls-cert`, `--tls-key`, `--token`, `--client`).
    pub fn start_with(warehouse: &Path, options: &[&str]) -> RestCatalog {
        std::fs::create_dir_all(warehouse).unwrap();
        let warehouse = std::fs::canonicalize(warehouse).unwrap();
        let options: Vec<String> = options.iter().map(ToString::to_string).collect();
        let (url, server) = serve(&warehouse, "0", &options);
        RestCatalog {
            url,
            server,
            warehouse,
            options,
        }
    }

    /// Stops the server: the catalog is away until [`RestCatalog::restart`].
    pub fn stop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }

    /// Freezes the server (SIGSTOP): it still accepts connections (the kernel does) but
    /// answers nothing until [`RestCatalog::thaw`], as a catalog that hangs.
    pub fn freeze(&mut self) {
        self.signal("STOP");
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&mut self) {
        self.signal("CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.server.id().to_string();
        let sent = Command::new("kill").args(["-s", signal, &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -s {signal} {pid}");
    }

    /// Starts the server again on the same port, over the same warehouse.
    pub fn restart(&mut self) {
        let port = self.url.rsplit(':').next().unwrap().trim_end_matches('/');
        let (url, server) = serve(&self.warehouse, port, &self.options);
        assert_eq!(url, self.url, "the same address");
        self.server = server;
    }
}

/// Starts `rest_catalog.py` on `port` over `warehouse`: its URL and its process.
fn serve(warehouse: &Path, port: &str, options: &[String]) -> (String, Child) {
    let mut server = Command::new(python())
        .arg(repo_root().join("tests/py/rest_catalog.py"))
        .args(["--port", port, "--warehouse"])
        .arg(warehouse)
        .args(options)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let url = first
        .trim()
        .strip_prefix("listening on ")
        .expect("the server's address")
        .to_string();
    (url, server)
}

impl Drop for RestCatalog {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

//! A Schema Registry for the tests of Avro topics, and records produced through it by an
//! independent client.
//!
//! No registry that speaks the Confluent REST API can be installed from the registries CI
//! reaches (crates.io, PyPI, npm, Debian): Confluent's and Apicurio's are on Maven Central
//! and Docker Hub only, Karapace is not on PyPI, the one Rust server is yanked. So the
//! tests run a stand-in, `tests/py/schema_registry.py`, as its own process: it keeps to
//! the documented API (ids, subjects, versions, Confluent's error codes, basic and bearer
//! auth, HTTPS) and can fail or slow down on purpose. The records are written by
//! confluent-kafka-python's `AvroSerializer` and `ProtobufSerializer`
//! (`tests/py/produce_registry.py`, in the venv `tests/py/setup-registry-venv` makes), so
//! the wire format is not sluice's on both sides.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::fixture::text;
use crate::repo_root;

/// A running stand-in registry; stopped when dropped.
pub struct SchemaRegistry {
    child: Child,
    /// Its base URL, `http://127.0.0.1:PORT` (or `https://`).
    pub url: String,
}

impl SchemaRegistry {
    /// Starts a registry with the stand-in's options `args` (`--user U:P`, `--token T`,
    /// `--cert F --key F`, `--delay-ms N`, `--fail-first N`).
    pub fn start(args: &[&str]) -> SchemaRegistry {
        let mut child = Command::new("python3")
            .arg(repo_root().join("tests/py/schema_registry.py"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs the stand-in registry");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the registry said {line:?}"))
            .to_string();
        SchemaRegistry { child, url }
    }
}

impl Drop for SchemaRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The python of the producer's venv (made once by `tests/py/setup-registry-venv`).
pub fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let setup = Command::new(repo_root().join("tests/py/setup-registry-venv"))
            .output()
            .unwrap();
        assert!(
            setup.status.success(),
            "setup-registry-venv: {}",
            text(&setup)
        );
        let out = String::from_utf8_lossy(&setup.stdout);
        PathBuf::from(out.lines().last().unwrap().trim())
    })
}

/// Produces `records` (JSON objects) to `topic` as Avro of `schema` (its JSON text), with
/// confluent-kafka-python's `AvroSerializer` registering it under `<topic>-value` at
/// `registry`; `extra` adds producer options (`--auth U:P`, `--ca F`).
pub fn produce_avro(
    bootstrap: &str,
    registry: &str,
    topic: &str,
    schema: &str,
    records: &[Value],
    extra: &[&str],
) {
    let files = [("schema.avsc", schema)];
    let args = ["--format", "avro", "--schema"];
    produce(bootstrap, registry, topic, &files, &args, records, extra);
}

/// Produces `records` (JSON objects, as protobuf's JSON mapping reads them) to `topic` as
/// Protobuf messages `message` of the first of `files` (name, `.proto` text; the others
/// are the files it imports), with confluent-kafka-python's `ProtobufSerializer`
/// registering them (the imports as subjects of their own) at `registry`.
pub fn produce_protobuf(
    bootstrap: &str,
    registry: &str,
    topic: &str,
    files: &[(&str, &str)],
    message: &str,
    records: &[Value],
) {
    let args = ["--format", "protobuf", "--message", message, "--proto"];
    produce(bootstrap, registry, topic, files, &args, records, &[]);
}

/// Writes `files` to a folder of their own, then runs `produce_registry.py` with `args`
/// and the first file's path, and `extra`, writing `records` to its input.
fn produce(
    bootstrap: &str,
    registry: &str,
    topic: &str,
    files: &[(&str, &str)],
    args: &[&str],
    records: &[Value],
    extra: &[&str],
) {
    let dir = std::env::temp_dir().join(format!("sluice-produce-{}-{topic}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let mut child = Command::new(python())
        .arg(repo_root().join("tests/py/produce_registry.py"))
        .args([
            "--bootstrap",
            bootstrap,
            "--registry",
            registry,
            "--topic",
            topic,
        ])
        .args(args)
        .arg(dir.join(files[0].0))
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for record in records {
        writeln!(stdin, "{record}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "produce_registry.py: {}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("produced {}", records.len())),
        "produce_registry.py: {said}"
    );
}

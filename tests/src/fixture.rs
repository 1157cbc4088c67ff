//! A pipeline under test, run the way a user runs it: [`Setup`] is a broker, a fresh
//! warehouse, topic names and a pipeline file; it runs the `sluice` binary as a child process
//! (so that a test can kill it and give it its own environment), to its end or in the
//! background as a [`Running`] process whose log is followed line by line.
//!
//! The binary is `sluice-under-test` (`src/bin/`), which Cargo builds before this package's
//! integration tests and benches. It is located at run time, next to the running test
//! binary ([`sluice_binary`]): `env!("CARGO_BIN_EXE_sluice-under-test")` is only set when
//! Cargo compiles an integration test or a bench, not this library.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use sluice::cli::produce::ProduceSummary;
use sluice::kafka::Connection;

use crate::broker::Broker;
use crate::{example_config, plugins, produce, retail_events_file};

/// The `sluice` binary the tests run: `sluice-under-test`, in the folder above the test
/// binary's `deps/` (`target/<profile>/deps/all-<hash>` runs
/// `target/<profile>/sluice-under-test`), or beside the test binary if it is not in a
/// `deps/` folder. Panics, saying where it looked, if the binary is not there.
pub fn sluice_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let test = std::env::current_exe().expect("the path of the running test binary");
        let mut dir = test.parent().expect("the test binary's folder");
        if dir.file_name().is_some_and(|name| name == "deps") {
            dir = dir.parent().expect("the folder above deps/");
        }
        let binary = dir.join(format!("sluice-under-test{}", std::env::consts::EXE_SUFFIX));
        assert!(
            binary.is_file(),
            "the sluice binary under test is not at {} (located from the test binary {}); \
             Cargo builds it with the integration tests and benches of sluice-tests: run them \
             through cargo, e.g. `cargo test -p sluice-tests --test all`",
            binary.display(),
            test.display()
        );
        binary
    })
}

/// One pipeline under test: a broker, a fresh warehouse, topic names, a pipeline file.
///
/// Every command it runs gets the environment the example pipelines read: `KAFKA_BOOTSTRAP`,
/// `KAFKA_TOPIC`, `SLUICE_WAREHOUSE`, `SLUICE_PLUGINS` (the folder of the plugins built from
/// `udfs/`), `SLUICE_DEAD_LETTER_TOPIC`, `SLUICE_CONFIG`, and [`Setup::extra_env`]; and
/// `XDG_CACHE_HOME` (the suite's compile cache, [`crate::cache_home`]). The
/// warehouse folder, and every file written into it, is removed when the setup is dropped.
pub struct Setup {
    /// The broker, started for this setup.
    pub broker: Broker,
    /// The warehouse folder: `sluice-test-NAME-PID` in the temporary folder; not created
    /// until something writes to it.
    pub warehouse: PathBuf,
    /// The source topic, `NAME-events`.
    pub topic: String,
    /// The dead-letter topic, `NAME-dead-letter`.
    pub dead_letter: String,
    /// The pipeline file; the retail example's ([`example_config`]) unless changed.
    pub config: PathBuf,
    /// More environment for every command, after the variables above.
    pub extra_env: Vec<(String, String)>,
    /// librdkafka properties of the test's own clients ([`Setup::produce`],
    /// [`Setup::connection`]): the broker's TLS properties unless changed.
    pub client_properties: Vec<(String, String)>,
}

/// The warehouse folder of the setup named `name`, removed if a previous run left it.
fn fresh_warehouse(name: &str) -> PathBuf {
    let warehouse = std::env::temp_dir().join(format!("sluice-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&warehouse);
    warehouse
}

impl Setup {
    /// Starts a broker; names the topics and the warehouse after `name`, which must be
    /// unique among the tests of a run; runs the retail example pipeline.
    pub fn new(name: &str) -> Setup {
        Self::with_broker(name, Broker::start())
    }

    /// As [`Setup::new`], on `broker` (a secured one, say).
    pub fn with_broker(name: &str, broker: Broker) -> Setup {
        Setup {
            client_properties: broker.tls_properties(),
            broker,
            warehouse: fresh_warehouse(name),
            topic: format!("{name}-events"),
            dead_letter: format!("{name}-dead-letter"),
            config: example_config(),
            extra_env: Vec::new(),
        }
    }

    /// How the test's own clients reach the broker: its bootstrap servers and
    /// [`Setup::client_properties`].
    pub fn connection(&self) -> Connection {
        Connection::new(
            self.broker.bootstrap.clone(),
            self.client_properties.iter().cloned().collect(),
        )
    }

    /// Points this setup at new topics and a new warehouse named after `name`, on the same
    /// broker, as [`Setup::new`] would; the old warehouse is removed. The pipeline file and
    /// [`Setup::extra_env`] stay.
    pub fn renew(&mut self, name: &str) {
        let _ = std::fs::remove_dir_all(&self.warehouse);
        self.warehouse = fresh_warehouse(name);
        self.topic = format!("{name}-events");
        self.dead_letter = format!("{name}-dead-letter");
    }

    /// Writes `text` to the file `file_name` in the warehouse folder (creating the folder)
    /// and makes it the pipeline file. Relative paths in it (a stage's `plugin`) are
    /// relative to the warehouse folder.
    pub fn write_config(&mut self, file_name: &str, text: &str) {
        std::fs::create_dir_all(&self.warehouse).unwrap();
        let path = self.warehouse.join(file_name);
        std::fs::write(&path, text).unwrap();
        self.config = path;
    }

    /// Makes the pipeline file a copy of the retail example ([`example_config`]) with
    /// `edit` applied, `pipeline.toml` in the warehouse folder.
    pub fn edit_example_config(&mut self, edit: impl FnOnce(String) -> String) {
        let example = std::fs::read_to_string(example_config()).unwrap();
        self.write_config("pipeline.toml", &edit(example));
    }

    /// Applies `edit` to the pipeline file as it is now (the example, or what earlier edits
    /// made of it), as `pipeline.toml` in the warehouse folder.
    pub fn edit_config(&mut self, edit: impl FnOnce(String) -> String) {
        let text = std::fs::read_to_string(&self.config).unwrap();
        self.write_config("pipeline.toml", &edit(text));
    }

    /// Keeps the pipeline's catalog in PostgreSQL at `url` (an sqlx URL).
    pub fn use_postgres_catalog(&mut self, url: &str) {
        self.edit_config(|text| {
            text.replace(
                "type = \"sql\"\nname = \"sluice\"",
                &format!("type = \"sql\"\nname = \"sluice\"\nuri = \"{url}\""),
            )
        });
    }

    /// Uses the REST catalog at `url` (named `rest`) for the pipeline.
    pub fn use_rest_catalog(&mut self, url: &str) {
        self.edit_config(|text| {
            text.replace(
                "type = \"sql\"\nname = \"sluice\"",
                &format!("type = \"rest\"\nname = \"rest\"\nuri = \"{url}\""),
            )
        });
    }

    /// `sluice maintain`, expiring every snapshot it may (`--older-than 0s`) and deleting
    /// orphan files older than `orphans_older_than`; run to its end.
    pub fn maintain(&self, orphans_older_than: &str) -> Output {
        self.command(&[
            "maintain",
            "--older-than",
            "0s",
            "--orphans-older-than",
            orphans_older_than,
        ])
        .output()
        .unwrap()
    }

    /// `sluice ARGS…` with this setup's environment (see [`Setup`]), standard input closed
    /// and `RUST_LOG` unset; not started.
    pub fn command(&self, args: &[&str]) -> Command {
        if !args.contains(&"--check") {
            self.ensure_side_topics();
        }
        let plugins_dir = Path::new(plugins::CLICKSTREAM_VALIDATOR).parent().unwrap();
        let mut c = Command::new(sluice_binary());
        c.args(args)
            .env("KAFKA_BOOTSTRAP", &self.broker.bootstrap)
            .env("KAFKA_TOPIC", &self.topic)
            .env("SLUICE_WAREHOUSE", &self.warehouse)
            .env("SLUICE_PLUGINS", plugins_dir)
            .env("SLUICE_DEAD_LETTER_TOPIC", &self.dead_letter)
            .env("SLUICE_PROFILES_TOPIC", self.profiles_topic())
            .env("SLUICE_CUSTOMERS_TOPIC", self.side_topic("customers"))
            .env("SLUICE_PRODUCTS_TOPIC", self.side_topic("products"))
            .env("SLUICE_CONFIG", &self.config)
            .env("XDG_CACHE_HOME", crate::cache_home())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null());
        for (k, v) in &self.extra_env {
            c.env(k, v);
        }
        c
    }

    /// The topic of profile updates that the analytics example joins the events with,
    /// `NAME-profiles` (`SLUICE_PROFILES_TOPIC` of every command).
    pub fn profiles_topic(&self) -> String {
        self.side_topic("profiles")
    }

    /// A topic beside the events', `NAME-SUFFIX`: the analytics example's profiles
    /// (`SLUICE_PROFILES_TOPIC`), the retail example's lookup tables
    /// (`SLUICE_CUSTOMERS_TOPIC`, `SLUICE_PRODUCTS_TOPIC`).
    pub fn side_topic(&self, suffix: &str) -> String {
        let name = self.topic.strip_suffix("-events").unwrap_or(&self.topic);
        format!("{name}-{suffix}")
    }

    /// Creates each side topic (one partition) that the pipeline file reads and that does
    /// not exist yet: the source and the lookup tables refuse a topic that does not exist.
    pub fn ensure_side_topics(&self) {
        let text = std::fs::read_to_string(&self.config).unwrap_or_default();
        for (var, suffix) in [
            ("SLUICE_PROFILES_TOPIC", "profiles"),
            ("SLUICE_CUSTOMERS_TOPIC", "customers"),
            ("SLUICE_PRODUCTS_TOPIC", "products"),
        ] {
            if text.contains(var) {
                let config = self.connection().client_config(&[]);
                let timeout = std::time::Duration::from_secs(30);
                sluice::kafka::ensure_topic(&config, &self.side_topic(suffix), 1, timeout).unwrap();
            }
        }
    }

    /// Runs `sluice produce … EXTRA…` to this setup's topic ([`crate::produce`]), with a
    /// `--property` for each of [`Setup::client_properties`].
    pub fn produce(&self, extra: &[&str]) -> ProduceSummary {
        let properties: Vec<String> = self
            .client_properties
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut args = extra.to_vec();
        for p in &properties {
            args.extend(["--property", p.as_str()]);
        }
        produce(&self.broker.bootstrap, &self.topic, &args)
    }

    /// Produces the lines of `examples/retail-clickstream/events.jsonl` (five valid
    /// events, then five invalid ones) to a topic of `partitions` partitions.
    pub fn produce_file(&self, partitions: &str) -> ProduceSummary {
        let events = retail_events_file();
        self.produce(&[
            "--partitions",
            partitions,
            "--input",
            events.to_str().unwrap(),
        ])
    }

    /// Runs `sluice run --available-now` to its end, with `env` added.
    pub fn run(&self, env: &[(&str, &str)]) -> Output {
        let mut c = self.command(&["run", "--available-now"]);
        c.envs(env.iter().copied());
        c.output().unwrap()
    }

    /// Starts `sluice ARGS…`, with `env` added, and follows its log.
    pub fn start(&self, args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut child = self
            .command(args)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        let log = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut log = String::new();
            for line in std::io::BufReader::new(stderr).lines() {
                let line = line.unwrap();
                log.push_str(&line);
                log.push('\n');
                let _ = tx.send(line);
            }
            log
        });
        Running { child, lines, log }
    }

    /// `sluice show --json`: the table's rows, the dead letters and the last snapshot's
    /// summary. Panics if the command fails.
    pub fn show(&self) -> Value {
        self.show_json(&[])
    }

    /// `sluice show --json --window WINDOW`: what the window emitted, in its table and on
    /// its topic. Panics if the command fails.
    pub fn show_window(&self, window: &str) -> Value {
        self.show_json(&["--window", window])
    }

    /// `sluice show --json`, or its output if it fails (as it does before the first
    /// run has created the table).
    pub fn try_show(&self) -> Result<Value, String> {
        self.try_show_json(&[])
    }

    fn show_json(&self, extra: &[&str]) -> Value {
        self.try_show_json(extra)
            .unwrap_or_else(|e| panic!("sluice show failed: {e}"))
    }

    fn try_show_json(&self, extra: &[&str]) -> Result<Value, String> {
        let mut args = vec!["show", "--json"];
        args.extend_from_slice(extra);
        let out = self.command(&args).output().unwrap();
        if !out.status.success() {
            return Err(text(&out));
        }
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.warehouse);
    }
}

/// A running `sluice` process ([`Setup::start`]); its standard error is read as it comes,
/// so it never blocks, and its lines are handed out in order by the methods below.
pub struct Running {
    child: Child,
    lines: Receiver<String>,
    log: JoinHandle<String>,
}

impl Running {
    /// The next log line containing `needle`, if one comes within `timeout`; the lines
    /// before it are skipped.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> Option<String> {
        self.next_containing(needle, timeout, |_| {})
    }

    /// The next log line containing `needle`; the progress of every progress line read on
    /// the way, that one included, is appended to `progress`. Panics if no such line comes
    /// within `timeout`.
    pub fn follow(&self, progress: &mut Vec<Value>, needle: &str, timeout: Duration) -> String {
        self.next_containing(needle, timeout, |line| progress.extend(progress_of(line)))
            .unwrap_or_else(|| panic!("no log line with {needle:?} within {timeout:?}"))
    }

    fn next_containing(
        &self,
        needle: &str,
        timeout: Duration,
        mut each: impl FnMut(&str),
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            each(&line);
            if line.contains(needle) {
                return Some(line);
            }
        }
    }

    /// The next progress line, parsed, if one comes within `timeout`.
    pub fn progress(&self, timeout: Duration) -> Option<Value> {
        let line = self.wait_for(PROGRESS, timeout)?;
        progress_of(&line)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`STOP`, `CONT`…) to the process, without waiting.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Sends SIGTERM and waits: the exit status, standard output and the whole log.
    pub fn terminate(self) -> (ExitStatus, String, String) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        self.finish()
    }

    /// Kills the process (SIGKILL) and waits: the exit status, standard output and the
    /// whole log.
    pub fn kill(mut self) -> (ExitStatus, String, String) {
        let _ = self.child.kill();
        self.finish()
    }

    /// Waits for the process to end by itself: the exit status, standard output and the
    /// whole log.
    pub fn wait(self) -> (ExitStatus, String, String) {
        self.finish()
    }

    fn finish(mut self) -> (ExitStatus, String, String) {
        let status = self.child.wait().unwrap();
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut self.child.stdout.take().unwrap(), &mut stdout).unwrap();
        (status, stdout, self.log.join().unwrap())
    }
}

/// What precedes the JSON on a progress line of the log (one line per committed batch).
const PROGRESS: &str = "sluice::progress: ";

/// A process's exit status, standard output and standard error, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits at most `timeout` for `child` (its output piped) to end: its output and how long
/// the wait took; or, if it did not end, kills it and gives its output as the error.
pub fn ended_within(mut child: Child, timeout: Duration) -> Result<(Output, Duration), Output> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if child.try_wait().unwrap().is_some() {
            return Ok((child.wait_with_output().unwrap(), start.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    Err(child.wait_with_output().unwrap())
}

/// The progress a log line reports, parsed, if it is a progress line. Panics if its JSON
/// does not parse.
pub fn progress_of(line: &str) -> Option<Value> {
    line.split_once(PROGRESS)
        .map(|(_, json)| serde_json::from_str(json).unwrap())
}

/// The progress of every progress line of a log, in order.
pub fn progress_lines(log: &str) -> Vec<Value> {
    log.lines().filter_map(progress_of).collect()
}

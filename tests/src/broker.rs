//! A real Kafka-compatible broker for the tests: tansu, started on a free loopback port with
//! its SQLite storage engine in a fresh folder, stopped (and the folder removed) when
//! dropped. `scripts/test` installs tansu when it is missing.
//!
//! A secured broker ([`Broker::start_secured`]) is reached only through TLS: stunnel
//! ([`crate::stunnel`]) terminates TLS on the advertised port, with a certificate of a
//! throwaway CA, and tansu's own plaintext listener is on another port that clients are not
//! told about. With SCRAM users, tansu requires SASL authentication (`--authentication`):
//! the users are created first, on the same storage, by a tansu started without it.
//!
//! Not the `memory://` engine: in tansu 0.6.0 it answers ListOffsets(latest) with the base
//! offset of the last record batch plus one, not the partition's end, so a consumer that
//! reads "up to the end offsets" stops early. The SQLite engine answers from its watermark.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::stunnel::Stunnel;
use crate::tls::TestCa;

/// A running tansu broker.
pub struct Broker {
    /// tansu; none for a broker the test runs itself ([`Broker::external`]).
    child: Option<Child>,
    /// tansu's storage folder.
    dir: PathBuf,
    /// What clients use for `bootstrap.servers`: `127.0.0.1:PORT`, the TLS port if secured.
    pub bootstrap: String,
    /// tansu's own listener (plaintext): the same as `bootstrap` unless secured.
    pub plaintext: String,
    /// The TLS front and its CA, if secured.
    pub tls: Option<Tls>,
}

/// TLS in front of a broker.
pub struct Tls {
    /// The stunnel that terminates TLS.
    pub stunnel: Stunnel,
    /// The CA that signed its certificate.
    pub ca: TestCa,
}

/// How a secured broker is reached.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// SCRAM users to create, `(mechanism, user, password)` with mechanism `scram256` or
    /// `scram512`. None: no authentication.
    pub scram_users: Vec<(String, String, String)>,
}

/// The tansu binary: `$TANSU`, else `tansu` in `$CARGO_HOME/bin` or `~/.cargo/bin`, else on
/// the `PATH`.
fn tansu_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TANSU") {
        return path.into();
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    match cargo_home.map(|home| home.join("bin/tansu")) {
        Some(path) if path.exists() => path,
        _ => "tansu".into(),
    }
}

impl Broker {
    /// Starts a broker and waits until it accepts connections.
    pub fn start() -> Broker {
        Self::start_with_maintenance(None)
    }

    /// Starts a broker that applies retention (`cleanup.policy = "delete"` topics lose
    /// records older than their `retention.ms`) every `interval`, instead of every 10
    /// minutes.
    pub fn start_with_maintenance(interval: Option<Duration>) -> Broker {
        let port = free_port();
        let dir = fresh_dir(port);
        let storage = match interval {
            Some(every) => format!("{STORAGE}?maintenance_interval={}ms", every.as_millis()),
            None => STORAGE.to_string(),
        };
        let mut command = tansu(&dir, port, port, false);
        command.args(["--storage-engine", &storage]);
        let child = launch(command);
        let bootstrap = format!("127.0.0.1:{port}");
        wait_for(&bootstrap);
        index_headers(&dir);
        Broker {
            child: Some(child),
            dir,
            plaintext: bootstrap.clone(),
            bootstrap,
            tls: None,
        }
    }

    /// Starts a broker reached only through TLS (see the module's documentation), with
    /// `security`'s users and, if it has some, SASL authentication required.
    pub fn start_secured(name: &str, security: &Security) -> Broker {
        let (port, tls_port) = (free_port(), free_port());
        let dir = fresh_dir(port);
        let authentication = !security.scram_users.is_empty();
        if authentication {
            create_users(&dir, port, &security.scram_users);
        }
        let child = launch(spawn(&dir, port, tls_port, authentication));
        let plaintext = format!("127.0.0.1:{port}");
        wait_for(&plaintext);
        index_headers(&dir);
        let ca = TestCa::new(name);
        let stunnel = Stunnel::start(&ca, tls_port, &plaintext);
        Broker {
            child: Some(child),
            dir,
            bootstrap: format!("127.0.0.1:{tls_port}"),
            plaintext,
            tls: Some(Tls { stunnel, ca }),
        }
    }

    /// A broker that the test runs itself at `bootstrap` (librdkafka's mock cluster, say),
    /// for a [`crate::fixture::Setup`].
    /// Kills the broker (its storage stays, as after a crash), until [`Broker::restart`].
    pub fn stop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(&self.plaintext).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the stopped broker again, on the same port with the same storage (plain
    /// brokers only).
    pub fn restart(&mut self) {
        assert!(self.tls.is_none(), "restart is for plain brokers");
        let port: u16 = self.plaintext.rsplit(':').next().unwrap().parse().unwrap();
        self.child = Some(launch(spawn(&self.dir, port, port, false)));
        wait_for(&self.plaintext);
    }

    /// Replaces the broker by an empty one on the same port: stopped, its storage
    /// removed, started again (plain brokers only). Every topic is gone, as after a broker
    /// replaced without its data.
    pub fn replace_with_empty(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).unwrap();
        self.restart();
        index_headers(&self.dir);
    }

    pub fn external(bootstrap: String) -> Broker {
        Broker {
            child: None,
            dir: PathBuf::new(),
            plaintext: bootstrap.clone(),
            bootstrap,
            tls: None,
        }
    }

    /// The librdkafka properties a client needs to reach this broker over TLS: the
    /// protocol and the CA to trust (none for a plain broker). SASL credentials are the
    /// caller's.
    pub fn tls_properties(&self) -> Vec<(String, String)> {
        match &self.tls {
            Some(tls) => vec![
                ("security.protocol".into(), "SSL".into()),
                (
                    "ssl.ca.location".into(),
                    tls.ca.ca_cert.display().to_string(),
                ),
            ],
            None => Vec::new(),
        }
    }
}

/// A fresh folder for the broker listening on `port`.
fn fresh_dir(port: u16) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-tansu-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Where tansu keeps its data, in its folder.
const STORAGE: &str = "sqlite://tansu.db";

/// tansu on `127.0.0.1:port`, telling clients to come to `advertised`, its storage in
/// `dir`.
fn spawn(dir: &Path, port: u16, advertised: u16, authentication: bool) -> Command {
    let mut command = tansu(dir, port, advertised, authentication);
    command.args(["--storage-engine", STORAGE]);
    command
}

/// The tansu command line, without its storage.
fn tansu(dir: &Path, port: u16, advertised: u16, authentication: bool) -> Command {
    let mut command = Command::new(tansu_binary());
    command
        .current_dir(dir)
        .args(["broker", "--listener-url"])
        .arg(format!("tcp://127.0.0.1:{port}"))
        .arg("--advertised-listener-url")
        .arg(format!("tcp://127.0.0.1:{advertised}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if authentication {
        command.arg("--authentication");
    }
    command
}

fn launch(mut command: Command) -> Child {
    command.spawn().unwrap_or_else(|e| {
        panic!(
            "cannot start {} ({e}); scripts/test installs tansu",
            tansu_binary().display()
        )
    })
}

/// Adds the index that tansu 0.6's SQLite schema lacks: record headers are looked up by
/// their record, but the `header` table has no index on it, so every record fetched scans
/// every header of the broker, of all topics. In the chaos test ~55 000 dead-letter headers
/// made reading the 100 000-record source topic back from offset 0 get nowhere in 10
/// minutes; with the index it takes 5 s. (Test infrastructure only: sluice is not involved.)
fn index_headers(dir: &Path) {
    let url = format!("sqlite://{}", dir.join("tansu.db").display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = runtime.block_on(async {
        use sqlx::Connection;
        loop {
            let attempt = async {
                let mut db = sqlx::SqliteConnection::connect(&url).await?;
                sqlx::query(
                    "create index if not exists sluice_header_record on header (topition, offset_id)",
                )
                .execute(&mut db)
                .await?;
                db.close().await
            };
            match attempt.await {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                // The schema is not there yet, or tansu holds the lock.
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    });
    if let Err(e) = done {
        panic!("cannot index tansu's record headers in {url}: {e}");
    }
}

/// Waits until `address` accepts connections.
fn wait_for(address: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(address).is_err() {
        assert!(
            Instant::now() < deadline,
            "tansu did not listen on {address} within 30s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Creates SCRAM `users` in the storage in `dir`, through a tansu without authentication
/// on `port` (stopped afterwards): `tansu user create` does not authenticate itself.
fn create_users(dir: &Path, port: u16, users: &[(String, String, String)]) {
    let mut child = launch(spawn(dir, port, port, false));
    wait_for(&format!("127.0.0.1:{port}"));
    for (mechanism, user, password) in users {
        let out = Command::new(tansu_binary())
            .args(["user", "create", "--broker"])
            .arg(format!("tcp://127.0.0.1:{port}"))
            .args(["--mechanism", mechanism, user, password])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tansu user create {user} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

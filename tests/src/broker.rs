//! A real Kafka-compatible broker for the tests: tansu, started on a free loopback port with
//! its SQLite storage engine in a fresh folder, stopped (and the folder removed) when
//! dropped. `scripts/test` installs tansu when it is missing.
//!
//! Not the `memory://` engine: in tansu 0.6.0 it answers ListOffsets(latest) with the base
//! offset of the last record batch plus one, not the partition's end, so a consumer that
//! reads "up to the end offsets" stops early. The SQLite engine answers from its watermark.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// A running tansu broker.
pub struct Broker {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT`, for `bootstrap.servers`.
    pub bootstrap: String,
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
        let port = free_port();
        let url = format!("tcp://127.0.0.1:{port}");
        let binary = tansu_binary();
        let dir = std::env::temp_dir().join(format!("sluice-tansu-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(&binary)
            .current_dir(&dir)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", "sqlite://tansu.db"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start {} ({e}); scripts/test installs tansu",
                    binary.display()
                )
            });
        let broker = Broker {
            child,
            dir,
            bootstrap: format!("127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(&broker.bootstrap).is_err() {
            assert!(
                Instant::now() < deadline,
                "tansu did not listen on {} within 30s",
                broker.bootstrap
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        broker
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

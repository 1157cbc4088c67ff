//! A real PostgreSQL server for the catalog tests: a throwaway cluster (initdb) on a free
//! loopback port, stopped and removed when dropped. Uses Debian's PostgreSQL
//! (`/usr/lib/postgresql/*/bin`, or `$PG_BIN`); `scripts/test` installs it when missing.
//! PostgreSQL refuses to run as root, so under root the server runs as the `postgres` user.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;
use crate::tls::TestCa;

/// A running PostgreSQL server with a `sluice` superuser (trust authentication).
pub struct Postgres {
    child: Child,
    dir: PathBuf,
    /// `postgres://sluice@127.0.0.1:PORT/postgres`, for sqlx.
    pub url: String,
}

fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN") {
        return dir.into();
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions
        .pop()
        .unwrap_or_else(|| panic!("no PostgreSQL in /usr/lib/postgresql; scripts/test installs it (apt-get install postgresql)"))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `program args…`, as the `postgres` user when we are root.
fn command(program: PathBuf) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

impl Postgres {
    /// Creates a cluster in a fresh folder and starts the server.
    pub fn start() -> Postgres {
        Self::start_with(None)
    }

    /// Like [`Postgres::start`], but TCP connections must use TLS (`hostnossl` is
    /// rejected), with the server certificate of `ca`.
    pub fn start_tls(ca: &TestCa) -> Postgres {
        Self::start_with(Some(ca))
    }

    fn start_with(tls: Option<&TestCa>) -> Postgres {
        let bin = bin_dir();
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sluice-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            let ok = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .status()
                .unwrap();
            assert!(ok.success(), "chown of the PostgreSQL folder failed");
        }
        let data = dir.join("data");
        let out = command(bin.join("initdb"))
            .args(["-A", "trust", "-U", "sluice", "-E", "UTF8", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(ca) = tls {
            require_tls(&data, ca);
        }
        let child = command(bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args([
                "-p",
                &port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
                "-k",
            ])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pg = Postgres {
            child,
            dir,
            url: format!("postgres://sluice@127.0.0.1:{port}/postgres"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PostgreSQL did not listen within 30s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // Accepting connections is not the same as ready: wait for pg_isready.
        while !Command::new(bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(
                Instant::now() < deadline,
                "PostgreSQL was not ready within 30s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        pg
    }
}

/// Turns TLS on in the cluster at `data` and refuses TCP connections without it.
fn require_tls(data: &std::path::Path, ca: &TestCa) {
    std::fs::copy(&ca.server_cert, data.join("server.crt")).unwrap();
    std::fs::copy(&ca.server_key, data.join("server.key")).unwrap();
    let conf = data.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
    std::fs::write(&conf, text).unwrap();
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 0.0.0.0/0 reject\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(data.join("server.key"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
    std::fs::set_permissions(data.join("server.key"), perms).unwrap();
    if is_root() {
        for file in ["server.crt", "server.key", "postgresql.conf", "pg_hba.conf"] {
            let ok = Command::new("chown")
                .arg("postgres:postgres")
                .arg(data.join(file))
                .status()
                .unwrap();
            assert!(ok.success(), "chown {file} failed");
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // `runuser` forwards SIGTERM to the server: a fast shutdown.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! TLS in front of a test broker: stunnel (Debian's `stunnel4`) accepts TLS on a loopback
//! port, with a server certificate of a throwaway CA ([`crate::tls::TestCa`]), and passes
//! the plaintext on to the broker. Stopped when dropped. Uses `$STUNNEL`, else `stunnel4` or
//! `stunnel` on the `PATH`; `scripts/test` installs it when missing.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::tls::TestCa;

/// A running stunnel.
pub struct Stunnel {
    child: Child,
    /// Its configuration and log.
    log: PathBuf,
}

/// The stunnel binary: `$STUNNEL`, else `stunnel4`, else `stunnel`, looked up on the `PATH`.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("STUNNEL") {
        return path.into();
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["stunnel4", "stunnel"] {
        if let Some(found) = std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
        {
            return found;
        }
    }
    panic!(
        "no stunnel4 or stunnel on the PATH; scripts/test installs it (apt-get install stunnel4)"
    )
}

impl Stunnel {
    /// Accepts TLS on `127.0.0.1:accept` with `ca`'s server certificate and forwards the
    /// plaintext to `connect` (`host:port`); waits until it listens. Its files are kept in
    /// `ca`'s folder.
    pub fn start(ca: &TestCa, accept: u16, connect: &str) -> Stunnel {
        let conf = ca.dir.join(format!("stunnel-{accept}.conf"));
        let log = ca.dir.join(format!("stunnel-{accept}.log"));
        std::fs::write(&conf, config(ca, accept, connect, &log)).unwrap();
        let binary = binary();
        let child = Command::new(&binary)
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} ({e})", binary.display()));
        let mut stunnel = Stunnel { child, log };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", accept)).is_err() {
            if let Ok(Some(status)) = stunnel.child.try_wait() {
                panic!("stunnel exited ({status}): {}", stunnel.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "stunnel did not listen on {accept} within 30s: {}",
                stunnel.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        stunnel
    }

    /// What stunnel logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// stunnel's configuration: in the foreground, one service.
fn config(ca: &TestCa, accept: u16, connect: &str, log: &Path) -> String {
    format!(
        "foreground = yes\npid =\noutput = {log}\ndebug = notice\n\n[kafka]\n\
         accept = 127.0.0.1:{accept}\nconnect = {connect}\ncert = {cert}\nkey = {key}\n",
        log = log.display(),
        cert = ca.server_cert.display(),
        key = ca.server_key.display(),
    )
}

impl Drop for Stunnel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

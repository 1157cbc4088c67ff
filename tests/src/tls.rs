//! A throwaway certificate authority for the TLS tests: a CA and one server certificate for
//! `localhost` / `127.0.0.1`, made with the `openssl` command (Debian's `openssl` package,
//! there wherever `ca-certificates` is) in a temporary folder.

use std::path::{Path, PathBuf};
use std::process::Command;

/// PEM files of a CA and of a server certificate it signed.
#[derive(Debug)]
pub struct TestCa {
    /// The folder that holds them (removed when dropped).
    pub dir: PathBuf,
    /// The CA's certificate: what a client is told to trust.
    pub ca_cert: PathBuf,
    /// The server's certificate (signed by the CA; SAN `localhost`, `127.0.0.1`).
    pub server_cert: PathBuf,
    /// The server's private key (unencrypted PKCS#8).
    pub server_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestCa {
    /// Makes a CA and a server certificate in a fresh folder under the temporary directory.
    pub fn new(name: &str) -> TestCa {
        let dir = std::env::temp_dir().join(format!("sluice-ca-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=sluice test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        );
        openssl(
            &dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        std::fs::write(
            dir.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
             keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "san.ext",
                "-out",
                "server.pem",
            ],
        );
        TestCa {
            ca_cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            dir,
        }
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

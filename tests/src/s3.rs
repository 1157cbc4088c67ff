//! A local S3-compatible server for the tests of an `s3://` warehouse: moto's server
//! (`moto[server]` from PyPI, in the pyiceberg venv), run as its own process on a free
//! loopback port and stopped when dropped. Any access key is accepted; requests are signed
//! all the same, so a client that cannot sign fails.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixture::text;
use crate::free_port;
use crate::pyiceberg::python;

/// The access key id and secret the tests use.
pub const ACCESS_KEY: (&str, &str) = ("sluice-test-key", "sluice-test-secret");
/// The region the tests use.
pub const REGION: &str = "us-east-1";

/// A running moto server.
#[derive(Debug)]
pub struct S3Server {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    child: Child,
}

impl S3Server {
    /// Starts a server and waits until it accepts connections.
    pub fn start() -> S3Server {
        let port = free_port();
        let child = Command::new(python())
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto's server");
        let server = S3Server {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not start in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Runs `code` in Python with `s3`, a boto3 client for this server, and returns stdout.
    fn boto3(&self, code: &str) -> String {
        let script = format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', region_name='{REGION}', \
             aws_access_key_id='{}', aws_secret_access_key='{}')\n{code}",
            self.endpoint, ACCESS_KEY.0, ACCESS_KEY.1
        );
        let out = Command::new(python())
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(out.status.success(), "boto3: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        self.boto3(&format!("s3.create_bucket(Bucket='{bucket}')"));
    }

    /// Writes an object.
    pub fn put(&self, bucket: &str, key: &str, body: &str) {
        self.boto3(&format!(
            "s3.put_object(Bucket='{bucket}', Key='{key}', Body=b'{body}')"
        ));
    }

    /// The keys of the objects in `bucket` under `prefix`, sorted.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let out = self.boto3(&format!(
            "p = s3.get_paginator('list_objects_v2')\n\
             for page in p.paginate(Bucket='{bucket}', Prefix='{prefix}'):\n\
             \x20   for o in page.get('Contents', []):\n\
             \x20       print(o['Key'])"
        ));
        let mut keys: Vec<String> = out.lines().map(str::to_string).collect();
        keys.sort();
        keys
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! The `[admin]` section of a pipeline's configuration.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::units::ByteSize;

/// The `[admin]` section.
///
/// ```toml
/// [admin]
/// listen = "127.0.0.1:9464"
/// token = "${SLUICE_ADMIN_TOKEN}"
/// state-dir = "/var/lib/sluice"
/// stuck-after = "5m"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AdminConfig {
    /// Address and port to listen on. Loopback by default: expose it on purpose.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Bearer token that `POST` calls must send. Default: the `SLUICE_ADMIN_TOKEN`
    /// environment variable. With neither, `POST` calls are refused.
    #[serde(default)]
    pub token: Option<String>,
    /// Largest request body (a module upload), e.g. `"32MiB"`. A larger one is refused
    /// with 413 before it is read.
    #[serde(default = "default_max_upload")]
    pub max_upload: ByteSize,
    /// Batches whose progress `GET /status` returns.
    #[serde(default = "default_recent")]
    pub recent_batches: usize,
    /// An absolute folder where versions activated through the API are recorded, with
    /// their modules (`<state-dir>/<pipeline>/`), so that a restart runs them again.
    /// Without it, a restart runs the stages' files.
    #[serde(default, deserialize_with = "absolute")]
    pub state_dir: Option<PathBuf>,
    /// Most connections served at once (at least 1). When they are all open, a new one
    /// closes the oldest that has not sent its request yet, or is closed at once if every
    /// one is answering a request: a flood of idle connections takes this many file
    /// descriptors at most, and `GET /healthz` still answers.
    #[serde(default = "default_max_connections", deserialize_with = "at_least_one")]
    pub max_connections: usize,
    /// How long a connection may take to send its request head, e.g. `"10s"`; then it is
    /// closed.
    #[serde(
        default = "default_idle_timeout",
        deserialize_with = "not_zero",
        serialize_with = "crate::units::duration::serialize"
    )]
    #[schemars(with = "crate::units::DurationText")]
    pub idle_timeout: Duration,
    /// How long the pipeline's loop may show no progress (no batch, no wait between
    /// triggers, no pause after a fault) before `GET /healthz` answers 503, e.g. `"5m"`.
    /// Longer than the longest batch takes.
    #[serde(
        default = "default_stuck_after",
        deserialize_with = "not_zero",
        serialize_with = "crate::units::duration::serialize"
    )]
    #[schemars(with = "crate::units::DurationText")]
    pub stuck_after: Duration,
}

/// An absolute path: a relative one would depend on where sluice is started from.
fn absolute<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let path = PathBuf::deserialize(d)?;
    if path.is_relative() {
        return Err(serde::de::Error::custom("must be an absolute path"));
    }
    Ok(Some(path))
}

fn at_least_one<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
    match usize::deserialize(d)? {
        0 => Err(serde::de::Error::custom("must be at least 1")),
        n => Ok(n),
    }
}

fn not_zero<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match crate::units::duration::deserialize(d)? {
        Duration::ZERO => Err(serde::de::Error::custom("must be longer than 0")),
        timeout => Ok(timeout),
    }
}

fn default_listen() -> String {
    "127.0.0.1:9464".into()
}

const fn default_max_upload() -> ByteSize {
    ByteSize::mib(32)
}

const fn default_recent() -> usize {
    20
}

const fn default_max_connections() -> usize {
    256
}

const fn default_idle_timeout() -> Duration {
    Duration::from_secs(10)
}

const fn default_stuck_after() -> Duration {
    Duration::from_secs(300)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_listens_on_loopback_unless_told_otherwise() {
        let config: AdminConfig = toml::from_str("").unwrap();
        assert_eq!(config.listen, "127.0.0.1:9464");
        assert_eq!(config.token, None);
        assert_eq!(config.max_upload, ByteSize::mib(32));
        assert_eq!(config.recent_batches, 20);
        assert_eq!(config.state_dir, None);
        assert_eq!(config.max_connections, 256);
        assert_eq!(config.idle_timeout, Duration::from_secs(10));
        assert_eq!(config.stuck_after, Duration::from_secs(300));
        assert!(toml::from_str::<AdminConfig>("port = 1").is_err());
        let config: AdminConfig =
            toml::from_str("max-connections = 8\nidle-timeout = \"500ms\"").unwrap();
        assert_eq!(config.max_connections, 8);
        assert_eq!(config.idle_timeout, Duration::from_millis(500));
        for zero in [
            "max-connections = 0",
            "idle-timeout = \"0s\"",
            "stuck-after = \"0s\"",
        ] {
            let error = toml::from_str::<AdminConfig>(zero).unwrap_err();
            assert!(error.to_string().contains("must be"), "{error}");
        }
        let config: AdminConfig = toml::from_str("state-dir = \"/var/lib/sluice\"").unwrap();
        assert_eq!(config.state_dir, Some(PathBuf::from("/var/lib/sluice")));
        let relative = toml::from_str::<AdminConfig>("state-dir = \"state\"").unwrap_err();
        assert!(relative.to_string().contains("absolute"), "{relative}");
    }
}

//! The `[admin]` section of a pipeline's configuration.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer};

use crate::units::ByteSize;

/// The `[admin]` section.
///
/// ```toml
/// [admin]
/// listen = "127.0.0.1:9464"
/// token = "${SLUICE_ADMIN_TOKEN}"
/// state-dir = "/var/lib/sluice"
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
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
}

/// An absolute path: a relative one would depend on where sluice is started from.
fn absolute<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
    let path = PathBuf::deserialize(d)?;
    if path.is_relative() {
        return Err(serde::de::Error::custom("must be an absolute path"));
    }
    Ok(Some(path))
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
        assert!(toml::from_str::<AdminConfig>("port = 1").is_err());
        let config: AdminConfig = toml::from_str("state-dir = \"/var/lib/sluice\"").unwrap();
        assert_eq!(config.state_dir, Some(PathBuf::from("/var/lib/sluice")));
        let relative = toml::from_str::<AdminConfig>("state-dir = \"state\"").unwrap_err();
        assert!(relative.to_string().contains("absolute"), "{relative}");
    }
}

//! The configuration of a topic's format: `format`, and where Avro schemas come from
//! (`[source.schema-registry]`, or `schema-file`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// How the values of a topic's records are encoded.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// A JSON object per record (the default).
    #[default]
    Json,
    /// Avro: in the Confluent wire format with `schema-registry` (a zero byte, the
    /// schema's 4-byte id, the datum), or a bare datum of `schema-file`'s schema.
    Avro,
    /// Protobuf: in the Confluent wire format with `schema-registry` (a zero byte, the
    /// schema's 4-byte id, the message's indexes, the message), or a bare message of
    /// `schema-file`'s `message`.
    Protobuf,
}

impl Format {
    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Avro => "avro",
            Format::Protobuf => "protobuf",
        }
    }
}

/// A Schema Registry that speaks the Confluent REST API (Confluent Schema Registry,
/// Karapace, Redpanda, Apicurio's `ccompat` API).
///
/// ```toml
/// [source.schema-registry]
/// url = "https://registry.example.com:8081"
/// username = "${REGISTRY_USER}"
/// password = "${REGISTRY_PASSWORD}"
/// ca-cert = "/etc/sluice/registry-ca.pem"
/// timeout = "10s"
/// cache-capacity = 1000
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RegistryConfig {
    /// The registry's base URL, `http://host:8081` or `https://…`.
    pub url: String,
    /// HTTP basic auth: the user (Confluent Cloud: the API key).
    #[serde(default)]
    pub username: Option<String>,
    /// HTTP basic auth: the password (Confluent Cloud: the API secret). Never logged.
    #[serde(default)]
    pub password: Option<String>,
    /// A bearer token sent with every request instead of basic auth. Never logged.
    #[serde(default)]
    pub token: Option<String>,
    /// A PEM file of CA certificates to trust, besides the system's, for an `https://`
    /// registry whose certificate a private CA signed.
    #[serde(default)]
    pub ca_cert: Option<PathBuf>,
    /// The longest wait for one answer, e.g. `"10s"`. A registry slower than this, down,
    /// or answering 5xx is a transient fault, retried within `[pipeline] fault-budget`.
    #[serde(default = "default_timeout", with = "crate::units::duration")]
    #[schemars(with = "crate::units::DurationText")]
    pub timeout: Duration,
    /// The most writer schemas kept by id (a schema id's schema never changes, so each is
    /// fetched once; past this many, the oldest id is forgotten and fetched again if a
    /// record names it). Default 1000, as Confluent's clients keep.
    #[serde(default = "default_cache_capacity")]
    pub cache_capacity: usize,
}

const fn default_cache_capacity() -> usize {
    1000
}

const fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            url: String::new(),
            username: None,
            password: None,
            token: None,
            ca_cert: None,
            timeout: default_timeout(),
            cache_capacity: default_cache_capacity(),
        }
    }
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("RegistryConfig")
            .field("url", &shown_url(&self.url))
            .field("username", &self.username)
            .field("password", &hidden(&self.password))
            .field("token", &hidden(&self.token))
            .field("ca_cert", &self.ca_cert)
            .field("timeout", &self.timeout)
            .field("cache_capacity", &self.cache_capacity)
            .finish()
    }
}

/// `url` without the user information it may hold (`https://user:pass@host` →
/// `https://***@host`), for messages.
pub fn shown_url(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s && !url[s + 3..at].contains('/') => {
            format!("{}***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_parses_and_hides_its_secrets() {
        let text = r#"
            url = "https://registry.example.com:8081"
            username = "ann"
            password = "s3cret"
            ca-cert = "/etc/sluice/registry-ca.pem"
            timeout = "10s"
            cache-capacity = 1000
        "#;
        let config: RegistryConfig = toml::from_str(text).unwrap();
        assert_eq!(config.timeout, Duration::from_secs(10));
        assert!(!format!("{config:?}").contains("s3cret"));
        assert_eq!(shown_url("https://a:b@h:1/x"), "https://***@h:1/x");
        assert_eq!(shown_url("https://h:1/x@y"), "https://h:1/x@y");
        assert!(toml::from_str::<RegistryConfig>("url = \"x\"\nuser = \"a\"").is_err());
    }
}

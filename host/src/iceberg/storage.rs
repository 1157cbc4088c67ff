//! Where the table's files go: a local folder (iceberg's local storage, made durable by
//! [`super::durable`]) or an S3
//! bucket, AWS or S3-compatible (iceberg-rust's OpenDAL storage). The catalog hands the
//! storage properties to every table it opens, so the data files, the metadata and the
//! event-time state files all go to the same place.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::io::{
    S3_ACCESS_KEY_ID, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION, S3_SECRET_ACCESS_KEY,
    S3_SESSION_TOKEN, StorageFactory,
};
use iceberg_storage_opendal::OpenDalStorageFactory;
use serde::Deserialize;

use super::IcebergError;
use super::durable::DurableFsStorageFactory;

/// An S3 (or S3-compatible: MinIO, Ceph, R2...) warehouse, `warehouse = "s3://bucket/path"`.
/// A field left out comes from the standard AWS environment variables; credentials left
/// out everywhere come from AWS's usual chain (profile files, web identity, instance
/// metadata).
///
/// ```toml
/// [sink.s3]
/// endpoint = "http://minio:9000"
/// region = "us-east-1"
/// path-style = true
/// access-key-id = "${S3_KEY}"
/// secret-access-key = "${S3_SECRET}"
/// ```
#[derive(Clone, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct S3Config {
    /// Endpoint URL of an S3-compatible service. Default: `AWS_ENDPOINT_URL_S3`, else
    /// `AWS_ENDPOINT_URL`, else AWS's endpoint for the region.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Region. Default: `AWS_REGION`, else `AWS_DEFAULT_REGION`.
    #[serde(default)]
    pub region: Option<String>,
    /// Path-style requests (`ENDPOINT/BUCKET/KEY`) instead of virtual-hosted ones
    /// (`BUCKET.ENDPOINT/KEY`); most S3-compatible services want them. Default: false, as
    /// in Iceberg's Java S3FileIO.
    #[serde(default)]
    pub path_style: Option<bool>,
    /// Access key id. Default: `AWS_ACCESS_KEY_ID`.
    #[serde(default)]
    pub access_key_id: Option<String>,
    /// Secret access key. Default: `AWS_SECRET_ACCESS_KEY`.
    #[serde(default)]
    pub secret_access_key: Option<String>,
    /// Session token of temporary credentials. Default: `AWS_SESSION_TOKEN`.
    #[serde(default)]
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("path_style", &self.path_style)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &hidden(&self.secret_access_key))
            .field("session_token", &hidden(&self.session_token))
            .finish()
    }
}

impl S3Config {
    /// The FileIO properties (`s3.*`), each from the file or else from `env`.
    pub fn properties(&self, env: impl Fn(&str) -> Option<String>) -> HashMap<String, String> {
        let first = |value: &Option<String>, vars: &[&str]| {
            value
                .clone()
                .or_else(|| vars.iter().find_map(|v| env(v).filter(|s| !s.is_empty())))
        };
        let mut props = HashMap::new();
        let mut put = |key: &str, value: Option<String>| {
            if let Some(value) = value {
                props.insert(key.to_string(), value);
            }
        };
        put(
            S3_ENDPOINT,
            first(&self.endpoint, &["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]),
        );
        put(
            S3_REGION,
            first(&self.region, &["AWS_REGION", "AWS_DEFAULT_REGION"]),
        );
        put(S3_PATH_STYLE_ACCESS, self.path_style.map(|p| p.to_string()));
        put(
            S3_ACCESS_KEY_ID,
            first(&self.access_key_id, &["AWS_ACCESS_KEY_ID"]),
        );
        put(
            S3_SECRET_ACCESS_KEY,
            first(&self.secret_access_key, &["AWS_SECRET_ACCESS_KEY"]),
        );
        put(
            S3_SESSION_TOKEN,
            first(&self.session_token, &["AWS_SESSION_TOKEN"]),
        );
        props
    }
}

/// The kind of storage a warehouse URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageKind {
    /// A local folder (`file://` or a path).
    Local,
    /// An S3 bucket (`s3://`, `s3a://`).
    S3,
}

impl StorageKind {
    /// The storage of `warehouse` (a path or a URL).
    pub fn of(warehouse: &str) -> Result<StorageKind, IcebergError> {
        match warehouse.split_once("://") {
            None => Ok(StorageKind::Local),
            Some(("file", _)) => Ok(StorageKind::Local),
            Some(("s3" | "s3a", _)) => Ok(StorageKind::S3),
            Some((scheme, _)) => Err(IcebergError::Config(format!(
                "sink.warehouse: `{scheme}://` storage is not supported; use a local folder, \
                 file:// or s3://BUCKET/PATH"
            ))),
        }
    }

    /// The FileIO factory for this storage.
    pub fn factory(self) -> Arc<dyn StorageFactory> {
        match self {
            StorageKind::Local => Arc::new(DurableFsStorageFactory),
            StorageKind::S3 => Arc::new(OpenDalStorageFactory::S3 {
                customized_credential_load: None,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_wins_over_the_environment_and_secrets_are_not_printed() {
        let config: S3Config = toml::from_str(
            "endpoint = \"http://s3:9000\"\npath-style = true\nsecret-access-key = \"k\\\\\\\"\"",
        )
        .unwrap();
        let env = |name: &str| {
            Some(match name {
                "AWS_ENDPOINT_URL" => "http://env:1".to_string(),
                "AWS_REGION" => "eu-west-3".to_string(),
                "AWS_ACCESS_KEY_ID" => "AKIA".to_string(),
                _ => return None,
            })
        };
        let props = config.properties(env);
        assert_eq!(props[S3_ENDPOINT], "http://s3:9000");
        assert_eq!(props[S3_REGION], "eu-west-3");
        assert_eq!(props[S3_ACCESS_KEY_ID], "AKIA");
        assert_eq!(props[S3_SECRET_ACCESS_KEY], "k\\\"");
        assert_eq!(props[S3_PATH_STYLE_ACCESS], "true");
        assert!(!props.contains_key(S3_SESSION_TOKEN));
        assert!(!format!("{config:?}").contains("k\\"));
        assert!(toml::from_str::<S3Config>("bucket = \"b\"").is_err());
    }

    #[test]
    fn storage_follows_the_warehouse_scheme() {
        assert_eq!(StorageKind::of("./w").unwrap(), StorageKind::Local);
        assert_eq!(StorageKind::of("file:///w").unwrap(), StorageKind::Local);
        assert_eq!(StorageKind::of("s3://b/w").unwrap(), StorageKind::S3);
        let error = StorageKind::of("gs://b/w").unwrap_err().to_string();
        assert!(error.contains("gs://"), "{error}");
    }
}

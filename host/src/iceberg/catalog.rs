//! The catalog and the I/O runtime: opened once per process and shared by every table
//! sluice writes (the main table and the window tables) and reads (`sluice show`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::collections::HashMap;

use iceberg::{Catalog, CatalogBuilder};

use super::config::{CatalogConfig, CatalogKind, IcebergSinkConfig, redact_password};
use super::storage::StorageKind;
use super::{IcebergError, iceberg_err};
use crate::retry::Backoff;

/// A catalog, with the tokio runtime its calls run on. Cheap to clone.
#[derive(Clone)]
pub struct IcebergCatalog {
    catalog: Arc<dyn Catalog>,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for IcebergCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergCatalog").finish_non_exhaustive()
    }
}

impl IcebergCatalog {
    /// Starts the I/O runtime and opens the sink's catalog, over its warehouse (a folder,
    /// created if absent, relative to `base`; or a URL).
    pub fn open(sink: &IcebergSinkConfig, base: &Path) -> Result<Self, IcebergError> {
        Self::open_with(sink, base, false)
    }

    /// Opens the catalog to read (`sluice show`): a local warehouse folder is not created,
    /// nor the SQLite catalog inside it, which is opened read-only.
    pub fn open_read_only(sink: &IcebergSinkConfig, base: &Path) -> Result<Self, IcebergError> {
        Self::open_with(sink, base, true)
    }

    fn open_with(
        sink: &IcebergSinkConfig,
        base: &Path,
        read_only: bool,
    ) -> Result<Self, IcebergError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-iceberg")
            .enable_all()
            .build()
            .map_err(|e| IcebergError::Config(format!("cannot start the I/O runtime: {e}")))?;
        let url = warehouse_url(&resolve(base, &sink.warehouse), !read_only)?;
        let storage = StorageKind::of(&url)?;
        let mut props = sink.catalog.properties.clone();
        if storage == StorageKind::S3 {
            props.extend(sink.s3.properties(|name| std::env::var(name).ok()));
        }
        props.insert("warehouse".into(), url.clone());
        let opening = Opening {
            config: &sink.catalog,
            storage,
            props,
            read_only,
        };
        let catalog = runtime.block_on(open_with_retries(&opening, &url))?;
        Ok(IcebergCatalog {
            catalog,
            runtime: Arc::new(runtime),
        })
    }

    /// The catalog.
    pub fn catalog(&self) -> &dyn Catalog {
        self.catalog.as_ref()
    }

    /// Runs `future` to its end on the I/O runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

/// Resolves `path` against `base` unless it is absolute or a URL.
fn resolve(base: &Path, path: &str) -> String {
    if path.contains("://") || path.starts_with("file:") {
        return path.to_string();
    }
    let p = PathBuf::from(path);
    let p = if p.is_absolute() { p } else { base.join(p) };
    p.to_string_lossy().into_owned()
}

/// The warehouse as a URL; a local folder is created if absent and `create`.
fn warehouse_url(warehouse: &str, create: bool) -> Result<String, IcebergError> {
    let local = !warehouse.contains("://") || warehouse.starts_with("file:");
    if !local {
        return Ok(warehouse.to_string());
    }
    let dir = warehouse.trim_start_matches("file://");
    if create {
        std::fs::create_dir_all(dir).map_err(|e| {
            IcebergError::Config(format!("cannot create the warehouse folder {dir}: {e}"))
        })?;
    } else if !Path::new(dir).is_dir() {
        return Err(IcebergError::Config(format!(
            "the warehouse folder {dir} does not exist (sluice run creates it)"
        )));
    }
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| PathBuf::from(dir));
    Ok(format!("file://{}", dir.display()))
}

/// Attempts at opening a catalog. Processes that start together may race to create the SQL
/// catalog's own tables: PostgreSQL then refuses one `CREATE TABLE IF NOT EXISTS` with a
/// unique violation, and opening again succeeds.
const OPEN_ATTEMPTS: u32 = 5;

/// The waits between attempts at opening a catalog: 200 ms doubling to 800 ms.
const OPEN_BACKOFF: Backoff =
    Backoff::doubling(Duration::from_millis(200), Duration::from_millis(800));

/// What a catalog is opened with.
struct Opening<'a> {
    config: &'a CatalogConfig,
    storage: StorageKind,
    /// Catalog properties, the storage's among them.
    props: HashMap<String, String>,
    /// Whether a default SQLite catalog is opened read-only.
    read_only: bool,
}

async fn open_with_retries(
    opening: &Opening<'_>,
    warehouse: &str,
) -> Result<Arc<dyn Catalog>, IcebergError> {
    let mut attempt = 1;
    loop {
        match open_catalog(opening, warehouse).await {
            Err(error) if attempt < OPEN_ATTEMPTS && opening.config.kind == CatalogKind::Sql => {
                tracing::info!(%error, attempt, "cannot open the SQL catalog yet: trying again");
                tokio::time::sleep(OPEN_BACKOFF.wait(attempt)).await;
                attempt += 1;
            }
            opened => return opened,
        }
    }
}

async fn open_catalog(
    opening: &Opening<'_>,
    warehouse: &str,
) -> Result<Arc<dyn Catalog>, IcebergError> {
    let config = opening.config;
    let mut props = opening.props.clone();
    match config.kind {
        CatalogKind::Sql => {
            let uri = sql_uri(config, warehouse, opening.read_only)?;
            let bind = if uri.starts_with("postgres") {
                "DollarNumeric"
            } else {
                "QMark"
            };
            props.insert("uri".into(), uri.clone());
            props.insert("sql_bind_style".into(), bind.into());
            let catalog = iceberg_catalog_sql::SqlCatalogBuilder::default()
                .with_storage_factory(opening.storage.factory())
                .load(config.name.clone(), props)
                .await
                .map_err(iceberg_err(format!(
                    "opening the SQL catalog {}",
                    redact_password(&uri)
                )))?;
            Ok(Arc::new(catalog))
        }
        CatalogKind::Rest => {
            let uri = config.uri.clone().ok_or_else(|| {
                IcebergError::Config("sink.catalog.uri: the REST catalog's URL is required".into())
            })?;
            props.insert("uri".into(), uri.clone());
            props.extend(rest_auth(config));
            let catalog = iceberg_catalog_rest::RestCatalogBuilder::default()
                .with_storage_factory(opening.storage.factory())
                .with_client(http_client(config)?)
                .load(config.name.clone(), props)
                .await
                .map_err(iceberg_err(format!("opening the REST catalog {uri}")))?;
            Ok(Arc::new(catalog))
        }
    }
}

/// The REST catalog's authentication properties, as iceberg-rust's REST client names them.
fn rest_auth(config: &CatalogConfig) -> Vec<(String, String)> {
    [
        ("token", &config.token),
        ("credential", &config.credential),
        ("oauth2-server-uri", &config.oauth2_server_uri),
        ("scope", &config.scope),
    ]
    .into_iter()
    .filter_map(|(key, value)| Some((key.to_string(), value.clone()?)))
    .collect()
}

/// The REST catalog's HTTP client: rustls with the system's roots, plus `ca-cert`.
fn http_client(config: &CatalogConfig) -> Result<reqwest::Client, IcebergError> {
    let mut builder = reqwest::Client::builder().use_rustls_tls();
    if let Some(path) = &config.ca_cert {
        let bad = |e: &dyn std::fmt::Display| {
            IcebergError::Config(format!("sink.catalog.ca-cert {}: {e}", path.display()))
        };
        let pem = std::fs::read(path).map_err(|e| bad(&e))?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(&e))? {
            builder = builder.add_root_certificate(cert);
        }
    }
    builder
        .build()
        .map_err(|e| IcebergError::Config(format!("cannot make the REST catalog's client: {e}")))
}

/// The SQL catalog's database URL: the configured one, or SQLite inside a local warehouse
/// (created if absent, unless `read_only`).
fn sql_uri(
    config: &CatalogConfig,
    warehouse: &str,
    read_only: bool,
) -> Result<String, IcebergError> {
    let uri = match &config.uri {
        Some(uri) => uri.clone(),
        None => {
            if warehouse.contains("://") && !warehouse.starts_with("file://") {
                return Err(IcebergError::Config(
                    "sink.catalog.uri is required when the warehouse is not a local folder".into(),
                ));
            }
            format!(
                "sqlite:{}/catalog.db",
                warehouse.trim_start_matches("file://")
            )
        }
    };
    let mode = if read_only { "ro" } else { "rwc" };
    Ok(if uri.starts_with("sqlite:") && !uri.contains("mode=") {
        format!(
            "{uri}{}mode={mode}",
            if uri.contains('?') { '&' } else { '?' }
        )
    } else {
        uri
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden_and_sqlite_is_the_default() {
        assert_eq!(
            redact_password("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        let config = CatalogConfig::default();
        assert_eq!(
            sql_uri(&config, "file:///w", false).unwrap(),
            "sqlite:/w/catalog.db?mode=rwc"
        );
        assert!(sql_uri(&config, "s3://bucket/w", false).is_err());
        assert_eq!(
            sql_uri(&config, "file:///w", true).unwrap(),
            "sqlite:/w/catalog.db?mode=ro"
        );
        assert_eq!(resolve(Path::new("/base"), "w"), "/base/w");
        assert_eq!(resolve(Path::new("/base"), "file:///w"), "file:///w");
    }
}

//! Listing a warehouse folder, which iceberg-rust's `FileIO` cannot do; orphan-file cleanup
//! needs it ([`super::maintain`]). Local folders are walked; S3 prefixes are listed through
//! OpenDAL, the library under iceberg-rust's own S3 storage, with the same settings
//! ([`super::storage::S3Config`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use iceberg::io::{S3_ACCESS_KEY_ID, S3_ENDPOINT, S3_PATH_STYLE_ACCESS, S3_REGION};
use iceberg::io::{S3_SECRET_ACCESS_KEY, S3_SESSION_TOKEN};

use super::IcebergError;
use super::durable::local as local_path;

/// A file found in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its location, spelled as [`normalize`] spells it.
    pub location: String,
    /// When it was last written, if the storage says.
    pub modified: Option<SystemTime>,
}

impl Listed {
    /// Whether it was last written before `cutoff` (a file of unknown age is not).
    pub fn older_than(&self, cutoff: SystemTime) -> bool {
        self.modified.is_some_and(|t| t < cutoff)
    }
}

/// One spelling per file, so that the locations metadata names and those a listing finds
/// compare equal: a local path for a local file, `s3://BUCKET/KEY` for an object.
pub fn normalize(location: &str) -> String {
    match location.split_once("://") {
        Some(("s3" | "s3a", rest)) => format!("s3://{rest}"),
        _ => local_path(location).to_string_lossy().into_owned(),
    }
}

/// Lists the files of one warehouse.
pub enum Lister {
    /// A local folder.
    Local,
    /// An S3 bucket.
    S3 {
        /// The bucket's operator, rooted at the bucket.
        operator: opendal::Operator,
        bucket: String,
    },
}

impl Lister {
    /// A lister for the warehouse `location` is in; `s3` holds the FileIO properties
    /// (`s3.*`) for an `s3://` location.
    pub fn new(location: &str, s3: &HashMap<String, String>) -> Result<Lister, IcebergError> {
        let Some(rest) = normalize(location).strip_prefix("s3://").map(String::from) else {
            return Ok(Lister::Local);
        };
        let bucket = rest.split('/').next().unwrap_or_default().to_string();
        let mut builder = opendal::services::S3::default().bucket(&bucket).root("/");
        let get = |key: &str| s3.get(key).map(String::as_str);
        if let Some(v) = get(S3_ENDPOINT) {
            builder = builder.endpoint(v);
        }
        if let Some(v) = get(S3_REGION) {
            builder = builder.region(v);
        }
        if let Some(v) = get(S3_ACCESS_KEY_ID) {
            builder = builder.access_key_id(v);
        }
        if let Some(v) = get(S3_SECRET_ACCESS_KEY) {
            builder = builder.secret_access_key(v);
        }
        if let Some(v) = get(S3_SESSION_TOKEN) {
            builder = builder.session_token(v);
        }
        // Virtual-hosted requests unless told otherwise, as iceberg-rust's S3 storage does.
        if get(S3_PATH_STYLE_ACCESS) != Some("true") {
            builder = builder.enable_virtual_host_style();
        }
        let operator = opendal::Operator::new(builder)
            .map_err(|e| IcebergError::Config(format!("cannot list s3://{bucket}: {e}")))?
            .finish();
        Ok(Lister::S3 { operator, bucket })
    }

    /// Every file below the folder `location` (none if it does not exist).
    pub async fn files_below(&self, location: &str) -> Result<Vec<Listed>, IcebergError> {
        match self {
            Lister::Local => local_files_below(&local_path(location)),
            Lister::S3 { operator, bucket } => {
                let folder = normalize(location);
                let prefix = folder
                    .strip_prefix(&format!("s3://{bucket}/"))
                    .unwrap_or_default()
                    .trim_end_matches('/');
                let entries = operator
                    .list_with(&format!("{prefix}/"))
                    .recursive(true)
                    .await
                    .map_err(|e| IcebergError::Config(format!("cannot list {folder}: {e}")))?;
                Ok(entries
                    .into_iter()
                    .filter(|e| e.metadata().is_file())
                    .map(|e| Listed {
                        location: format!("s3://{bucket}/{}", e.path()),
                        modified: e.metadata().last_modified().map(SystemTime::from),
                    })
                    .collect())
            }
        }
    }
}

fn local_files_below(dir: &Path) -> Result<Vec<Listed>, IcebergError> {
    let mut files = Vec::new();
    let mut folders: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(IcebergError::Config(format!(
                    "cannot list {}: {e}",
                    folder.display()
                )));
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let modified = entry.metadata().and_then(|m| m.modified()).ok();
                files.push(Listed {
                    location: path.to_string_lossy().into_owned(),
                    modified,
                });
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_and_listings_spell_a_file_the_same() {
        assert_eq!(normalize("s3a://b/w/t/data/f"), "s3://b/w/t/data/f");
        assert_eq!(normalize("s3://b/w/t/data/f"), "s3://b/w/t/data/f");
        assert_eq!(normalize("file:///w/t/data/f"), "/w/t/data/f");
        assert_eq!(normalize("/w/t/data/f"), "/w/t/data/f");
    }

    #[test]
    fn a_local_listing_finds_nested_files_with_their_age() {
        let dir = std::env::temp_dir().join(format!("sluice-listing-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/f"), b"x").unwrap();
        std::fs::write(dir.join("g"), b"x").unwrap();
        let lister = Lister::new(&format!("file://{}", dir.display()), &HashMap::new()).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut found = rt
            .block_on(lister.files_below(&dir.to_string_lossy()))
            .unwrap();
        found.sort_by(|a, b| a.location.cmp(&b.location));
        let names: Vec<&str> = found.iter().map(|f| f.location.as_str()).collect();
        let (f, g) = (dir.join("a/b/f"), dir.join("g"));
        assert_eq!(names, [f.to_str().unwrap(), g.to_str().unwrap()]);
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        assert!(found.iter().all(|f| f.older_than(later)));
        assert!(!found[0].older_than(SystemTime::UNIX_EPOCH));
        let missing = rt
            .block_on(lister.files_below("/nonexistent/sluice"))
            .unwrap();
        assert!(missing.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

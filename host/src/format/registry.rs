//! The Schema Registry seam: the schema behind an id, as the Confluent REST API serves it
//! (`GET /schemas/ids/{id}`, `GET /subjects/{subject}/versions/latest`), and registering
//! one (`POST /subjects/{subject}/versions`, for `sluice produce`). [`HttpRegistry`]
//! speaks it over HTTP(S) with basic or bearer auth and a private CA; [`MemoryRegistry`]
//! is its in-memory twin for unit tests.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use super::config::{RegistryConfig, shown_url};

/// The type of a registered schema (`schemaType`; absent means Avro).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    /// Avro (the registry's default).
    #[default]
    Avro,
    /// Protobuf.
    Protobuf,
    /// JSON Schema.
    Json,
}

impl SchemaType {
    /// Its `schemaType` in the REST API; `None` for Avro, which the API leaves out.
    pub fn name(self) -> Option<&'static str> {
        match self {
            SchemaType::Avro => None,
            SchemaType::Protobuf => Some("PROTOBUF"),
            SchemaType::Json => Some("JSON"),
        }
    }
}

/// One registered schema.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    /// Its text: Avro JSON, a `.proto` file, a JSON Schema.
    pub schema: String,
    /// Its type.
    #[serde(default)]
    pub schema_type: SchemaType,
    /// Its global id, when the answer names it (`/subjects/…/versions/…` does).
    #[serde(default)]
    pub id: Option<u32>,
    /// The schemas it imports (a `.proto` file's imports), each a subject's version.
    #[serde(default)]
    pub references: Vec<Reference>,
}

/// A schema another one refers to: the name it is imported by, and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Reference {
    /// The name the referring schema uses (`money.proto`).
    pub name: String,
    /// The subject it is registered under.
    pub subject: String,
    /// Its version there.
    pub version: i64,
}

/// Why the registry gave no schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The registry answered that it has no such schema or subject (a 404).
    #[error("the schema registry has no {what}")]
    NotFound {
        /// What was asked for.
        what: String,
    },
    /// The registry could not be reached, or failed (5xx, a timeout): a transient fault.
    #[error("the schema registry at {url} is unavailable: {reason}")]
    Unavailable {
        /// Its URL (never with credentials).
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The registry refused the request (401, 403, another 4xx): a configuration fault.
    #[error("the schema registry at {url} refused the request ({status}): {reason}")]
    Refused {
        /// Its URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// Its message.
        reason: String,
    },
}

impl RegistryError {
    /// Whether asking again later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }
}

/// A Schema Registry.
pub trait Registry: Send + Sync {
    /// The schema with global id `id`.
    fn schema(&self, id: u32) -> Result<Registered, RegistryError>;
    /// Version `version` (a number, or `latest`) of `subject`, with its id.
    fn version(&self, subject: &str, version: &str) -> Result<Registered, RegistryError>;
    /// The latest version of `subject`, with its id.
    fn latest(&self, subject: &str) -> Result<Registered, RegistryError> {
        self.version(subject, "latest")
    }
    /// Registers `schema` (Avro JSON, a `.proto` file) of type `kind` under `subject`, and
    /// returns its global id: the id it already has if it was registered before.
    fn register(&self, subject: &str, schema: &str, kind: SchemaType)
    -> Result<u32, RegistryError>;
}

/// A Schema Registry reached over HTTP(S) through the Confluent REST API.
#[derive(Debug)]
pub struct HttpRegistry {
    client: reqwest::blocking::Client,
    url: String,
    /// `url` without user information, for messages.
    shown: String,
    auth: Auth,
}

#[derive(Clone)]
enum Auth {
    None,
    Basic(String, String),
    Bearer(String),
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::None => "None",
            Auth::Basic(..) => "Basic(<redacted>)",
            Auth::Bearer(_) => "Bearer(<redacted>)",
        })
    }
}

impl HttpRegistry {
    /// A client for the registry `config` names.
    pub fn new(config: &RegistryConfig) -> Result<Self, String> {
        let mut builder = reqwest::blocking::Client::builder()
            .use_rustls_tls()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)));
        if let Some(path) = &config.ca_cert {
            let bad = |e: &dyn std::fmt::Display| {
                format!("schema-registry.ca-cert {}: {e}", path.display())
            };
            let pem = std::fs::read(path).map_err(|e| bad(&e))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(&e))? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| format!("cannot make the schema registry's client: {e}"))?;
        let auth = match (&config.username, &config.password, &config.token) {
            (Some(user), password, None) => {
                Auth::Basic(user.clone(), password.clone().unwrap_or_default())
            }
            (None, None, Some(token)) => Auth::Bearer(token.clone()),
            (None, None, None) => Auth::None,
            _ => {
                return Err(
                    "schema-registry: give `username` (and `password`) or `token`, not both".into(),
                );
            }
        };
        Ok(HttpRegistry {
            client,
            url: config.url.trim_end_matches('/').to_string(),
            shown: shown_url(config.url.trim_end_matches('/')),
            auth,
        })
    }

    /// `GET path`, on a thread of its own: reqwest's blocking client must not run on a
    /// thread inside an async runtime (the table is created inside one, from a schema).
    fn get(
        &self,
        path: &str,
        what: impl Fn() -> String + Send,
    ) -> Result<Registered, RegistryError> {
        let request = self.client.get(format!("{}{path}", self.url));
        on_own_thread(|| self.send(request, what))
    }

    /// Sends `request` with the registry's headers and auth, and reads the answer as `T`.
    fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::blocking::RequestBuilder,
        what: impl Fn() -> String,
    ) -> Result<T, RegistryError> {
        let mut request = request.header("Accept", "application/vnd.schemaregistry.v1+json");
        request = match &self.auth {
            Auth::None => request,
            Auth::Basic(user, password) => request.basic_auth(user, Some(password)),
            Auth::Bearer(token) => request.bearer_auth(token),
        };
        let unavailable = |reason: String| RegistryError::Unavailable {
            url: self.shown.clone(),
            reason,
        };
        // Without the URL (it may hold credentials); reqwest never shows headers.
        let failed = |e: reqwest::Error| unavailable(e.without_url().to_string());
        let response = request.send().map_err(failed)?;
        let status = response.status();
        let body = response.text().map_err(failed)?;
        if status.is_success() {
            return serde_json::from_str(&body)
                .map_err(|e| unavailable(format!("an answer that is not understood ({e})")));
        }
        let message = serde_json::from_str::<ErrorBody>(&body)
            .map(|b| b.message)
            .unwrap_or_else(|_| body.chars().take(200).collect());
        Err(match status.as_u16() {
            404 => RegistryError::NotFound { what: what() },
            408 | 429 => unavailable(format!("{status}: {message}")),
            s if s >= 500 => unavailable(format!("{status}: {message}")),
            s => RegistryError::Refused {
                url: self.shown.clone(),
                status: s,
                reason: message,
            },
        })
    }
}

/// Runs `call` on a thread of its own: reqwest's blocking client must not run on a thread
/// inside an async runtime (the table is created inside one, from a schema).
fn on_own_thread<T: Send>(call: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(call)
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The body of a registry's error answer.
#[derive(Deserialize)]
struct ErrorBody {
    message: String,
}

/// The body of a registry's answer to a registration.
#[derive(Deserialize)]
struct IdBody {
    id: u32,
}

impl Registry for HttpRegistry {
    fn schema(&self, id: u32) -> Result<Registered, RegistryError> {
        self.get(&format!("/schemas/ids/{id}"), || {
            format!("schema with id {id}")
        })
        .map(|r| Registered { id: Some(id), ..r })
    }

    fn version(&self, subject: &str, version: &str) -> Result<Registered, RegistryError> {
        let path = format!("/subjects/{}/versions/{version}", encode_path(subject));
        self.get(&path, || {
            format!("version {version} of subject `{subject}`")
        })
    }

    fn register(
        &self,
        subject: &str,
        schema: &str,
        kind: SchemaType,
    ) -> Result<u32, RegistryError> {
        let url = format!("{}/subjects/{}/versions", self.url, encode_path(subject));
        let mut body = serde_json::json!({ "schema": schema });
        if let Some(name) = kind.name() {
            body["schemaType"] = name.into();
        }
        let request = self
            .client
            .post(url)
            .header("Content-Type", "application/vnd.schemaregistry.v1+json")
            .body(body.to_string());
        let what = || format!("subject `{subject}`");
        let answer: IdBody = on_own_thread(|| self.send(request, what))?;
        Ok(answer.id)
    }
}

/// `segment` with the characters a URL path segment cannot hold percent-encoded.
fn encode_path(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An in-memory registry (unit tests): schemas by id, subjects by name, and a switch that
/// makes it unavailable.
#[derive(Debug, Default)]
pub struct MemoryRegistry {
    inner: Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    by_id: BTreeMap<u32, Registered>,
    /// The ids of each subject's versions, oldest first.
    subjects: BTreeMap<String, Vec<u32>>,
    down: bool,
    fetches: u64,
}

impl MemoryRegistry {
    /// Registers `schema` (Avro) under `subject` with `id` (chosen by the caller, unlike
    /// [`Registry::register`]), as its next version.
    pub fn insert(&self, subject: &str, id: u32, schema: &str) {
        self.register_typed(subject, id, schema, SchemaType::Avro, Vec::new());
    }

    /// Registers `schema` of type `kind`, importing `references`, under `subject` with
    /// `id`, as its next version.
    pub fn register_typed(
        &self,
        subject: &str,
        id: u32,
        schema: &str,
        kind: SchemaType,
        references: Vec<Reference>,
    ) {
        let mut inner = self.inner.lock().expect("not poisoned");
        let registered = Registered {
            schema: schema.into(),
            schema_type: kind,
            id: Some(id),
            references,
        };
        inner.by_id.insert(id, registered);
        inner.subjects.entry(subject.into()).or_default().push(id);
    }

    /// Makes the registry unavailable (`true`) or available again.
    pub fn set_down(&self, down: bool) {
        self.inner.lock().expect("not poisoned").down = down;
    }

    /// How many times a schema was asked for by id.
    pub fn fetches(&self) -> u64 {
        self.inner.lock().expect("not poisoned").fetches
    }
}

impl Registry for MemoryRegistry {
    fn schema(&self, id: u32) -> Result<Registered, RegistryError> {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.fetches += 1;
        if inner.down {
            return Err(RegistryError::Unavailable {
                url: "memory".into(),
                reason: "down".into(),
            });
        }
        inner
            .by_id
            .get(&id)
            .cloned()
            .ok_or(RegistryError::NotFound {
                what: format!("schema with id {id}"),
            })
    }

    fn version(&self, subject: &str, version: &str) -> Result<Registered, RegistryError> {
        let inner = self.inner.lock().expect("not poisoned");
        let versions = inner.subjects.get(subject).map_or(&[][..], Vec::as_slice);
        let id = match version {
            "latest" => versions.last(),
            n => n
                .parse::<usize>()
                .ok()
                .and_then(|n| versions.get(n.checked_sub(1)?)),
        };
        let id = id.ok_or(RegistryError::NotFound {
            what: format!("version {version} of subject `{subject}`"),
        })?;
        Ok(inner.by_id[id].clone())
    }

    /// The id `schema` (the same text) already has, or the next free one, under `subject`
    /// (a new version unless it is the subject's latest already).
    fn register(
        &self,
        subject: &str,
        schema: &str,
        kind: SchemaType,
    ) -> Result<u32, RegistryError> {
        let (id, latest) = {
            let inner = self.inner.lock().expect("not poisoned");
            if inner.down {
                return Err(RegistryError::Unavailable {
                    url: "memory".into(),
                    reason: "down".into(),
                });
            }
            let same = inner.by_id.iter().find(|(_, r)| r.schema == schema);
            let id = match same {
                Some((id, _)) => *id,
                None => inner.by_id.keys().next_back().map_or(1, |last| last + 1),
            };
            (
                id,
                inner.subjects.get(subject).and_then(|v| v.last()).copied(),
            )
        };
        if latest != Some(id) {
            self.register_typed(subject, id, schema, kind, Vec::new());
        }
        Ok(id)
    }
}

impl<T: Registry + ?Sized> Registry for std::sync::Arc<T> {
    fn schema(&self, id: u32) -> Result<Registered, RegistryError> {
        (**self).schema(id)
    }

    fn version(&self, subject: &str, version: &str) -> Result<Registered, RegistryError> {
        (**self).version(subject, version)
    }

    fn register(
        &self,
        subject: &str,
        schema: &str,
        kind: SchemaType,
    ) -> Result<u32, RegistryError> {
        (**self).register(subject, schema, kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_are_percent_encoded() {
        assert_eq!(encode_path("orders-value"), "orders-value");
        assert_eq!(encode_path("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn credentials_never_show_in_debug() {
        let config = RegistryConfig {
            url: "http://127.0.0.1:1".into(),
            username: Some("ann".into()),
            password: Some("s3cret".into()),
            ..RegistryConfig::default()
        };
        let registry = HttpRegistry::new(&config).unwrap();
        let text = format!("{registry:?} {config:?}");
        assert!(!text.contains("s3cret"), "{text}");
    }

    #[test]
    fn an_unreachable_registry_is_transient() {
        let config = RegistryConfig {
            url: "http://127.0.0.1:9".into(),
            ..RegistryConfig::default()
        };
        let error = HttpRegistry::new(&config).unwrap().schema(1).unwrap_err();
        assert!(error.is_transient(), "{error}");
    }
}

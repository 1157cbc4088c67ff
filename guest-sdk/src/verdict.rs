use std::borrow::Cow;
use std::fmt;

use serde::Serialize;

use crate::patch::Patch;

/// What a plugin decides for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The event goes on unchanged.
    Keep,
    /// The event goes on with this new value.
    Rewrite(Vec<u8>),
    /// The event goes on with these fields added to its value (a JSON object) or replaced
    /// in it: cheaper than a [`Verdict::Rewrite`] of the whole value. See [`Patch`].
    Patch(Patch),
    /// The event is rejected; the pipeline sends it to its dead-letter output.
    Reject(Rejection),
}

impl Verdict {
    /// Rewrites the event's value to `value` serialised as JSON.
    pub fn rewrite_json<T: Serialize + ?Sized>(value: &T) -> Verdict {
        match serde_json::to_vec(value) {
            Ok(bytes) => Verdict::Rewrite(bytes),
            Err(e) => Verdict::Reject(Rejection::new(
                "rewrite_failed",
                format!("the rewritten value could not be serialised as JSON: {e}"),
            )),
        }
    }
}

impl Verdict {
    /// Patches the event with `patch`'s fields; keeps it unchanged if there are none.
    pub fn patch(patch: Patch) -> Verdict {
        if patch.is_empty() {
            Verdict::Keep
        } else {
            Verdict::Patch(patch)
        }
    }
}

impl From<Rejection> for Verdict {
    fn from(rejection: Rejection) -> Self {
        Verdict::Reject(rejection)
    }
}

/// Why an event was rejected: a machine-readable code, a message for people, and the
/// offending field when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    code: Cow<'static, str>,
    message: String,
    field: Option<Cow<'static, str>>,
}

impl Rejection {
    /// A rejection with a `snake_case` code (stable across plugin versions; dead-letter
    /// records and metrics group by it) and a human-readable message.
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Rejection {
            code: code.into(),
            message: message.into(),
            field: None,
        }
    }

    /// This rejection, naming the offending field.
    pub fn with_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// The machine-readable code.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The offending field, if one is named.
    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    pub(crate) fn into_parts(self) -> (String, String, Option<String>) {
        (
            self.code.into_owned(),
            self.message,
            self.field.map(Cow::into_owned),
        )
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(field) = &self.field {
            write!(f, " [{field}]")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Rejection {}

/// What a plugin function may return: a [`Verdict`], `Result<Verdict, Rejection>`, or
/// `Result<(), Rejection>` where `Ok(())` keeps the event.
pub trait IntoVerdict {
    /// Converts into a verdict.
    fn into_verdict(self) -> Verdict;
}

impl IntoVerdict for Verdict {
    fn into_verdict(self) -> Verdict {
        self
    }
}

impl IntoVerdict for Result<Verdict, Rejection> {
    fn into_verdict(self) -> Verdict {
        self.unwrap_or_else(Verdict::Reject)
    }
}

impl IntoVerdict for Result<(), Rejection> {
    fn into_verdict(self) -> Verdict {
        match self {
            Ok(()) => Verdict::Keep,
            Err(r) => Verdict::Reject(r),
        }
    }
}

//! `${VAR}` and `${VAR:-default}` substitution in configuration text, before it is parsed.
//!
//! - `${VAR}` is replaced by the variable's value; an unset variable is an error that names
//!   it and its line.
//! - `${VAR:-default}` is replaced by the value, or by `default` when the variable is unset
//!   or empty (as in POSIX shells).
//! - `$${` stands for a literal `${`.
//!
//! Substitution is textual and happens anywhere in the file, comments included, so a value
//! that contains quotes must be quoted suitably by whoever sets it.

/// A substitution failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubstError {
    /// `${VAR}` names a variable that is not set, and gives no default.
    #[error(
        "line {line}: environment variable `{name}` is not set (use `${{{name}:-default}}` to give a default)"
    )]
    Missing {
        /// The variable.
        name: String,
        /// 1-based line of the reference.
        line: usize,
    },
    /// `${` without a closing `}` or with an invalid name.
    #[error("line {line}: malformed variable reference `{text}`")]
    Malformed {
        /// The reference as written (up to the end of its line).
        text: String,
        /// 1-based line of the reference.
        line: usize,
    },
}

/// Substitutes variables in `text`, looking them up with `lookup`.
pub fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, SubstError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut line = 1;
    while let Some(at) = rest.find('$') {
        let (before, from) = rest.split_at(at);
        out.push_str(before);
        line += before.matches('\n').count();
        if let Some(after) = from.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(body) = from.strip_prefix("${") else {
            out.push('$');
            rest = &from[1..];
            continue;
        };
        let malformed = || SubstError::Malformed {
            text: from.lines().next().unwrap_or(from).to_string(),
            line,
        };
        let end = body.find('}').ok_or_else(malformed)?;
        let inner = &body[..end];
        if inner.contains('\n') {
            return Err(malformed());
        }
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(malformed());
        }
        let value = match (lookup(name), default) {
            (Some(v), Some(d)) if v.is_empty() => d.to_string(),
            (Some(v), _) => v,
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(SubstError::Missing {
                    name: name.to_string(),
                    line,
                });
            }
        };
        out.push_str(&value);
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Substitutes variables from the process environment.
pub fn substitute_env(text: &str) -> Result<String, SubstError> {
    substitute(text, |name| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("kafka:9092".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn values_defaults_and_escapes() {
        let text =
            "a = \"${HOST}\"\nb = \"${NOPE:-x:y}\"\nc = \"${EMPTY:-d}\"\nd = \"$${HOST} $5\"";
        assert_eq!(
            substitute(text, env).unwrap(),
            "a = \"kafka:9092\"\nb = \"x:y\"\nc = \"d\"\nd = \"${HOST} $5\""
        );
    }

    #[test]
    fn missing_names_variable_and_line() {
        let err = substitute("a = 1\n\nb = \"${KAFKA_TOPIC}\"", env).unwrap_err();
        assert_eq!(
            err,
            SubstError::Missing {
                name: "KAFKA_TOPIC".into(),
                line: 3
            }
        );
        assert!(err.to_string().contains("line 3"), "{err}");
    }

    #[test]
    fn malformed_references() {
        for text in [
            "x = \"${HOST\"\ny = 1",
            "x = \"${}\"",
            "x = \"${1A}\"",
            "x=\"${A B}\"",
        ] {
            assert!(
                matches!(
                    substitute(text, env),
                    Err(SubstError::Malformed { line: 1, .. })
                ),
                "{text}"
            );
        }
    }
}

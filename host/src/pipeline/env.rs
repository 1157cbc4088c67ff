//! `${VAR}` and `${VAR:-default}` substitution in configuration text, before it is parsed.
//!
//! - `${VAR}` is replaced by the variable's value; an unset variable is an error that names
//!   it and its line.
//! - `${VAR:-default}` is replaced by the value, or by `default` when the variable is unset
//!   or empty (as in POSIX shells).
//! - `$${` stands for a literal `${`.
//!
//! Substitution knows where it is in the TOML text, so a value arrives byte for byte:
//! - inside a basic string (`"..."`, `"""..."""`) the value is escaped, so a `"`, a `\`, a
//!   tab or a line break in it stays what it is;
//! - inside a literal string (`'...'`) it is inserted as is, and a value that a literal
//!   string cannot hold (a `'` or a line break) is an error that names the variable;
//! - outside strings it is inserted as is, for numbers and booleans
//!   (`max-records = ${N:-100000}`); a line break there is an error;
//! - comments are left alone, `${` and all.
//!
//! Lines never move, so error lines are those of the file. The values that came from the
//! environment are kept, with where they are in the text, so error messages can hide them
//! ([`Substituted::hide`]): as they are and in every escaped form a parser may write them
//! (`"Quo\"te"`), and, in an error about a value from the environment, every quoted string
//! of the message (a parser may quote only a part of the value, such as a unit).

use std::ops::Range;

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
    /// The value cannot be written where the reference is.
    #[error("line {line}: the value of `{name}` {why}")]
    Unfit {
        /// The variable.
        name: String,
        /// 1-based line of the reference.
        line: usize,
        /// Why (never the value).
        why: &'static str,
    },
}

/// Text after substitution, with the values taken from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Substituted {
    /// The text.
    pub text: String,
    /// Values read from the environment (not defaults), to keep out of messages.
    pub secrets: Vec<String>,
    /// Where those values are in `text` (byte ranges, as written there: escaped inside a
    /// basic string).
    pub spans: Vec<Range<usize>>,
}

impl Substituted {
    /// `message` with every value from the environment of 4 bytes or more replaced by
    /// `***`, as it is and in every escaped form a message may hold it ([`forms`]).
    pub fn redact(&self, message: &str) -> String {
        let mut forms: Vec<String> = self
            .secrets
            .iter()
            .filter(|s| s.len() >= 4)
            .flat_map(|s| forms(s))
            .filter(|f| !f.is_empty())
            .collect();
        // The longest first, so that a shorter form leaves no part of a longer one.
        forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
        forms.dedup();
        let mut out = message.to_string();
        for form in &forms {
            out = out.replace(form.as_str(), "***");
        }
        out
    }

    /// An error `message` about the text at `span` (as the parser gives it), fit to show:
    /// [`Self::redact`]ed and, when `span` touches a value from the environment, with every
    /// quoted string (`"..."`) replaced by `"***"`, since a parser may quote a part of the
    /// value (`duration "12x" has unknown unit "x"`) that no form of the whole matches.
    pub fn hide(&self, message: &str, span: Option<Range<usize>>) -> String {
        let touches = span.is_some_and(|span| {
            self.spans
                .iter()
                .any(|v| v.start < span.end.max(span.start + 1) && span.start < v.end)
        });
        // Redacted first: a quote inside a secret must not decide where a quoted string
        // ends.
        let redacted = self.redact(message);
        if touches {
            hide_quoted(&redacted)
        } else {
            redacted
        }
    }
}

/// `secret` as messages may write it: as it is, and escaped as Rust's `{:?}` and
/// `escape_default`, JSON and TOML basic strings write it (without the quotes).
fn forms(secret: &str) -> [String; 5] {
    let inner = |quoted: String| {
        let inner = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'));
        inner.unwrap_or(&quoted).to_string()
    };
    let mut toml = String::new();
    escape_basic(secret, &mut toml);
    [
        secret.to_string(),
        inner(format!("{secret:?}")),
        inner(serde_json::to_string(secret).unwrap_or_default()),
        toml,
        secret.escape_default().to_string(),
    ]
}

/// `message` with the content of every `"..."` (escapes and all; an unclosed one to the
/// end) replaced by `***`.
fn hide_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..=open]);
        out.push_str("***");
        let after = &rest[open + 1..];
        let mut escaped = false;
        let close = after.char_indices().find_map(|(i, c)| {
            let end = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            end.then_some(i)
        });
        match close {
            Some(close) => {
                out.push('"');
                rest = &after[close + 1..];
            }
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// Where in the TOML text the scanner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Outside strings and comments.
    Bare,
    /// `"..."`.
    Basic,
    /// `"""..."""`.
    MultiBasic,
    /// `'...'`.
    Literal,
    /// `'''...'''`.
    MultiLiteral,
}

/// Substitutes variables in `text`, looking them up with `lookup`.
pub fn substitute(
    text: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Substituted, SubstError> {
    let mut out = Substituted {
        text: String::with_capacity(text.len()),
        secrets: Vec::new(),
        spans: Vec::new(),
    };
    let mut place = Place::Bare;
    let mut rest = text;
    let mut line = 1;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("$${") {
            out.text.push_str("${");
            rest = after;
            continue;
        }
        if rest.starts_with("${") {
            rest = reference(rest, place, line, &lookup, &mut out)?;
            continue;
        }
        let (token, next) = step(rest, place);
        line += token.matches('\n').count();
        out.text.push_str(token);
        rest = &rest[token.len()..];
        place = next;
    }
    Ok(out)
}

/// The next token at `place` (a comment, an escape, a delimiter or one character) and the
/// place after it.
fn step(rest: &str, place: Place) -> (&str, Place) {
    let one = &rest[..rest.chars().next().map_or(0, char::len_utf8)];
    let three = |delim: &str| rest.starts_with(delim);
    match place {
        Place::Bare if rest.starts_with('#') => {
            (&rest[..rest.find('\n').unwrap_or(rest.len())], Place::Bare)
        }
        Place::Bare if three("\"\"\"") => (&rest[..3], Place::MultiBasic),
        Place::Bare if three("'''") => (&rest[..3], Place::MultiLiteral),
        Place::Bare if one == "\"" => (one, Place::Basic),
        Place::Bare if one == "'" => (one, Place::Literal),
        Place::Basic | Place::MultiBasic if one == "\\" => {
            let len = 1 + rest[1..].chars().next().map_or(0, char::len_utf8);
            (&rest[..len], place)
        }
        Place::Basic if one == "\"" => (one, Place::Bare),
        Place::MultiBasic if three("\"\"\"") => (&rest[..3], Place::Bare),
        Place::Literal if one == "'" => (one, Place::Bare),
        Place::MultiLiteral if three("'''") => (&rest[..3], Place::Bare),
        _ => (one, place),
    }
}

/// Replaces the reference at the start of `from`, written at `place`; returns the text after
/// it.
fn reference<'t>(
    from: &'t str,
    place: Place,
    line: usize,
    lookup: &impl Fn(&str) -> Option<String>,
    out: &mut Substituted,
) -> Result<&'t str, SubstError> {
    let body = &from[2..];
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
    let start = out.text.len();
    let (value, secret) = match (lookup(name), default) {
        (Some(v), Some(d)) if v.is_empty() => (d.to_string(), false),
        (Some(v), _) => (v, true),
        (None, Some(d)) => (d.to_string(), false),
        (None, None) => {
            return Err(SubstError::Missing {
                name: name.to_string(),
                line,
            });
        }
    };
    let unfit = |why| SubstError::Unfit {
        name: name.to_string(),
        line,
        why,
    };
    match place {
        Place::Basic | Place::MultiBasic => escape_basic(&value, &mut out.text),
        Place::Literal if value.contains(['\'', '\n', '\r']) => {
            return Err(unfit(
                "holds a quote or a line break, which a '...' string cannot: use \"...\"",
            ));
        }
        Place::MultiLiteral if value.contains("'''") || value.contains('\n') => {
            return Err(unfit(
                "holds ''' or a line break, which would change the file: use \"\"\"...\"\"\"",
            ));
        }
        Place::Bare if value.contains(['\n', '\r', '#']) => {
            return Err(unfit(
                "holds a line break or a `#` and is outside quotes: quote the reference",
            ));
        }
        _ => out.text.push_str(&value),
    }
    if secret {
        out.secrets.push(value);
        out.spans.push(start..out.text.len());
    }
    Ok(&body[end + 1..])
}

/// Writes `value` escaped for a TOML basic string: its characters, not its syntax.
fn escape_basic(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
}

/// Substitutes variables from the process environment.
pub fn substitute_env(text: &str) -> Result<Substituted, SubstError> {
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
            substitute(text, env).unwrap().text,
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

    fn secret(name: &str) -> Option<String> {
        match name {
            "SECRET" => Some("a\tb\\c\"d'e\u{1}f".into()),
            "N" => Some("250".into()),
            "MULTI" => Some("x\ny".into()),
            _ => None,
        }
    }

    #[test]
    fn values_arrive_byte_for_byte_in_strings_and_as_numbers() {
        let text = "a = \"${SECRET}\"\nb = \"\"\"${SECRET}\"\"\"\nn = ${N:-100000}\nm = ${NOPE:-7}\n\
                    c = \"${MULTI}\"";
        let out = substitute(text, secret).unwrap();
        let parsed: toml::Table = toml::from_str(&out.text).unwrap();
        assert_eq!(parsed["a"].as_str(), Some("a\tb\\c\"d'e\u{1}f"));
        assert_eq!(parsed["b"].as_str(), Some("a\tb\\c\"d'e\u{1}f"));
        assert_eq!(parsed["n"].as_integer(), Some(250));
        assert_eq!(parsed["m"].as_integer(), Some(7));
        assert_eq!(parsed["c"].as_str(), Some("x\ny"));
        assert_eq!(out.text.lines().count(), 5, "lines never move");
    }

    #[test]
    fn comments_are_left_alone() {
        let text =
            "# set ${UNSET} and $${X} here, or \"${SECRET}\"\na = 1 # ${ALSO_UNSET}\nb = '#'";
        let out = substitute(text, secret).unwrap();
        assert_eq!(out.text, text);
        assert!(out.secrets.is_empty());
    }

    #[test]
    fn values_that_do_not_fit_name_the_variable_not_the_value() {
        for text in ["a = '${SECRET}'", "a = ${MULTI}", "a = '''${MULTI}'''"] {
            let err = substitute(text, secret).unwrap_err();
            assert!(
                matches!(err, SubstError::Unfit { line: 1, .. }),
                "{text}: {err}"
            );
            let message = err.to_string();
            assert!(
                !message.contains("a\tb") && !message.contains("x\ny"),
                "{message}"
            );
        }
        // A literal string holds what it can.
        let out = substitute("a = '${N}'", secret).unwrap();
        assert_eq!(out.text, "a = '250'");
    }

    #[test]
    fn errors_can_hide_the_values() {
        let text = "a = \"${SECRET}\"\nb = ${N}\nc = \"${NOPE:-default-value}\"";
        let out = substitute(text, secret).unwrap();
        assert_eq!(out.secrets.len(), 2);
        let message = "bad value a\tb\\c\"d'e\u{1}f near 250 and default-value";
        assert_eq!(
            out.redact(message),
            "bad value *** near 250 and default-value"
        );
    }

    /// Secrets with a quote, a backslash, a tab, a line break, a control character and
    /// non-ASCII letters, each put where it makes a configuration error (a duration), as
    /// the finding did: the message holds no form of it, nor a part a parser quoted.
    #[test]
    fn secrets_never_appear_in_any_form() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Timed {
            #[serde(deserialize_with = "crate::units::duration::deserialize")]
            interval: std::time::Duration,
        }
        let secrets = [
            "Quo\"te-s3cr3t",
            "back\\slash-s3cr3t",
            "tab\there-s3cr3t",
            "line\nbreak-s3cr3t",
            "ctl\u{1}-s3cr3t",
            "ünï-cødé-s3cr3t",
            "12Quo\"te\t-s3cr3t",
            "12 s3cr3t",
        ];
        for secret in secrets {
            let lookup = |name: &str| (name == "SECRET").then(|| secret.to_string());
            for text in [
                "interval = \"${SECRET}\"",
                "interval = \"\"\"${SECRET}\"\"\"",
            ] {
                let out = substitute(text, lookup).unwrap();
                let error = toml::from_str::<Timed>(&out.text).unwrap_err();
                assert!(error.message().contains("s3cr3t"), "the parser echoes it");
                let shown = out.hide(error.message(), error.span());
                assert!(!shown.contains("s3cr3t"), "{secret:?}: {shown}");
                assert!(shown.contains("duration"), "{shown}");
                for form in forms(secret) {
                    assert!(!shown.contains(&form), "{secret:?}: {shown}");
                }
            }
        }
    }

    /// Every escaped form is redacted anywhere in a message; quoted strings are hidden only
    /// in an error about a value from the environment.
    #[test]
    fn escaped_forms_are_redacted_and_quotes_hidden_only_where_a_secret_is() {
        let lookup = |name: &str| (name == "SECRET").then(|| "a\"b\\c\td\u{e9}".to_string());
        let out = substitute("a = \"${SECRET}\"\nb = \"x\"", lookup).unwrap();
        assert_eq!(out.spans, vec![5..17]);
        assert_eq!(&out.text[5..17], "a\\\"b\\\\c\\td\u{e9}");
        let message =
            "1 a\"b\\c\td\u{e9} 2 a\\\"b\\\\c\\td\u{e9} 3 a\\\"b\\\\c\\td\\u{e9} 4 \"q\\\"x\" 5";
        assert_eq!(out.redact(message), "1 *** 2 *** 3 *** 4 \"q\\\"x\" 5");
        // An error about `b` keeps its quotes; one about `a` does not; a lone quote hides
        // to the end.
        assert_eq!(out.hide("bad \"x\" here", Some(23..26)), "bad \"x\" here");
        assert_eq!(
            out.hide("bad \"q\\\"x\" and \"y", Some(4..22)),
            "bad \"***\" and \"***"
        );
        // A secret echoed as it is, quote and all, is hidden whole.
        assert_eq!(
            out.hide(
                "unknown variant `a\"b\\c\td\u{e9}`, expected \"x\"",
                Some(4..22)
            ),
            "unknown variant `***`, expected \"***\""
        );
    }
}

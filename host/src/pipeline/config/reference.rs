//! The configuration reference, generated: the JSON schema of [`PipelineConfig`] (derived
//! with `schemars` from the config types, their doc comments as descriptions) rendered as
//! markdown, one section per TOML table and a row per key. The book's
//! `docs/src/reference/configuration.md` is this text; a test fails when it is stale, and
//! `SLUICE_BLESS=1` writes it anew.

use serde_json::{Map, Value};

use super::PipelineConfig;

/// Where the generated reference lives, from the repository's root.
pub const REFERENCE_PATH: &str = "docs/src/reference/configuration.md";

const HEADER: &str = "# Configuration reference

<!-- Generated from the doc comments of the config types: do not edit. To update it, run
     SLUICE_BLESS=1 cargo test -p sluice --lib config_reference_is_current -->

A pipeline file (`sluice run --config FILE`) is TOML. Each section below is one table of it;
unknown keys are refused. Durations are written as a whole number and a unit (`\"250ms\"`,
`\"30s\"`, `\"5m\"`, `\"1h\"`, `\"3d\"`); sizes as `\"64MiB\"`, `\"512KiB\"`, `\"10MB\"` or a
number of bytes. `${VAR}` in a value is replaced by the environment variable `VAR`.
";

/// The JSON schema of a pipeline file.
pub fn schema() -> Value {
    schemars::schema_for!(PipelineConfig).to_value()
}

/// The configuration reference, as markdown.
pub fn render() -> String {
    let schema = schema();
    let mut out = String::from(HEADER);
    Renderer {
        defs: schema.get("$defs").and_then(Value::as_object),
        out: &mut out,
    }
    .section(&Section {
        path: String::new(),
        array: false,
        intro: String::new(),
        schema: &schema,
    });
    out
}

/// Properties (by `Type.key`) that have no description: fields without a doc comment.
pub fn undocumented() -> Vec<String> {
    let schema = schema();
    let mut objects: Vec<(String, &Value)> = vec![("PipelineConfig".into(), &schema)];
    if let Some(defs) = schema.get("$defs").and_then(Value::as_object) {
        objects.extend(defs.iter().map(|(name, def)| (name.clone(), def)));
    }
    let mut missing = Vec::new();
    for (name, object) in objects {
        for (variant, props) in properties_of(object) {
            for (key, prop) in props {
                if text(prop, "description").is_empty() {
                    missing.push(format!("{name}{variant}.{key}"));
                }
            }
        }
    }
    missing
}

/// The property lists of an object schema, and of each of its alternatives (`oneOf` and
/// `anyOf` members), with a suffix naming the alternative.
fn properties_of(schema: &Value) -> Vec<(String, &Map<String, Value>)> {
    let mut lists = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        lists.push((String::new(), props));
    }
    for key in ["oneOf", "anyOf"] {
        for (i, member) in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(props) = member.get("properties").and_then(Value::as_object) {
                lists.push((format!("[{key} {i}]"), props));
            }
        }
    }
    lists
}

/// A table of the file: its dotted path, whether it is an array of tables, what its key's
/// doc comment says, and its schema.
struct Section<'a> {
    path: String,
    array: bool,
    intro: String,
    schema: &'a Value,
}

/// What a key holds, for the reference.
enum Shape<'a> {
    /// A table of its own (a struct).
    Table(&'a Value),
    /// An array of tables (a list of structs).
    Tables(&'a Value),
    /// A value in its table's row.
    Value,
}

struct Renderer<'a, 'o> {
    defs: Option<&'a Map<String, Value>>,
    out: &'o mut String,
}

impl<'a> Renderer<'a, '_> {
    /// Writes `section` (its heading, intro and rows), then the tables inside it.
    fn section(&mut self, section: &Section<'a>) {
        let schema = self.resolve(section.schema);
        if !section.path.is_empty() {
            let (open, close) = if section.array {
                ("[[", "]]")
            } else {
                ("[", "]")
            };
            self.out
                .push_str(&format!("\n## `{open}{}{close}`\n\n", section.path));
            if !section.intro.is_empty() {
                self.out.push_str(&paragraphs(&section.intro));
                self.out.push_str("\n\n");
            }
        }
        let (rows, nested) = self.contents(&section.path, schema);
        if !rows.is_empty() {
            self.out
                .push_str("| Key | Type | Default | Description |\n");
            self.out
                .push_str("|-----|------|---------|-------------|\n");
            for row in rows {
                self.out.push_str(&row);
            }
        }
        for inner in &nested {
            self.section(inner);
        }
    }

    /// The rows of the table at `path` (its plain keys), and the tables inside it.
    fn contents(&self, path: &str, schema: &'a Value) -> (Vec<String>, Vec<Section<'a>>) {
        let (mut rows, mut nested) = (Vec::new(), Vec::new());
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return (rows, nested);
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (key, prop) in props {
            let path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let intro = text(prop, "description").to_string();
            match self.shape(prop) {
                Shape::Table(schema) => nested.push(Section {
                    path,
                    array: false,
                    intro,
                    schema,
                }),
                Shape::Tables(schema) => nested.push(Section {
                    path,
                    array: true,
                    intro,
                    schema,
                }),
                Shape::Value => rows.push(self.row(key, prop, required.contains(&key.as_str()))),
            }
        }
        (rows, nested)
    }

    /// One key's row: key, type, default, description (and the values of an enum).
    fn row(&self, key: &str, prop: &Value, required: bool) -> String {
        let default = match prop.get("default") {
            Some(Value::Null) => "unset".into(),
            Some(value) => format!("`{}`", toml_value(value)),
            None if required => "required".into(),
            None => "—".into(),
        };
        let mut description = paragraphs(text(prop, "description")).replace('\n', "<br>");
        for (value, doc) in self.variants(prop) {
            description.push_str(&format!(
                "<br>`{value}`: {}",
                paragraphs(&doc).replace('\n', " ")
            ));
        }
        format!(
            "| `{key}` | {} | {default} | {} |\n",
            cell(&self.type_name(prop)),
            cell(&description)
        )
    }

    /// Follows a `$ref` to its definition.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        let target = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| self.defs?.get(name));
        target.unwrap_or(schema)
    }

    /// `schema` without an `Option`'s null: its one other alternative, resolved.
    fn unwrap_option(&self, schema: &'a Value) -> &'a Value {
        let schema = self.resolve(schema);
        let members = schema.get("anyOf").and_then(Value::as_array);
        let others: Vec<&Value> = members
            .into_iter()
            .flatten()
            .filter(|m| m.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        match (members, others.as_slice()) {
            (Some(all), [one]) if all.len() == 2 => self.resolve(one),
            _ => schema,
        }
    }

    fn shape(&self, prop: &'a Value) -> Shape<'a> {
        let schema = self.unwrap_option(prop);
        if schema.get("properties").is_some() {
            return Shape::Table(schema);
        }
        if let Some(items) = schema.get("items") {
            let item = self.unwrap_option(items);
            if item.get("properties").is_some() {
                return Shape::Tables(item);
            }
        }
        Shape::Value
    }

    /// The values of an enum key with a doc comment each: (`"value"`, doc).
    fn variants(&self, prop: &'a Value) -> Vec<(String, String)> {
        let schema = self.unwrap_option(prop);
        let Some(members) = schema.get("oneOf").and_then(Value::as_array) else {
            return Vec::new();
        };
        members
            .iter()
            .filter_map(|m| {
                let value = m.get("const").or_else(|| m.get("enum")?.get(0))?;
                let doc = text(m, "description");
                (!doc.is_empty()).then(|| (toml_value(value), doc.to_string()))
            })
            .collect()
    }

    /// A short name of what a key holds: `string`, `integer`, `duration`, `"a" \| "b"`,
    /// `array of string`, `table of string`...
    fn type_name(&self, schema: &'a Value) -> String {
        let schema = self.resolve(schema);
        if let Some(unit) = schema.get("x-sluice-unit").and_then(Value::as_str) {
            return unit.to_string();
        }
        if let Some(value) = schema.get("const") {
            return format!("`{}`", toml_value(value));
        }
        if let Some(values) = schema.get("enum").and_then(Value::as_array) {
            let shown: Vec<String> = values
                .iter()
                .filter(|v| !v.is_null())
                .map(|v| format!("`{}`", toml_value(v)))
                .collect();
            return shown.join(" or ");
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(members) = schema.get(key).and_then(Value::as_array) {
                let mut names: Vec<String> = Vec::new();
                for member in members {
                    let name = self.type_name(member);
                    if name != "null" && !names.contains(&name) {
                        names.push(name);
                    }
                }
                return names.join(" or ");
            }
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let names: Vec<String> = types
            .into_iter()
            .filter(|t| *t != "null" || schema.get("type").is_some_and(Value::is_string))
            .map(|t| self.simple_type(t, schema))
            .collect();
        if names.is_empty() {
            "any".into()
        } else {
            names.join(" or ")
        }
    }

    fn simple_type(&self, ty: &str, schema: &'a Value) -> String {
        match ty {
            "array" => match schema.get("items") {
                Some(items) => format!("array of {}", self.type_name(items)),
                None => "array".into(),
            },
            "object" => match schema.get("additionalProperties") {
                Some(Value::Bool(false)) | None => "table".into(),
                Some(Value::Bool(true)) => "table".into(),
                Some(values) => format!("table of {}", self.type_name(values)),
            },
            other => other.to_string(),
        }
    }
}

/// The string at `key` of `schema`, or nothing.
fn text<'v>(schema: &'v Value, key: &str) -> &'v str {
    schema.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A JSON value as TOML writes it.
fn toml_value(value: &Value) -> String {
    match value {
        Value::Null => "none".into(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) if map.is_empty() => "{}".into(),
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect();
            format!("{{ {} }}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// A doc comment as markdown: lines of a paragraph joined, paragraphs kept apart (one
/// newline between them), intra-doc links (`` [`x`] ``) as plain code.
fn paragraphs(doc: &str) -> String {
    let joined: Vec<String> = doc
        .split("\n\n")
        .map(|p| p.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty())
        .collect();
    unlink(&joined.join("\n"))
}

/// Removes the brackets of rustdoc links (`` [`crate::lookup`] `` becomes `` `crate::lookup` ``),
/// which mean nothing in the book.
fn unlink(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start..].find("`]") else {
            break;
        };
        let end = start + len + 2;
        let followed_by_target = rest[end..].starts_with('(') || rest[end..].starts_with('[');
        out.push_str(&rest[..start]);
        if followed_by_target {
            out.push_str(&rest[start..end]);
        } else {
            out.push_str(&rest[start + 1..end - 1]);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Text fit for a table cell: no pipes.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn reference_file() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(REFERENCE_PATH)
    }

    #[test]
    fn config_reference_is_current() {
        let rendered = render();
        let path = reference_file();
        if std::env::var_os("SLUICE_BLESS").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &rendered).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != rendered {
            let line = committed
                .lines()
                .zip(rendered.lines())
                .position(|(a, b)| a != b)
                .map_or(
                    committed.lines().count().min(rendered.lines().count()),
                    |i| i,
                );
            panic!(
                "{REFERENCE_PATH} is stale: the config types' doc comments or fields changed \
                 (first difference at line {}). Regenerate it with \
                 `SLUICE_BLESS=1 cargo test -p sluice --lib config_reference_is_current` \
                 and commit it.",
                line + 1
            );
        }
    }

    #[test]
    fn every_config_field_has_a_doc_comment() {
        let missing = undocumented();
        assert!(
            missing.is_empty(),
            "config fields without a doc comment (the reference would show them bare): {missing:?}"
        );
    }

    #[test]
    fn sections_and_keys_come_from_the_types() {
        let text = render();
        for expected in [
            "\n## `[pipeline]`\n",
            "\n## `[source]`\n",
            "\n## `[[stages]]`\n",
            "\n## `[sink]`\n",
            "| `name` | string | required |",
            "| `fault-budget` | duration | `\"5m\"` |",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
        assert!(!text.contains("assume-new"), "skipped fields stay out");
    }

    #[test]
    fn links_lose_their_brackets() {
        assert_eq!(unlink("see [`crate::lookup`]."), "see `crate::lookup`.");
        assert_eq!(unlink("[`a`](b) [`c`]"), "[`a`](b) `c`");
        assert_eq!(paragraphs("one\ntwo\n\nthree"), "one two\nthree");
    }
}

//! The layer order of the crate, written once, and the test that holds the tree to it.
//!
//! Data flows one way, and so do imports: a module may use modules of its own layer or of
//! a lower one, never a higher one, and no two top-level modules may import each other,
//! directly or around a circle. Inside one module, sibling files may form a small import
//! cycle only where the module's own documentation names it, on a line that starts with
//! `Import cycle:` and lists the files (e.g. `//! Import cycle: window, session: …why…`).
//!
//! Lowest first (see the crate documentation for what each module is):

/// The layers, lowest first: each row may import itself and the rows above it.
pub const LAYERS: &[&[&str]] = &[
    // Floors: the unit of data and its positions, units, the allocator, the generator, the
    // retry schedule, durable file writes, exact decimals, progress bars.
    &[
        "units", "record", "alloc", "generate", "retry", "files", "decimal", "bar",
    ],
    // Kafka clients, topic administration, output-topic targets.
    &["kafka"],
    // What a commit records: marks, offsets, lookup versions, the state file's name.
    &["checkpoint"],
    // The micro-batch trigger and caps.
    &["batch"],
    // Record formats: Avro datums, the wire format, the Schema Registry.
    &["format"],
    // JSON and Avro to Arrow against a table's schema.
    &["encode"],
    // The Iceberg adapter: catalog, writer, fence, commit, read, maintain, storage.
    &["iceberg"],
    // Where records come from.
    &["source"],
    // Which process runs an event-time pipeline.
    &["election"],
    // Reference data, versioned per batch.
    &["lookup"],
    // The Wasm plugin runtime.
    &["plugin"],
    // Watermarks, dedup, windows, sessions, joins and their state.
    &["event_time"],
    // Outputs and the order of a batch's side effects.
    &["sink"],
    // What a batch reports.
    &["progress"],
    // The admin HTTP API.
    &["admin"],
    // The loop that ties them together.
    &["pipeline"],
    // The command line.
    &["cli"],
];

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    use super::LAYERS;

    /// A `use`/path reference found in a source file.
    struct Import {
        file: String,
        line: usize,
        target: String,
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    fn src() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    /// The identifiers that follow `prefix` on the line (`crate::x` → `x`).
    fn after<'a>(line: &'a str, prefix: &str) -> Vec<&'a str> {
        line.match_indices(prefix)
            .filter(|(at, _)| {
                // Not the tail of a longer path or identifier.
                !line[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
            })
            .map(|(at, _)| {
                let rest = &line[at + prefix.len()..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                &rest[..end]
            })
            .collect()
    }

    /// Code lines of a file (comments and doc comments left out), numbered from 1.
    fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
        text.lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l))
            .filter(|(_, l)| !l.trim_start().starts_with("//"))
    }

    /// Every `crate::<module>` reference of every top-level module, by module.
    fn imports() -> BTreeMap<String, Vec<Import>> {
        let root = src();
        let mut files = Vec::new();
        sources(&root, &mut files);
        let mut by_module: BTreeMap<String, Vec<Import>> = BTreeMap::new();
        for path in files {
            let relative = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if ["lib.rs", "main.rs", "layers.rs"].contains(&relative.as_str()) {
                continue;
            }
            let top = relative.split('/').next().unwrap().trim_end_matches(".rs");
            let text = std::fs::read_to_string(&path).unwrap();
            let list = by_module.entry(top.to_string()).or_default();
            for (line, code) in code_lines(&text) {
                for target in after(code, "crate::") {
                    if target != top && !target.is_empty() {
                        list.push(Import {
                            file: relative.clone(),
                            line,
                            target: target.to_string(),
                        });
                    }
                }
            }
        }
        by_module
    }

    fn layer(module: &str) -> Option<usize> {
        LAYERS.iter().position(|row| row.contains(&module))
    }

    #[test]
    fn every_module_has_a_layer() {
        let declared: BTreeSet<String> = std::fs::read_to_string(src().join("lib.rs"))
            .unwrap()
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod "))
            .map(|m| m.trim_end_matches(';').to_string())
            .collect();
        let missing: Vec<&String> = declared
            .iter()
            .filter(|m| layer(m).is_none() && m.as_str() != "layers")
            .collect();
        assert!(
            missing.is_empty(),
            "modules without a layer in LAYERS: {missing:?}"
        );
    }

    #[test]
    fn no_module_imports_a_higher_layer() {
        let mut wrong = Vec::new();
        for (module, list) in imports() {
            let Some(own) = layer(&module) else { continue };
            for import in list {
                match layer(&import.target) {
                    Some(target) if target <= own => {}
                    Some(_) => wrong.push(format!(
                        "{}:{}: {module} uses crate::{}, a higher layer",
                        import.file, import.line, import.target
                    )),
                    None => wrong.push(format!(
                        "{}:{}: crate::{} has no layer in LAYERS",
                        import.file, import.line, import.target
                    )),
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "imports that run up the layers:\n{}",
            wrong.join("\n")
        );
    }

    /// Modules that can reach `from` along `edges`, `from` included.
    fn reach(from: &str, edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(next) = todo.pop() {
            for to in edges.get(&next).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    }

    /// The import cycles among `edges`: each one as the sorted set of its members.
    fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
        let nodes: BTreeSet<&String> = edges.keys().chain(edges.values().flatten()).collect();
        let mut found = BTreeSet::new();
        for node in nodes {
            let from = reach(node, edges);
            if from.contains(node) {
                let circle: Vec<String> = from
                    .into_iter()
                    .filter(|other| reach(other, edges).contains(node))
                    .collect();
                found.insert(circle);
            }
        }
        found
    }

    #[test]
    fn no_two_top_level_modules_import_each_other() {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, list) in imports() {
            let targets = list.into_iter().map(|i| i.target);
            edges.entry(module).or_default().extend(targets);
        }
        let found = cycles(&edges);
        assert!(
            found.is_empty(),
            "import cycles between top-level modules: {found:?}"
        );
    }

    /// The sibling files of `module` (its folder) that each file imports (outside its tests):
    /// through
    /// `crate::module::x` or `super::x` (from a direct child) or `super::super::x` (from a
    /// grandchild).
    fn sibling_edges(module: &str) -> BTreeMap<String, BTreeSet<String>> {
        let folder = src().join(module);
        let mut files = Vec::new();
        sources(&folder, &mut files);
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let full = format!("crate::{module}::");
        for path in files {
            let relative = path
                .strip_prefix(&folder)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let parts: Vec<&str> = relative.split('/').collect();
            let own = parts[0].trim_end_matches(".rs");
            if own == "mod" {
                continue;
            }
            // How many `super::` lead from this file to the module's folder.
            let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
            let to_module = "super::".repeat(depth);
            if parts.last() == Some(&"tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Test code may reach across: only what ships counts.
            let shipped = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (_, code) in code_lines(shipped) {
                let mut targets = after(code, &full);
                targets.extend(after(code, &to_module));
                let is_sibling = |t: &&str| {
                    *t != own
                        && (folder.join(format!("{t}.rs")).exists()
                            || folder.join(t).join("mod.rs").exists())
                };
                let siblings = targets.into_iter().filter(is_sibling);
                edges
                    .entry(own.to_string())
                    .or_default()
                    .extend(siblings.map(String::from));
            }
        }
        edges
    }

    #[test]
    fn sibling_cycles_are_documented_by_their_module() {
        let mut undocumented = Vec::new();
        for module in LAYERS.iter().flat_map(|row| row.iter()) {
            let folder = src().join(module);
            if !folder.is_dir() {
                continue;
            }
            let doc = [folder.join("mod.rs"), src().join(format!("{module}.rs"))]
                .iter()
                .find_map(|p| std::fs::read_to_string(p).ok())
                .unwrap_or_default();
            let allowed: Vec<BTreeSet<String>> = doc
                .lines()
                .filter_map(|l| l.trim().strip_prefix("//! Import cycle:"))
                .map(|l| {
                    let list = l.split(':').next().unwrap_or_default();
                    list.split(',')
                        .map(|f| f.trim().trim_matches('`').to_string())
                        .collect()
                })
                .collect();
            let edges = sibling_edges(module);
            for circle in cycles(&edges) {
                let members: BTreeSet<String> = circle.iter().cloned().collect();
                if !allowed.contains(&members) {
                    let inside: Vec<String> = circle
                        .iter()
                        .flat_map(|from| {
                            let to = edges.get(from).into_iter().flatten();
                            to.filter(|t| members.contains(*t))
                                .map(move |t| format!("{from} → {t}"))
                        })
                        .collect();
                    undocumented.push(format!(
                        "{module}: {} ({})",
                        circle.join(", "),
                        inside.join(", ")
                    ));
                }
            }
        }
        assert!(
            undocumented.is_empty(),
            "import cycles between sibling files that their module's documentation does not \
             name (add `//! Import cycle: a, b: why` or break the cycle):\n{}",
            undocumented.join("\n")
        );
    }
}

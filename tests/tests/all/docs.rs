//! The book (`docs/`) and the README stay true to the tree: every relative link resolves (a
//! chapter, a heading's anchor, a file of the repository), every chapter is in
//! `SUMMARY.md`, and every TOML snippet of the book parses through the real configuration
//! types, a whole pipeline file as `PipelineConfig::parse` reads it, a fragment merged into
//! a minimal pipeline first. The conventions are in the book's "Testing and contributing"
//! chapter.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

use sluice::pipeline::config::PipelineConfig;
use sluice::pipeline::env;
use sluice_tests::repo_root;

/// The minimal valid pipeline a fragment is merged into: every required section, and
/// `[event-time]`, which `[dedup]`, `[[windows]]` and `[[joins]]` need.
const BASE: &str = r#"
[pipeline]
name = "book"

[source]
bootstrap-servers = "localhost:9092"
topics = ["events"]

[sink]
warehouse = "warehouse"
namespace = "book"
table = "events"

[dead-letter]
topic = "dead-letters"

[event-time]
field = "timestamp"
max-delay = "2m"
"#;

/// Every Markdown file of the book, sorted.
fn chapters() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo_root().join("docs/src"), &mut out);
    out.sort();
    out
}

/// A fenced code block: its info string, its first line's number (1-based) and its text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// Splits Markdown into its fenced code blocks and the prose between them (code blocks
/// blanked out, so that the prose keeps its line numbers).
fn split(markdown: &str) -> (Vec<Block>, String) {
    let mut blocks = Vec::new();
    let mut prose = String::new();
    let mut open: Option<(String, Block)> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some((fence, block)) = &mut open {
            let closes = trimmed.starts_with(fence.as_str())
                && trimmed.trim_start_matches(['`', '~']).trim().is_empty();
            if !closes {
                block.text.push_str(line.trim_start_matches(' '));
                block.text.push('\n');
            }
            prose.push('\n');
            if closes {
                blocks.extend(open.take().map(|(_, block)| block));
            }
            continue;
        }
        let fence: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let info = &trimmed[fence.len()..];
        // A backtick fence's info string holds no backtick (else it is inline code).
        if fence.len() >= 3
            && fence.chars().all(|c| c == fence.chars().next().unwrap())
            && !(fence.starts_with('`') && info.contains('`'))
        {
            let block = Block {
                info: info.trim().to_string(),
                line: n + 2,
                text: String::new(),
            };
            open = Some((fence, block));
            prose.push('\n');
        } else {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    (blocks, prose)
}

/// `text` without its inline code spans.
fn without_code(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[start + ticks..];
        match after.find(&fence) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The anchors of a Markdown file's headings, as mdBook (and GitHub) make them: the
/// heading's text without markup, lower case, white space to `-`, other punctuation than
/// `-` and `_` dropped; a repeated anchor gets `-1`, `-2`, ...
fn anchors(markdown: &str) -> BTreeSet<String> {
    let (_, prose) = split(markdown);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in prose.lines() {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        // Link text stays, its target goes.
        let mut text = String::new();
        let mut rest = heading.trim();
        while let Some(i) = rest.find("](") {
            text.push_str(&rest[..i]);
            rest = rest[i + 2..].split_once(')').map_or("", |(_, r)| r);
        }
        text.push_str(rest);
        let id: String = text
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_lowercase().next().unwrap())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let count = seen.entry(id.clone()).or_default();
        out.insert(if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        });
        *count += 1;
    }
    out
}

/// The inline links `[text](target)` of a Markdown file's prose, with their line numbers.
fn links(markdown: &str) -> Vec<(usize, String)> {
    let (_, prose) = split(markdown);
    let mut out = Vec::new();
    for (n, line) in prose.lines().enumerate() {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push((n + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// `path` with its `.` and `..` resolved, without touching the disk.
fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What is wrong with `target`, a link in `file`; `None` when it resolves.
fn broken(file: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        normal(&file.parent().unwrap().join(path))
    };
    if !resolved.exists() {
        return Some(format!("{} does not exist", resolved.display()));
    }
    if anchor.is_empty() || resolved.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let known = anchors(&std::fs::read_to_string(&resolved).unwrap());
    (!known.contains(anchor)).then(|| format!("{} has no heading #{anchor}", resolved.display()))
}

/// Every broken link of `files`, as `file:line: target: why`.
fn broken_links(files: &[PathBuf]) -> Vec<String> {
    let root = repo_root();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        for (line, target) in links(&text) {
            if let Some(why) = broken(file, &target) {
                let name = file.strip_prefix(&root).unwrap_or(file).display();
                out.push(format!("{name}:{line}: ({target}): {why}"));
            }
        }
    }
    out
}

#[test]
fn every_link_of_the_book_and_the_readme_resolves() {
    let mut files = chapters();
    files.push(repo_root().join("README.md"));
    let broken = broken_links(&files);
    assert!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken.join("\n")
    );

    // Every chapter is in the table of contents.
    let src = repo_root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .map(|(_, target)| normal(&src.join(target)))
        .collect();
    let missing: Vec<_> = chapters()
        .into_iter()
        .filter(|c| !c.ends_with("SUMMARY.md") && !listed.contains(c))
        .collect();
    assert!(missing.is_empty(), "not in SUMMARY.md: {missing:?}");
}

/// The link checker finds what it must: a missing file, a missing anchor, in prose and not
/// in code.
#[test]
fn the_link_checker_names_broken_links() {
    let dir = std::env::temp_dir().join(format!("sluice-docs-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.md");
    std::fs::write(
        &page,
        "# A page\n\n## `[source] mode = \"group\"`\n\nSee [this](#source-mode--group), \
         [that](#a-page), [gone](#nowhere), [missing](other.md) and `[code](x.md)`.\n\n\
         ```sh\n[not a link](y.md)\n```\n",
    )
    .unwrap();
    let broken = broken_links(std::slice::from_ref(&page));
    assert_eq!(broken.len(), 2, "{broken:#?}");
    assert!(broken[0].contains("(#nowhere)"), "{broken:#?}");
    assert!(broken[1].contains("(other.md)"), "{broken:#?}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `text` with `${VAR}` substituted: a variable without a default gets a placeholder.
fn substituted(text: &str) -> String {
    let lookup = |name: &str| {
        text.contains(&format!("${{{name}}}"))
            .then(|| "x".repeat(8))
    };
    env::substitute(text, lookup)
        .unwrap_or_else(|e| panic!("{e}"))
        .text
}

/// `fragment` merged into `base`: tables key by key, arrays of tables appended, any other
/// value replaced.
fn merge(base: &mut toml::Table, fragment: toml::Table) {
    for (key, value) in fragment {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(old)), toml::Value::Table(new)) => merge(old, new),
            (Some(toml::Value::Array(old)), toml::Value::Array(new)) => old.extend(new),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Why a TOML snippet is not a valid pipeline, or part of one; `None` when it is.
fn refusal(snippet: &str) -> Option<String> {
    let text = substituted(snippet);
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(e) => return Some(e.to_string()),
    };
    if table.contains_key("pipeline") {
        return PipelineConfig::parse(&text, Path::new("snippet"))
            .err()
            .map(|e| e.to_string());
    }
    let mut config: toml::Table = BASE.parse().unwrap();
    merge(&mut config, table);
    toml::Value::Table(config)
        .try_into::<PipelineConfig>()
        .err()
        .map(|e| e.to_string())
}

/// Every TOML snippet of `files` that is not a valid pipeline (or part of one), as
/// `file:line: why`. A block opened with ```` ```toml,ignore ```` is skipped.
fn invalid_snippets(files: &[PathBuf]) -> (usize, Vec<String>) {
    let root = repo_root();
    let mut checked = 0;
    let mut out = Vec::new();
    for file in files {
        let (blocks, _) = split(&std::fs::read_to_string(file).unwrap());
        for block in blocks {
            let mut words = block.info.split([',', ' ']).map(str::trim);
            if words.next() != Some("toml") || words.any(|w| w == "ignore") {
                continue;
            }
            checked += 1;
            if let Some(why) = refusal(&block.text) {
                let name = file.strip_prefix(&root).unwrap_or(file).display();
                out.push(format!("{name}:{}: {why}", block.line));
            }
        }
    }
    (checked, out)
}

#[test]
fn every_toml_snippet_of_the_book_is_a_valid_pipeline_or_part_of_one() {
    let (checked, invalid) = invalid_snippets(&chapters());
    assert!(
        invalid.is_empty(),
        "{} of {checked} TOML snippets are refused:\n{}",
        invalid.len(),
        invalid.join("\n")
    );
    assert!(checked >= 12, "only {checked} TOML snippets found");
}

/// The snippet check refuses a misspelled key, in a whole file and in a fragment, and skips
/// a block marked `ignore`.
#[test]
fn the_snippet_check_refuses_a_misspelled_key() {
    let dir = std::env::temp_dir().join(format!("sluice-docs-toml-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.md");
    std::fs::write(
        &page,
        "```toml\n[[joins]]\nname = \"j\"\nright-topic = \"r\"\nright-time-feld = \"t\"\n\
         on = [\"k\"]\nleft-fields = [\"k\"]\nright-fields = [\"v\"]\n```\n\n\
         ```toml\n[pipeline]\nname = \"p\"\n[source]\nbootstrap-servers = \"b:9092\"\n\
         topics = [\"t\"]\n[sink]\nwarehouse = \"w\"\nnamespace = \"n\"\ntable = \"t\"\n\
         target-file-sise = \"1MiB\"\n[dead-letter]\ntopic = \"d\"\n```\n\n\
         ```toml,ignore\n[package]\nname = \"not-sluice\"\n```\n",
    )
    .unwrap();
    let (checked, invalid) = invalid_snippets(std::slice::from_ref(&page));
    assert_eq!(checked, 2);
    assert_eq!(invalid.len(), 2, "{invalid:#?}");
    assert!(invalid[0].contains("right-time-feld"), "{invalid:#?}");
    assert!(invalid[1].contains("target-file-sise"), "{invalid:#?}");
    std::fs::remove_dir_all(dir).unwrap();
}

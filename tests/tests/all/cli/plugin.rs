//! `sluice plugin test`, and `sluice try` with lookup tables from files.

use super::*;

/// Runs `sluice plugin test ARGS…`; returns the outcome and standard output.
fn plugin_test(args: &[&str]) -> anyhow::Result<(cli::plugin::test::Outcome, String)> {
    let all = ["sluice", "plugin", "test"]
        .into_iter()
        .chain(args.iter().copied());
    let invocation = cli::parse(all)?;
    let Command::Plugin(plugin) = &invocation.cli.command else {
        panic!("not plugin")
    };
    let cli::plugin::PluginCommand::Test(test_args) = &plugin.command else {
        panic!("not plugin test")
    };
    let mut out = Vec::new();
    let outcome = cli::plugin::test::run(test_args, &mut out)?;
    Ok((outcome, String::from_utf8(out)?))
}

/// `sluice plugin test` passes the validator's own samples, and lists every sample a plugin
/// judges otherwise (here the keep-all plugin, which rejects nothing), with its line, what
/// was expected, what came, and the event.
#[test]
fn plugin_test_lists_every_sample_judged_otherwise() {
    let samples = repo_root().join("udfs/clickstream-validator/samples.jsonl");
    let samples = samples.to_str().unwrap();
    let (outcome, out) =
        plugin_test(&[plugins::CLICKSTREAM_VALIDATOR, "--samples", samples]).unwrap();
    assert_eq!((outcome.samples, outcome.mismatches.len()), (6, 0), "{out}");
    assert!(out.contains("6 samples, 6 as expected, 0 differ"), "{out}");

    let (outcome, out) = plugin_test(&[plugins::KEEP_ALL, "--samples", samples]).unwrap();
    let lines: Vec<usize> = outcome.mismatches.iter().map(|m| m.line).collect();
    assert_eq!(lines, [3, 4, 5, 6], "{out}");
    assert!(
        out.contains(":3: expected rejected (invalid_event_type)\n")
            && out.contains(":3:      got kept\n"),
        "{out}"
    );
    assert!(out.contains("wishlist_add"), "the event is shown: {out}");
    assert!(out.contains("6 samples, 2 as expected, 4 differ"), "{out}");

    // A parameter changes the verdicts: with wishlist_add allowed, sample 3 is kept.
    let (outcome, _) = plugin_test(&[
        plugins::CLICKSTREAM_VALIDATOR,
        "--samples",
        samples,
        "--param",
        "allowed-event-types=page_view,add_to_cart,wishlist_add",
    ])
    .unwrap();
    assert_eq!(outcome.mismatches.len(), 1);
    assert!(outcome.mismatches[0].got.starts_with("kept"));

    // A samples file that is not one is an error, not a pass.
    let broken = std::env::temp_dir().join(format!("sluice-broken-samples-{}", std::process::id()));
    std::fs::write(&broken, "{\"event\": {}, \"verdict\": \"fine\"}\n").unwrap();
    let err = plugin_test(&[plugins::KEEP_ALL, "--samples", broken.to_str().unwrap()]).unwrap_err();
    assert!(
        err.to_string()
            .contains("verdict must be kept, rewritten or rejected"),
        "{err}"
    );
}

/// A lookup file written to a temporary folder, and its path.
fn lookup_file(dir: &std::path::Path, name: &str, lines: &[serde_json::Value]) -> String {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = dir.join(format!("{name}.jsonl"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `--lookup NAME=FILE.jsonl` loads a table (later lines win, `null` deletes) that every
/// `--plugin` may read; with `--stages`, the stages' grants apply and a grant of a table no
/// `--lookup` gives is refused before anything runs.
#[test]
fn lookup_tables_from_files() {
    use serde_json::json;
    let dir = temp_dir("lookup");
    let profiles = lookup_file(
        &dir,
        "profiles",
        &[
            json!({"key": "u1", "value": {"tier": "gold"}}),
            json!({"key": "u2", "value": {"tier": "silver"}}),
            json!({"key": "u2", "value": null}),
        ],
    );
    let input = lookup_file(
        &dir,
        "events",
        &[json!({"table": "profiles", "keys": ["u1", "u2"]})],
    );
    let lookup = format!("profiles={profiles}");
    let (summary, out, _) = sluice_try(&[
        "try",
        "--json",
        "--plugin",
        plugins::LOOKUP_PROBE,
        "--lookup",
        &lookup,
        "--input",
        &input,
    ])
    .unwrap();
    assert_eq!(summary.rewritten, 1, "{out}");
    let verdict: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        verdict["value"],
        json!({"values": [{"tier": "gold"}, null]})
    );

    let stages = dir.join("stages.toml");
    std::fs::write(
        &stages,
        format!(
            "[[stages]]\nname = \"probe\"\nplugin = {:?}\ngrants = {{ lookups = [\"profiles\", \"products\"] }}\n",
            plugins::LOOKUP_PROBE
        ),
    )
    .unwrap();
    let stages = stages.display().to_string();
    let error = sluice_try(&[
        "try", "--stages", &stages, "--lookup", &lookup, "--input", &input,
    ])
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "lookup tables granted but not declared in [[lookups]]: stage `probe` is granted `products`"
    );
}

/// Generated events of `shape`, as (key, JSON value).
fn generated(shape: sluice::generate::Shape, count: usize) -> Vec<(String, Value)> {
    let config = sluice::generate::GeneratorConfig {
        shape,
        invalid_share: 0.0,
        ..Default::default()
    };
    sluice::generate::Generator::new(config)
        .take(count)
        .map(|e| (e.key, serde_json::from_str(&e.value).unwrap()))
        .collect()
}

/// The retail enricher, run by `sluice try --lookup` on generated retail events with
/// tables of generated customers and products, adds each known user's tier and country
/// and each known product's list price, and leaves the fields of unknown keys absent; a
/// stage not granted `products` gets the lookup error, naming the table and the stage.
#[test]
fn the_retail_enricher_reads_profiles_and_products() {
    use serde_json::json;
    use sluice::generate::Shape;
    let dir = temp_dir("enrich");
    let events = generated(Shape::Retail, 40);
    let user = |e: &Value| e["user_id"].as_str().unwrap().to_string();
    let unknown_user = user(&events[0].1);
    let wanted: std::collections::HashSet<String> = events.iter().map(|e| user(&e.1)).collect();
    let customers: Vec<(String, Value)> = generated(Shape::Customers, 50_000)
        .into_iter()
        .filter(|(k, _)| wanted.contains(k) && *k != unknown_user)
        .collect();
    let entries = |table: &[(String, Value)]| -> Vec<Value> {
        table
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect()
    };
    let profiles = lookup_file(&dir, "profiles", &entries(&customers));
    // The catalog without its last product, P400.
    let products = lookup_file(&dir, "products", &entries(&generated(Shape::Products, 3)));
    let values: Vec<Value> = events.iter().map(|e| e.1.clone()).collect();
    let input = lookup_file(&dir, "events", &values);
    let (profiles, products) = (
        format!("profiles={profiles}"),
        format!("products={products}"),
    );
    let (summary, out, _) = sluice_try(&[
        "try",
        "--json",
        "--plugin",
        plugins::RETAIL_ENRICHER,
        "--lookup",
        &profiles,
        "--lookup",
        &products,
        "--input",
        &input,
    ])
    .unwrap();
    assert_eq!(
        (summary.rejected_total(), summary.failed_total()),
        (0, 0),
        "{out}"
    );
    let tier_of: std::collections::HashMap<&str, &Value> = customers
        .iter()
        .map(|(k, v)| (k.as_str(), &v["tier"]))
        .collect();
    let mut seen = (0, 0);
    for (line, event) in out.lines().zip(&values) {
        let verdict: Value = serde_json::from_str(line).unwrap();
        let value = verdict.get("value").unwrap_or(event);
        let user = user(event);
        assert_eq!(
            value.get("tier"),
            tier_of.get(user.as_str()).copied(),
            "{line}"
        );
        assert_eq!(
            value.get("country").is_some(),
            user != unknown_user,
            "{line}"
        );
        match event.get("product_id").and_then(Value::as_str) {
            Some("P400") => assert!(value.get("list_price").is_none(), "{line}"),
            Some(_) => {
                assert!(value["list_price"].is_number(), "{line}");
                seen.1 += 1;
            }
            None => {}
        }
        seen.0 += usize::from(user == unknown_user);
    }
    assert!(
        seen.0 >= 1 && seen.1 >= 3,
        "the events cover both cases: {seen:?}"
    );

    // A stage granted only `profiles`: every event with a product is rejected.
    let stages = dir.join("profiles-only.toml");
    std::fs::write(
        &stages,
        format!(
            "[[stages]]\nname = \"enrich\"\nplugin = {:?}\ngrants = {{ lookups = [\"profiles\"] }}\n",
            plugins::RETAIL_ENRICHER
        ),
    )
    .unwrap();
    let stages = stages.display().to_string();
    let (summary, out, _) = sluice_try(&[
        "try", "--stages", &stages, "--lookup", &profiles, "--lookup", &products, "--input", &input,
    ])
    .unwrap();
    let with_product = values
        .iter()
        .filter(|v| v.get("product_id").is_some())
        .count();
    assert_eq!(
        summary.rejected.get("lookup_failed"),
        Some(&with_product),
        "{out}"
    );
    assert!(
        out.contains(
            ": lookup_failed: not_granted: stage `enrich` is not granted lookup table `products`"
        ),
        "{out}"
    );
}

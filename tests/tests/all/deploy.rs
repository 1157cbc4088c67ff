//! `deploy/kubernetes` as Kubernetes applies it: rendered by `kubectl kustomize` (Debian's
//! kubectl, unpacked by `scripts/install-kube-tools`), it is the manifests the unit test
//! `pipeline::deploy_tests` checks against the binary (their probes, ports, volumes and
//! pipeline files), with the kustomization's image, and the ConfigMap the analytics
//! StatefulSet mounts is generated from `analytics.toml`; and every resource rendered
//! passes Kubernetes' own schemas, strictly (no unknown field), through PyPI's
//! `kubernetes-validate`.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{Map, Value};
use sluice_tests::fixture::text;
use sluice_tests::repo_root;
use yaml_rust2::{Yaml, YamlLoader};

/// A YAML value as JSON, whose maps are equal whatever the order of their keys.
fn json(yaml: &Yaml) -> Value {
    match yaml {
        Yaml::Hash(map) => {
            let pairs = map
                .iter()
                .map(|(k, v)| (k.as_str().unwrap().into(), json(v)));
            Value::Object(pairs.collect::<Map<_, _>>())
        }
        Yaml::Array(items) => Value::Array(items.iter().map(json).collect()),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Integer(i) => Value::from(*i),
        Yaml::Real(r) => Value::from(r.parse::<f64>().unwrap()),
        Yaml::Boolean(b) => Value::Bool(*b),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML: {other:?}"),
    }
}

/// Documents of `text` by kind and name.
fn by_name(text: &str) -> BTreeMap<(String, String), Value> {
    let docs = YamlLoader::load_from_str(text).unwrap();
    let docs = docs.iter().map(json).filter(|d| !d.is_null());
    docs.map(|d| {
        let kind = d["kind"].as_str().unwrap().to_string();
        let name = d["metadata"]["name"].as_str().unwrap_or("").to_string();
        ((kind, name), d)
    })
    .collect()
}

/// Every container of a workload's pod template.
fn containers(doc: &mut Value) -> impl Iterator<Item = &mut Value> {
    let containers = doc.pointer_mut("/spec/template/spec/containers");
    containers
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

#[test]
fn kustomize_renders_the_manifests_the_binary_was_checked_against() {
    let install = repo_root().join("scripts/install-kube-tools");
    let out = Command::new(install).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let tools = String::from_utf8(out.stdout).unwrap();
    let [validate, kubectl] = tools.lines().rev().take(2).collect::<Vec<_>>()[..] else {
        panic!("{tools}");
    };
    let dir = repo_root().join("deploy/kubernetes");
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let rendered = String::from_utf8(out.stdout).unwrap();
    let file = std::env::temp_dir().join(format!("sluice-rendered-{}.yaml", std::process::id()));
    std::fs::write(&file, &rendered).unwrap();
    let checked = Command::new(validate)
        .args(["--strict", "--quiet"])
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(checked.status.success(), "{}", text(&checked));
    let rendered = by_name(&rendered);

    let read = |file: &str| std::fs::read_to_string(dir.join(file)).unwrap();
    let kustomization = by_name(&read("kustomization.yaml"));
    let kustomization = kustomization.values().next().unwrap();
    let image = &kustomization["images"][0];
    let (from, to) = (
        image["name"].as_str().unwrap(),
        format!(
            "{}:{}",
            image["newName"].as_str().unwrap(),
            image["newTag"].as_str().unwrap()
        ),
    );
    let mut sources = BTreeMap::new();
    for resource in kustomization["resources"].as_array().unwrap() {
        sources.append(&mut by_name(&read(resource.as_str().unwrap())));
    }
    for ((kind, name), source) in &mut sources {
        for container in containers(source) {
            let named = container["image"].as_str().unwrap();
            assert_eq!(named.split(':').next(), Some(from), "{kind} {name}");
            container["image"] = Value::String(to.clone());
        }
        let applied = rendered.get(&(kind.clone(), name.clone()));
        let applied = applied.unwrap_or_else(|| panic!("{kind} {name} not rendered"));
        assert_eq!(applied, source, "{kind} {name} as applied");
    }

    let generated = rendered.keys().filter(|k| !sources.contains_key(*k));
    let generated: Vec<_> = generated.collect();
    let config_map = ("ConfigMap".to_string(), "sluice-analytics".to_string());
    assert_eq!(generated, [&config_map], "only the ConfigMap is generated");
    let data = &rendered[&config_map]["data"]["analytics.toml"];
    assert_eq!(data.as_str(), Some(read("analytics.toml").as_str()));
    for ((kind, name), doc) in &rendered {
        let volumes = doc["spec"]["template"]["spec"]["volumes"].as_array();
        for volume in volumes.into_iter().flatten() {
            if let Some(map) = volume["configMap"]["name"].as_str() {
                let key = ("ConfigMap".to_string(), map.to_string());
                assert!(rendered.contains_key(&key), "{kind} {name} mounts {map}");
            }
        }
    }
}

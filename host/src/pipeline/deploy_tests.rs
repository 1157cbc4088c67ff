//! The Kubernetes manifests in `deploy/kubernetes` against the binary: every probe is a path
//! the admin API serves, on the port the pipeline's `[admin] listen` gives, and every
//! pipeline file a manifest runs parses with the environment the manifest (its Secret
//! included) gives it, in the shape the manifest says.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

use super::config::PipelineConfig;
use super::env::substitute;
use crate::admin::{Admin, AdminConfig};
use crate::source::kafka::SourceMode;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml(path: &Path) -> Vec<Yaml> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn strings(list: &Yaml) -> Vec<&str> {
    list.as_vec()
        .map(|v| v.iter().filter_map(Yaml::as_str).collect())
        .unwrap_or_default()
}

/// The image's environment (the Dockerfile's `ENV`), then the container's `env`, then the
/// example Secret's keys.
fn environment(container: &Yaml, secret: &Yaml) -> HashMap<String, String> {
    let mut vars: HashMap<String, String> = [
        ("SLUICE_PLUGINS", "/opt/sluice/plugins"),
        ("SLUICE_WAREHOUSE", "/var/lib/sluice/warehouse"),
        ("SLUICE_ADMIN_LISTEN", "0.0.0.0:9464"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for var in container["env"].as_vec().unwrap() {
        let (name, value) = (var["name"].as_str(), var["value"].as_str());
        vars.insert(name.unwrap().to_string(), value.unwrap().to_string());
    }
    for (key, value) in secret["stringData"].as_hash().unwrap() {
        vars.insert(key.as_str().unwrap().into(), value.as_str().unwrap().into());
    }
    vars
}

/// The file a container's `--config` names: the image's copy of the repository's
/// `examples/`, or a file of the kustomization's ConfigMap mounted at `/etc/sluice`.
fn pipeline_file(args: &[&str], generated: &[&str]) -> PathBuf {
    assert_eq!(&args[..2], ["run", "--config"], "{args:?}");
    if let Some(example) = args[2].strip_prefix("/opt/sluice/examples/") {
        return repo().join("examples").join(example);
    }
    let file = args[2]
        .strip_prefix("/etc/sluice/")
        .expect("a mounted ConfigMap");
    assert!(generated.contains(&file), "{file} is not in the ConfigMap");
    repo().join("deploy/kubernetes").join(file)
}

#[test]
fn the_kubernetes_manifests_probe_what_the_binary_serves() {
    let dir = repo().join("deploy/kubernetes");
    let kustomization = &yaml(&dir.join("kustomization.yaml"))[0];
    let generated = strings(&kustomization["configMapGenerator"][0]["files"]);
    let secret = &yaml(&dir.join("secret.example.yaml"))[0];
    let config: AdminConfig = toml::from_str("listen = \"127.0.0.1:0\"").unwrap();
    let runtime = crate::plugin::Runtime::new(toml::from_str("").unwrap()).unwrap();
    let (sender, _found) = std::sync::mpsc::channel();
    let admin = Admin::start(&config, "p", runtime, Vec::new(), sender).unwrap();
    let mut shapes = Vec::new();
    for resource in strings(&kustomization["resources"]) {
        for doc in yaml(&dir.join(resource)) {
            if doc["kind"].as_str() != Some("StatefulSet") {
                continue;
            }
            let name = doc["metadata"]["name"].as_str().unwrap().to_string();
            let pod = &doc["spec"]["template"]["spec"];
            let container = &pod["containers"][0];
            let port = &container["ports"][0];
            assert_eq!(port["name"].as_str(), Some("admin"), "{name}");
            let container_port = port["containerPort"].as_i64().unwrap();
            for (probe, path) in [
                ("startupProbe", "/healthz"),
                ("livenessProbe", "/healthz"),
                ("readinessProbe", "/readyz"),
            ] {
                let get = &container[probe]["httpGet"];
                assert_eq!(get["path"].as_str(), Some(path), "{name} {probe}");
                assert_eq!(get["port"].as_str(), Some("admin"), "{name} {probe}");
                let status = crate::admin::tests::call(&admin, "GET", path, "", "").status;
                assert!([200, 503].contains(&status), "{name} {probe}: {status}");
            }
            let mounts = container["volumeMounts"].as_vec().unwrap();
            let state = mounts
                .iter()
                .find(|m| m["mountPath"].as_str() == Some("/var/lib/sluice"))
                .unwrap_or_else(|| panic!("{name}: no volume at /var/lib/sluice"));
            let claims = doc["spec"]["volumeClaimTemplates"].as_vec().unwrap();
            assert!(
                claims
                    .iter()
                    .any(|c| c["metadata"]["name"] == state["name"])
            );

            let vars = environment(container, secret);
            let cache = vars.get("XDG_CACHE_HOME").map(String::as_str);
            assert!(
                cache.is_some_and(|c| c.starts_with("/var/lib/sluice/")),
                "{name}"
            );
            let file = pipeline_file(&strings(&container["args"]), &generated);
            let text = std::fs::read_to_string(&file).unwrap();
            // A variable without a default that nothing sets is an error here.
            let text = substitute(&text, |v| vars.get(v).cloned())
                .unwrap_or_else(|e| panic!("{name}: {file:?}: {e}"))
                .text;
            let pipeline = PipelineConfig::parse(&text, &file).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(pipeline.source.mode, SourceMode::Group, "{name}");
            let admin_config = pipeline.admin.as_ref().expect("an [admin] section");
            let listen_port = admin_config.listen.rsplit_once(':').unwrap().1;
            assert_eq!(listen_port, container_port.to_string(), "{name}");
            let state_dir = admin_config.state_dir.as_ref().expect("an admin state-dir");
            assert!(
                state_dir.starts_with("/var/lib/sluice"),
                "{name}: {state_dir:?}"
            );
            shapes.push((name, pipeline.active_standby()));
        }
    }
    shapes.sort();
    assert_eq!(
        shapes,
        [
            ("sluice-analytics".to_string(), true),
            ("sluice-ingest".to_string(), false)
        ],
        "one group of stateless members, one active/standby event-time pipeline"
    );
}

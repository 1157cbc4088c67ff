//! Secured and compressed Kafka against real brokers: tansu behind TLS (stunnel with a
//! throwaway CA; tansu's plaintext listener is on a port no client is told about), with
//! SASL/SCRAM when tansu requires authentication, and topics written with each codec.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use sluice::generate::{Generator, GeneratorConfig};
use sluice::kafka::Connection;
use sluice::sink::topic::read_all;
use sluice_tests::broker::{Broker, Security};
use sluice_tests::fixture::{Setup, text};

use crate::event_time::{
    analytics_config, event_ids, events_file, expected_dead_letters, expected_windows,
    topic_windows,
};

/// `[source] properties` of a pipeline file, from `properties` (values quoted as TOML).
fn properties_line(properties: &[(String, String)]) -> String {
    let pairs: Vec<String> = properties
        .iter()
        .map(|(k, v)| format!("{k:?} = {v:?}"))
        .collect();
    format!("properties = {{ {} }}", pairs.join(", "))
}

/// The analytics example on `broker` with `properties` in `[source]` and late events sent
/// to a topic of their own, `NAME-late`.
fn analytics_on(name: &str, broker: Broker, properties: &[(String, String)]) -> Setup {
    let mut s = Setup::with_broker(name, broker);
    s.config = analytics_config();
    s.extra_env
        .push(("SLUICE_ANALYTICS_TOPIC".into(), format!("{name}-analytics")));
    let source = properties_line(properties);
    let late = format!("late = \"topic\"\nlate-topic = \"{name}-late\"");
    s.edit_config(|text| {
        text.replace(
            "starting-offsets = \"earliest\"\n",
            &format!("starting-offsets = \"earliest\"\n{source}\n"),
        )
        .replace("late = \"dead-letter\"", &late)
    });
    s
}

/// Whether a client with `properties` can read the metadata of `bootstrap` within 5 s.
fn reachable(bootstrap: &str, properties: &[(String, String)]) -> bool {
    let connection = Connection::new(bootstrap, properties.iter().cloned().collect());
    let consumer: BaseConsumer = connection
        .client_config(&[("group.id", "probe")])
        .create()
        .unwrap();
    consumer
        .fetch_metadata(None, Duration::from_secs(5))
        .is_ok()
}

/// Runs the analytics example and checks every output, each read back through the
/// secured broker: the table and the dead letters (`sluice show`), the window topic
/// (`sluice show --window`) and the late topic.
fn run_analytics_and_check_outputs(s: &Setup) {
    let events = events_file();
    s.produce(&["--partitions", "1", "--input", events.to_str().unwrap()]);
    let out = s.run(&[("SLUICE_MAX_RECORDS", "4"), ("SLUICE_AT_END", "flush")]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(event_ids(&shown), ["e1", "e2", "e3", "e5", "e6", "e7"]);
    let dead: Vec<(String, String)> = expected_dead_letters()
        .into_iter()
        .filter(|(_, code)| code != "late_event")
        .collect();
    let codes: Vec<(String, String)> = shown["dead_letters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let h = |k: &str| d["headers"][k].as_str().unwrap().to_string();
            (h("sluice.source.offset"), h("sluice.error.code"))
        })
        .collect();
    assert_eq!(codes, dead, "late events go to their own topic");
    let windows = s.show_window("event-type-counts");
    assert_eq!(topic_windows(&windows), expected_windows());
    let late_topic = format!("{}-late", s.topic.trim_end_matches("-events"));
    let late = read_all(&s.connection(), &late_topic, Duration::from_secs(30)).unwrap();
    let late: Vec<(&str, &str)> = late
        .iter()
        .map(|r| {
            let h = |k: &str| r.headers[k].as_str();
            (h("sluice.source.offset"), h("sluice.error.code"))
        })
        .collect();
    assert_eq!(late, [("4", "late_event"), ("8", "late_event")]);
}

#[test]
fn tls_carries_the_source_the_dead_letters_the_late_topic_and_the_window_topic() {
    let start = Instant::now();
    let broker = Broker::start_secured("tls", &Security::default());
    let tls = broker.tls_properties();
    // Clients only ever reach the broker at the TLS port (tansu advertises it): a plaintext
    // client gets nowhere there, and a TLS client does.
    assert_ne!(broker.bootstrap, broker.plaintext);
    assert!(
        !reachable(&broker.bootstrap, &[]),
        "plaintext on the TLS port"
    );
    assert!(reachable(&broker.bootstrap, &tls));
    let s = analytics_on("tls", broker, &tls);
    run_analytics_and_check_outputs(&s);
    let log = s.broker.tls.as_ref().unwrap().stunnel.log_text();
    assert!(log.contains("accepted connection"), "{log}");
    println!("TLS pipeline test: {:.1}s", start.elapsed().as_secs_f64());
}

#[test]
fn without_the_ca_the_pipeline_fails_fast_on_the_certificate() {
    let broker = Broker::start_secured("noca", &Security::default());
    let protocol_only = vec![("security.protocol".to_string(), "SSL".to_string())];
    let mut s = analytics_on("noca", broker, &protocol_only);
    s.client_properties = s.broker.tls_properties();
    s.produce(&["--partitions", "1", "--count", "10", "--shape", "analytics"]);
    let start = Instant::now();
    let out = s.run(&[]);
    let took = start.elapsed();
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("certificate verify failed"),
        "the error names the certificate: {}",
        text(&out)
    );
    assert!(took < Duration::from_secs(20), "failed after {took:?}");
    println!("without a CA: failed in {:.1}s: {last}", took.as_secs_f64());
}

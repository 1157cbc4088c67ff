//! The admin API's probes through real outages: a broker or a REST catalog stopped under a
//! running pipeline makes `/readyz` answer 503 with the reason while `/healthz` stays 200
//! (the process is alive and waits: a restart would not help), and both come back; the
//! events produced meanwhile land once.

use std::time::{Duration, Instant};

use sluice::iceberg::{IcebergCatalog, IcebergError, IcebergTable};
use sluice::pipeline::config::PipelineConfig;
use sluice_tests::fixture::Setup;
use sluice_tests::pyiceberg::RestCatalog;

use crate::hardening::{assert_rows_once, produce_valid};
use crate::hot_swap::http;

/// What the probes said through an outage.
struct Outage {
    /// `/readyz`'s answer while the service was away, once it was 503.
    away: Option<String>,
    /// Whether `/readyz` kept answering 503 after that.
    steady: bool,
    /// `/healthz`'s answer then.
    live: (u16, String),
    /// Whether `/readyz` answered 200 again once the service was back.
    back: bool,
}

impl Outage {
    /// Stops a service with `stop`, watches the probes of the admin API at `admin`, starts
    /// the service again with `restart`, and watches `/readyz` come back.
    fn watch(admin: &str, limit: Duration, stop: impl FnOnce(), restart: impl FnOnce()) -> Outage {
        let probe = |path| http(admin, "GET", path, None, b"", None);
        assert_eq!(probe("/readyz").0, 200, "ready before the outage");
        stop();
        let away = wait_until(limit, || {
            let (status, body) = probe("/readyz");
            (status == 503).then_some(body)
        });
        // Not ready stays not ready while the service is away: no flapping back to ready
        // between looks (a probe every ~0.25 s for 3 s, beyond a trigger and a half).
        let steady = (0..12).all(|_| {
            std::thread::sleep(Duration::from_millis(250));
            probe("/readyz").0 == 503
        });
        let live = probe("/healthz");
        restart();
        let back = wait_until(limit, || (probe("/readyz").0 == 200).then_some(())).is_some();
        Outage {
            away,
            steady,
            live,
            back,
        }
    }

    /// Asserts that readiness said `reason` while `what` was away, that liveness held, and
    /// that readiness came back.
    fn said(&self, what: &str, reason: &str, log: &str) {
        let away = self.away.as_deref();
        let away =
            away.unwrap_or_else(|| panic!("never not ready while the {what} was away: {log}"));
        assert!(away.starts_with(reason), "{away}");
        assert!(
            self.steady,
            "/readyz went back to 200 while the {what} was away: {log}"
        );
        assert_eq!(
            self.live,
            (200, "ok\n".to_string()),
            "alive while the {what} is away"
        );
        assert!(
            self.back,
            "never ready again after the {what} came back: {log}"
        );
    }
}

/// What `check` gives, once it gives something, within `limit`.
fn wait_until<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if let Some(found) = check() {
            return Some(found);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    None
}

/// Runs the pipeline of `s` over `first` events, stops a service with `stop` (`what`, whose
/// absence `/readyz` names with `reason`), starts it again with `restart`, and checks that
/// five more events land and every event is in the table once.
fn through_an_outage(
    s: &mut Setup,
    first: u64,
    (what, reason): (&str, &str),
    stop: impl FnOnce(&mut Setup),
    restart: impl FnOnce(&mut Setup),
) {
    produce_valid(s, first, 31);
    let admin = format!("127.0.0.1:{}", sluice_tests::free_port());
    let env = [("SLUICE_INTERVAL", "1s"), ("SLUICE_ADMIN_LISTEN", &admin)];
    let running = s.start(&["run"], &env);
    running
        .wait_for(&format!("\"input_rows\":{first}"), Duration::from_secs(60))
        .expect("the first batch");
    let s = std::cell::RefCell::new(s);
    let outage = Outage::watch(
        &admin,
        Duration::from_secs(90),
        || stop(&mut s.borrow_mut()),
        || restart(&mut s.borrow_mut()),
    );
    let s = s.into_inner();
    produce_valid(s, 5, 32);
    let found = running.wait_for("\"input_rows\":5", Duration::from_secs(120));
    let (_, _, log) = running.terminate();
    outage.said(what, reason, &log);
    assert!(found.is_some(), "{log}");
    assert_rows_once(s, first as usize + 5);
}

/// A broker that goes away mid-run is waited for, and the probes say so.
#[test]
fn a_broker_that_goes_away_mid_run_is_waited_for() {
    let mut s = Setup::new("broker-restart");
    s.edit_example_config(|c| c.replace("[source]\n", "[source]\nfetch-timeout = \"5s\"\n"));
    let reason = ("broker", "not ready: retrying after a fault");
    through_an_outage(
        &mut s,
        20,
        reason,
        |s| s.broker.stop(),
        |s| s.broker.restart(),
    );
}

/// Runs the example through an outage of a REST catalog that `stop` causes and `restart`
/// ends, under the running pipeline.
fn through_a_catalog_outage(name: &str, stop: fn(&mut RestCatalog), restart: fn(&mut RestCatalog)) {
    let mut s = Setup::new(name);
    let server = std::cell::RefCell::new(RestCatalog::start(&s.warehouse));
    s.edit_example_config(|c| c);
    s.use_rest_catalog(&server.borrow().url);
    let reason = ("catalog", "not ready: the catalog does not answer");
    let stop = |_: &mut Setup| stop(&mut server.borrow_mut());
    let restart = |_: &mut Setup| restart(&mut server.borrow_mut());
    through_an_outage(&mut s, 10, reason, stop, restart);
}

/// A REST catalog that goes away while the pipeline waits between triggers shows on
/// `/readyz` (the idle pipeline looks at it) before any batch meets it, and its return too.
#[test]
fn a_catalog_that_goes_away_while_idle_is_not_ready_until_it_is_back() {
    through_a_catalog_outage("catalog-away", RestCatalog::stop, RestCatalog::restart);
}

/// The same with a REST catalog that hangs (frozen: connections accepted, nothing
/// answered) under the running pipeline: not ready while it hangs, ready again once it
/// answers. (Between triggers of 1 s, tansu takes up to a second to give its end offsets:
/// the idle look still runs once per trigger.)
#[test]
fn a_catalog_that_hangs_while_idle_is_not_ready_until_it_answers() {
    through_a_catalog_outage("catalog-hangs-idle", RestCatalog::freeze, RestCatalog::thaw);
}

/// A REST catalog that hangs (frozen: connections accepted, nothing answered): the idle
/// pipeline's look at the table (`refresh_within`) gives up after its bound with
/// `NoAnswer`, which readiness reports as "the catalog does not answer", instead of
/// hanging with the catalog; once the catalog is thawed, a look answers again.
#[test]
fn a_look_at_a_catalog_that_hangs_gives_up_within_its_bound() {
    let mut s = Setup::new("catalog-hangs");
    let mut server = RestCatalog::start(&s.warehouse);
    s.edit_example_config(|c| c);
    s.use_rest_catalog(&server.url);
    produce_valid(&s, 5, 33);
    let out = s.run(&[]);
    assert!(
        out.status.success(),
        "{}",
        sluice_tests::fixture::text(&out)
    );
    let text = std::fs::read_to_string(&s.config).unwrap();
    let text = text.replace("${SLUICE_WAREHOUSE}", s.warehouse.to_str().unwrap());
    let parsed = PipelineConfig::parse(&text, &s.config).unwrap();
    let catalog = IcebergCatalog::open(&parsed.sink, &s.warehouse).unwrap();
    let mut table = IcebergTable::open_existing(&catalog, parsed.sink.clone()).unwrap();

    server.freeze();
    let asked = Instant::now();
    let answer = table.refresh_within(Duration::from_secs(1));
    let waited = asked.elapsed();
    server.thaw();
    let error = answer.expect_err("a frozen catalog answers nothing");
    assert!(matches!(error, IcebergError::NoAnswer { .. }), "{error}");
    assert!(error.to_string().contains("no answer within 1s"), "{error}");
    assert!(waited < Duration::from_secs(10), "gave up after {waited:?}");
    let back = wait_until(Duration::from_secs(30), || {
        table.refresh_within(Duration::from_secs(5)).ok()
    });
    assert!(back.is_some(), "the thawed catalog answers again");
}

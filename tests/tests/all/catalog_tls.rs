//! Catalogs over TLS, with their credentials: a REST catalog over https (a private CA given
//! in the pipeline file) with OAuth2 client credentials or a bearer token, and PostgreSQL
//! that refuses connections without TLS.

use sluice_tests::fixture::{Setup, text};

use crate::pipeline::{dead_letters, rows};
use sluice_tests::postgres::Postgres;
use sluice_tests::pyiceberg::{self, CatalogAt, RestCatalog};
use sluice_tests::tls::TestCa;

/// Points the pipeline at the REST catalog `url` with the catalog settings `extra`.
fn use_rest(s: &mut Setup, url: &str, extra: &str) {
    s.edit_example_config(|text| {
        text.replace(
            "type = \"sql\"\nname = \"sluice\"",
            &format!("type = \"rest\"\nname = \"rest\"\nuri = \"{url}\"\n{extra}"),
        )
    });
}

/// The rows of the example's table, read by pyiceberg from the REST server's own database.
fn rest_rows(s: &Setup) -> usize {
    let db = format!("sqlite:{}/rest-catalog.db", s.warehouse.display());
    pyiceberg::read_table_in(
        CatalogAt::Sql {
            uri: &db,
            name: "rest",
        },
        "tutorial.retail_clickstream_events",
    )
    .len()
}

#[test]
fn an_https_rest_catalog_with_a_private_ca_and_oauth2_client_credentials() {
    let ca = TestCa::new("rest");
    let mut s = Setup::new("rest-tls");
    let server = RestCatalog::start_with(
        &s.warehouse,
        &[
            "--tls-cert",
            ca.server_cert.to_str().unwrap(),
            "--tls-key",
            ca.server_key.to_str().unwrap(),
            "--client",
            "sluice-app:client-secret-42",
        ],
    );
    assert!(
        server.url.starts_with("https://localhost:"),
        "{}",
        server.url
    );
    let ca_line = format!("ca-cert = \"{}\"", ca.ca_cert.display());
    s.produce_file("1");

    // Without the CA, the server's certificate is refused.
    use_rest(
        &mut s,
        &server.url,
        "credential = \"sluice-app:client-secret-42\"",
    );
    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).to_lowercase().contains("certificate"),
        "{}",
        text(&out)
    );

    // With the CA but a wrong secret, the token endpoint refuses, and the secret is not
    // echoed.
    use_rest(
        &mut s,
        &server.url,
        &format!("{ca_line}\ncredential = \"sluice-app:wrong-secret-7\""),
    );
    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("invalid_client") || all.contains("401"),
        "{all}"
    );
    assert!(!all.contains("wrong-secret-7"), "{all}");

    // With both, the pipeline runs and the table holds the valid events.
    use_rest(
        &mut s,
        &server.url,
        &format!("{ca_line}\ncredential = \"sluice-app:client-secret-42\""),
    );
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(rows(&shown).len(), 5);
    assert_eq!(dead_letters(&shown).len(), 5);
    assert_eq!(rest_rows(&s), 5);
}

#[test]
fn a_rest_catalog_with_a_bearer_token() {
    let mut s = Setup::new("rest-token");
    let server = RestCatalog::start_with(&s.warehouse, &["--token", "static-token-9"]);
    s.produce_file("1");
    use_rest(&mut s, &server.url, "");
    let out = s.run(&[]);
    assert!(!out.status.success(), "no token: {}", text(&out));
    assert!(
        text(&out).contains("401") || text(&out).contains("Not authorized"),
        "{}",
        text(&out)
    );

    use_rest(&mut s, &server.url, "token = \"${CATALOG_TOKEN}\"");
    let out = s.run(&[("CATALOG_TOKEN", "static-token-9")]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(rest_rows(&s), 5);
}

#[test]
fn a_postgresql_catalog_that_requires_tls() {
    let ca = TestCa::new("pg");
    let pg = Postgres::start_tls(&ca);
    let mut s = Setup::new("pg-tls");
    s.produce_file("1");

    // The server refuses a connection without TLS.
    let plain = format!("{}?sslmode=disable", pg.url);
    s.use_postgres_catalog(&plain);
    let out = s.run(&[]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("no encryption") || text(&out).contains("pg_hba"),
        "{}",
        text(&out)
    );

    // verify-full checks the certificate against the CA and the host name.
    let verified = format!(
        "{}?sslmode=verify-full&sslrootcert={}",
        pg.url,
        ca.ca_cert.display()
    );
    s.edit_example_config(|t| t);
    s.use_postgres_catalog(&verified);
    let out = s.run(&[]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = s.show();
    assert_eq!(rows(&shown).len(), 5);
    assert_eq!(dead_letters(&shown).len(), 5);
}

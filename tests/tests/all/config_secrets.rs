//! Values from the environment never appear in a configuration error, whatever characters
//! they hold: `sluice run --check` with a secret where it makes an error (the interval, a
//! duration), as the finding did (`duration "Quo\"te…"`).

use crate::cli::sluice_with_env;
use sluice_tests::repo_root;

#[test]
fn secrets_with_quotes_backslashes_tabs_or_unicode_never_appear() {
    let example = repo_root().join("examples/clickstream-analytics/pipeline.toml");
    let secrets = [
        "Quo\"te-s3cr3t",
        "back\\slash-s3cr3t",
        "tab\there-s3cr3t",
        "line\nbreak-s3cr3t",
        "ünï-cødé-s3cr3t",
        "ctl\u{7}-s3cr3t",
        // A number first: the parser quotes the rest alone, as the unit.
        "12Quo\"te\t-s3cr3t",
        "12 plain-s3cr3t",
    ];
    for secret in secrets {
        let out = sluice_with_env(
            &["run", "--check", "--config", example.to_str().unwrap()],
            &[("SLUICE_INTERVAL", secret)],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{secret:?}: {stderr}");
        assert!(stderr.contains("trigger.interval"), "{stderr}");
        let unquote = |quoted: String| quoted[1..quoted.len() - 1].to_string();
        let forms = [
            secret.to_string(),
            unquote(format!("{secret:?}")),
            unquote(serde_json::to_string(secret).unwrap()),
            secret.escape_default().to_string(),
        ];
        assert!(!stderr.contains("s3cr3t"), "{secret:?}: {stderr}");
        for form in forms {
            assert!(!stderr.contains(&form), "{secret:?} as {form:?}: {stderr}");
        }
    }
}

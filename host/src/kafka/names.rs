//! What Kafka accepts as a topic name and a bootstrap list, checked before anything
//! connects: a topic `""` would be created, and an empty bootstrap list only fails after
//! the reach timeout, with "no error reported".

/// The longest topic name Kafka accepts.
pub const MAX_TOPIC_NAME: usize = 249;

/// Why `name` is not a Kafka topic name, if it is not: Kafka's rules are 1 to 249
/// characters of ASCII letters, digits, `.`, `_` and `-`, and not `.` or `..`. The name is
/// not repeated (it may come from the environment).
pub fn topic_name_problem(name: &str) -> Option<String> {
    const RULE: &str =
        "a Kafka topic name is 1 to 249 of the characters a-z, A-Z, 0-9, `.`, `_` and `-`";
    if name.is_empty() {
        return Some(format!("the topic name is empty ({RULE})"));
    }
    if name == "." || name == ".." {
        return Some(format!("the topic may not be named `.` or `..` ({RULE})"));
    }
    if name.len() > MAX_TOPIC_NAME {
        return Some(format!(
            "the topic name has {} characters ({RULE})",
            name.chars().count()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Some(format!(
            "the topic name holds {} ({RULE})",
            describe_char(bad)
        ));
    }
    None
}

/// A character for a message: printable ones quoted, others by code point.
fn describe_char(c: char) -> String {
    if c.is_ascii_graphic() {
        format!("`{c}`")
    } else if c == ' ' {
        "a space".to_string()
    } else {
        format!("the character U+{:04X}", u32::from(c))
    }
}

/// Why `servers` is not a bootstrap list, if it is not: it must name at least one server,
/// and no entry between its commas may be blank.
pub fn bootstrap_problem(servers: &str) -> Option<String> {
    if servers.trim().is_empty() {
        return Some(
            "no bootstrap server: list at least one `host:port` (several separated by commas)"
                .to_string(),
        );
    }
    if servers.split(',').any(|s| s.trim().is_empty()) {
        return Some(
            "a blank entry between commas: list servers as `host:port,host:port`".to_string(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn kafka_rules_for_topic_names() {
        for good in [
            "clicks",
            "a",
            "retail.clickstream-events_v2",
            "..a",
            "a..",
            "A-9",
        ] {
            assert_eq!(topic_name_problem(good), None, "{good}");
        }
        assert_eq!(topic_name_problem(&"x".repeat(249)), None);
        for (bad, says) in [
            ("", "empty"),
            (".", "`.` or `..`"),
            ("..", "`.` or `..`"),
            ("a b", "a space"),
            ("a/b", "`/`"),
            ("tab\there", "U+0009"),
            ("caf\u{e9}", "U+00E9"),
        ] {
            let problem = topic_name_problem(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
            assert!(problem.contains(says), "{bad:?}: {problem}");
        }
        let long = topic_name_problem(&"x".repeat(250)).unwrap();
        assert!(long.contains("250 characters"), "{long}");
    }

    #[test]
    fn bootstrap_lists() {
        assert_eq!(bootstrap_problem("a:9092"), None);
        assert_eq!(bootstrap_problem("a:9092, b:9092"), None);
        assert!(
            bootstrap_problem("")
                .unwrap()
                .contains("no bootstrap server")
        );
        assert!(
            bootstrap_problem("  ")
                .unwrap()
                .contains("no bootstrap server")
        );
        assert!(
            bootstrap_problem("a:9092,,b:9092")
                .unwrap()
                .contains("blank")
        );
        assert!(bootstrap_problem("a:9092,").unwrap().contains("blank"));
    }

    proptest! {
        /// A name passes exactly when Kafka's own rule (its `Topic.validate`) says so.
        #[test]
        fn topic_names_follow_kafka(name in "[a-zA-Z0-9._\\- /\u{e9}]{0,260}") {
            let legal = !name.is_empty()
                && name.len() <= 249
                && name != "."
                && name != ".."
                && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
            prop_assert_eq!(topic_name_problem(&name).is_none(), legal);
        }
    }
}

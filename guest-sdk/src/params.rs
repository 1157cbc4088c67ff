use std::str::FromStr;

/// The parameters given to a plugin in the pipeline configuration (string keys and values).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parameters from key/value pairs; a later pair overrides an earlier one with the same key.
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        Params { pairs }
    }

    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key`, or an error naming it when it is missing.
    pub fn require(&self, key: &str) -> Result<&str, String> {
        self.get(key)
            .ok_or_else(|| format!("missing required parameter `{key}`"))
    }

    /// The value of `key` parsed as `T`, or `default` when it is not given.
    pub fn parse_or<T: FromStr>(&self, key: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(key) {
            None => Ok(default),
            Some(raw) => raw
                .trim()
                .parse()
                .map_err(|e| format!("parameter `{key}` = {raw:?} is invalid: {e}")),
        }
    }

    /// The value of `key` as a comma-separated list of non-empty, trimmed items.
    pub fn list(&self, key: &str) -> Option<Vec<String>> {
        self.get(key).map(|raw| {
            raw.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
    }

    /// Fails, naming the first unknown key, when a parameter outside `known` is given.
    /// Catches typos in pipeline configurations at load time.
    pub fn only(&self, known: &[&str]) -> Result<(), String> {
        match self
            .pairs
            .iter()
            .find(|(k, _)| !known.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) if known.is_empty() => Err(format!(
                "unknown parameter `{k}`: this plugin takes no parameters"
            )),
            Some((k, _)) => Err(format!(
                "unknown parameter `{k}`; known parameters: {}",
                known.join(", ")
            )),
        }
    }

    /// All parameters, in the order given.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn later_values_win_and_unknown_keys_are_named() {
        let p = params(&[("a", "1"), ("a", "2"), ("typo", "x")]);
        assert_eq!(p.get("a"), Some("2"));
        assert_eq!(p.parse_or("a", 0u32), Ok(2));
        assert_eq!(p.parse_or("b", 7u32), Ok(7));
        let err = p.only(&["a"]).unwrap_err();
        assert!(err.contains("`typo`"), "{err}");
        assert!(params(&[]).only(&[]).is_ok());
    }

    #[test]
    fn lists_are_trimmed_and_bad_numbers_named() {
        let p = params(&[("l", " x, y ,,z "), ("n", "abc")]);
        assert_eq!(p.list("l").unwrap(), vec!["x", "y", "z"]);
        assert!(p.parse_or("n", 1u32).unwrap_err().contains("`n`"));
        assert!(p.require("missing").unwrap_err().contains("`missing`"));
    }
}

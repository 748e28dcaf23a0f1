//! A hook group's `matcher`, read as Codex reads it: absent, empty or `*` matches
//! everything; only letters, digits, `_` and `|` is an exact name or a list of names
//! (`Bash` does not match `BashOutput`); anything else is an unanchored regular
//! expression (`^mcp__github__`).

/// A compiled matcher.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    All,
    Names(Vec<String>),
    Pattern(regex::Regex),
}

impl Matcher {
    pub(crate) fn new(matcher: Option<&str>) -> Result<Self, regex::Error> {
        let Some(matcher) = matcher
            .map(str::trim)
            .filter(|m| !m.is_empty() && *m != "*")
        else {
            return Ok(Self::All);
        };
        if matcher
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|')
        {
            return Ok(Self::Names(
                matcher
                    .split('|')
                    .filter(|name| !name.is_empty())
                    .map(str::to_string)
                    .collect(),
            ));
        }
        // Bounded so that a hostile or careless pattern cannot take memory without end.
        regex::RegexBuilder::new(matcher)
            .size_limit(1 << 20)
            .build()
            .map(Self::Pattern)
    }

    /// Whether any of `targets` matches (an event with nothing to match passes none, and
    /// only a match-everything matcher accepts it).
    pub(crate) fn accepts_any(&self, targets: &[&str]) -> bool {
        match self {
            Self::All => true,
            Self::Names(names) => targets.iter().any(|t| names.iter().any(|n| n == t)),
            Self::Pattern(pattern) => targets.iter().any(|t| pattern.is_match(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_names_alternatives_and_patterns() {
        let all = Matcher::new(Some("*")).unwrap();
        assert!(all.accepts_any(&[]) && all.accepts_any(&["x"]));
        let names = Matcher::new(Some("Bash|apply_patch")).unwrap();
        assert!(names.accepts_any(&["Bash"]));
        assert!(!names.accepts_any(&["BashOutput"]));
        assert!(names.accepts_any(&["apply_patch", "Write"]));
        let pattern = Matcher::new(Some("^mcp__git")).unwrap();
        assert!(pattern.accepts_any(&["mcp__github__search"]));
        assert!(!pattern.accepts_any(&["Bash"]));
        assert!(Matcher::new(Some("(unclosed")).is_err());
    }
}

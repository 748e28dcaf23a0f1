//! The environment of a stdio MCP server: never our whole environment, only a small
//! base plus what the entry asks for.

use std::collections::{BTreeMap, HashMap};

use crate::config::McpServerConfig;
use crate::nesting::child_depth_marker;

/// Variables a typical server needs to run at all (find programs, a home, a locale).
pub const BASE_ENV_VARS: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ",
];

/// The complete environment of server `config`'s child, built from `parent` (the
/// injected environment, never the process's own): [`BASE_ENV_VARS`], then the
/// `env_vars` names, then the literal `env` table, then the nesting depth marker, which
/// goes last so that no entry can reset it.
pub fn child_env(
    config: &McpServerConfig,
    parent: &HashMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let copied = BASE_ENV_VARS
        .iter()
        .copied()
        .chain(config.env_vars.iter().map(String::as_str));
    for name in copied {
        if let Some(value) = parent.get(name) {
            env.insert(name.to_string(), value.clone());
        }
    }
    if let Some(literal) = &config.env {
        env.extend(literal.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    let (depth_name, depth_value) = child_depth_marker(parent);
    env.insert(depth_name, depth_value);
    env
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nesting::NESTING_DEPTH_ENV;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_base_requested_and_literal_variables_pass() {
        let parent: HashMap<String, String> = [
            ("PATH", "/bin"),
            ("SECRET_KEY", "s3cret"),
            ("WANTED", "yes"),
            (NESTING_DEPTH_ENV, "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let config = McpServerConfig {
            command: Some("srv".into()),
            env_vars: vec!["WANTED".into(), "MISSING".into()],
            env: Some(
                [
                    ("LITERAL".to_string(), "v".to_string()),
                    (NESTING_DEPTH_ENV.to_string(), "0".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        let env = child_env(&config, &parent);
        let expected: BTreeMap<String, String> = [
            ("PATH", "/bin"),
            ("WANTED", "yes"),
            ("LITERAL", "v"),
            (NESTING_DEPTH_ENV, "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(env, expected);
    }
}

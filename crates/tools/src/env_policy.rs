//! `[shell_environment_policy]`: which environment variables reach commands the agent runs.
//!
//! The model chooses the commands, so whatever reaches their environment reaches the model.
//! Two rules hold whatever the policy says: the variables that hold the model providers' own
//! API keys (every provider's `env_key`, whatever its name) never pass, unless `set`
//! passes a value explicitly; and, unless `ignore_default_excludes`, names and values that
//! look like credentials, and the sockets of credential agents (ssh-agent, gpg-agent), are
//! dropped (`allow` exempts chosen names from that filter).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvironmentInherit {
    /// Start from the full environment of the `interpreter` process.
    #[default]
    All,
    /// Start from a small core set (HOME, PATH, USER, SHELL, LANG, TMPDIR, ...).
    Core,
    /// Start from nothing.
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellEnvironmentPolicy {
    #[serde(default)]
    pub inherit: EnvironmentInherit,
    /// When false (the default), credential-looking variables are dropped: names matching
    /// [`DEFAULT_EXCLUDES`] (case-insensitive), and URLs with a password in them.
    #[serde(default)]
    pub ignore_default_excludes: bool,
    /// Glob patterns of names exempt from the default credential filter (for example
    /// `["DATABASE_URL"]` for a test suite that needs it).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Extra glob patterns (`*` and `?`, case-insensitive) of names to drop.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Variables set on top (after filtering).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// If non-empty, only names matching one of these globs survive (applied last, before `set`).
    #[serde(default)]
    pub include_only: Vec<String>,
}

/// Variables kept by [`EnvironmentInherit::Core`].
const CORE_VARIABLES: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LC_ALL", "TERM",
];

/// Names that mark a variable as a likely credential, or as the socket of an agent that
/// signs with the user's keys.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASSPHRASE*",
    "*_PASS",
    // MYSQL_PWD, but not PWD or OLDPWD (the working directory).
    "*_PWD",
    "*CREDENTIAL*",
    // NPM_CONFIG__AUTH, DOCKER_AUTH_CONFIG, SSH_AUTH_SOCK; not GIT_AUTHOR_NAME.
    "*_AUTH",
    "*_AUTH_*",
    "AUTH_*",
    "AUTH",
    // Personal access tokens: GH_PAT, ADO_PAT.
    "*_PAT",
    "PAT",
    "*DSN*",
    "*COOKIE*",
    "*CONNECTION_STRING*",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "KRB5CCNAME",
];

/// Whether the dynamic loader (or the C library) acts on variable `name` at startup,
/// before `main`: `LD_*`, `GLIBC_TUNABLES`, `MALLOC_*` (any case).
///
/// A sandboxed command is started through the sandbox helper, our own executable, with
/// the command's environment; the helper restricts itself only once it runs. Whoever
/// could set `LD_PRELOAD` there (to a library an earlier sandboxed command wrote into the
/// workspace, say) would run code in the helper before the sandbox exists. The
/// operator's own environment settings are trusted; a client's are refused where they
/// are taken (a request's `env`, a caller's `shell_environment_policy.set`).
pub fn is_loader_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("LD_") || upper == "GLIBC_TUNABLES" || upper.starts_with("MALLOC_")
}

/// Builds the exact environment a command gets from the process environment `vars`.
///
/// Order matters and mirrors the config documentation: inherit, drop default
/// credential-looking names, drop `exclude`, keep only `include_only`, then apply `set`
/// (so an explicitly set variable always survives the filters).
///
/// `provider_keys` are the names of the model providers' API-key variables: dropped
/// whatever the policy, and whatever they are called.
pub fn create_env(
    policy: &ShellEnvironmentPolicy,
    vars: &HashMap<String, String>,
    provider_keys: &[String],
) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = match policy.inherit {
        EnvironmentInherit::All => vars.clone(),
        EnvironmentInherit::Core => vars
            .iter()
            .filter(|(name, _)| CORE_VARIABLES.contains(&name.as_str()))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect(),
        EnvironmentInherit::None => HashMap::new(),
    };
    env.retain(|name, _| !provider_keys.iter().any(|key| key == name));
    if !policy.ignore_default_excludes {
        env.retain(|name, value| {
            policy.allow.iter().any(|glob| glob_matches(glob, name))
                || !looks_like_credential(name, value)
        });
    }
    env.retain(|name, _| !policy.exclude.iter().any(|glob| glob_matches(glob, name)));
    if !policy.include_only.is_empty() {
        env.retain(|name, _| {
            policy
                .include_only
                .iter()
                .any(|glob| glob_matches(glob, name))
        });
    }
    for (name, value) in &policy.set {
        env.insert(name.clone(), value.clone());
    }
    env
}

/// Whether a variable looks like it holds a credential: by its name, or because its value is
/// a URL with a password in it (`postgres://app:hunter2@db/app`).
pub fn looks_like_credential(name: &str, value: &str) -> bool {
    DEFAULT_EXCLUDES.iter().any(|glob| glob_matches(glob, name)) || url_has_password(value)
}

fn url_has_password(value: &str) -> bool {
    let Some((_, rest)) = value.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

/// Case-insensitive glob match where `*` is any run of characters and `?` is one.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().flat_map(char::to_lowercase).collect();
    let name: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    // Iterative matcher with single-star backtracking: linear in practice, no recursion.
    let (mut p, mut n) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                last_star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match last_star {
                Some((star_p, star_n)) => {
                    p = star_p + 1;
                    n = star_n + 1;
                    last_star = Some((star_p, star_n + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sample() -> HashMap<String, String> {
        vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("OPENAI_API_KEY", "sk-1"),
            ("GITHUB_TOKEN", "gh"),
            ("my_secret_thing", "s"),
            ("EDITOR", "vi"),
            ("CARGO_HOME", "/c"),
        ])
    }

    #[test]
    fn glob_basics() {
        assert!(glob_matches("*KEY*", "openai_api_key"));
        assert!(glob_matches("A?C", "abc"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("CARGO_*", "CARGO_HOME"));
        assert!(glob_matches("*a*b*c", "xxaxxbxxbxc"));
        assert!(!glob_matches("A?C", "AC"));
        assert!(!glob_matches("CARGO_*", "XCARGO_HOME"));
        assert!(!glob_matches("abc", "abcd"));
    }

    #[test]
    fn all_drops_credentials_by_default() {
        let env = create_env(&ShellEnvironmentPolicy::default(), &sample(), &[]);
        let mut names: Vec<_> = env.keys().cloned().collect();
        names.sort();
        assert_eq!(names, vec!["CARGO_HOME", "EDITOR", "HOME", "PATH"]);
    }

    #[test]
    fn ignore_default_excludes_keeps_credentials() {
        let policy = ShellEnvironmentPolicy {
            ignore_default_excludes: true,
            ..Default::default()
        };
        assert_eq!(create_env(&policy, &sample(), &[]), sample());
    }

    #[test]
    fn core_keeps_only_the_core_set() {
        let policy = ShellEnvironmentPolicy {
            inherit: EnvironmentInherit::Core,
            ..Default::default()
        };
        let env = create_env(&policy, &sample(), &[]);
        assert_eq!(env, vars(&[("PATH", "/usr/bin"), ("HOME", "/home/u")]));
    }

    #[test]
    fn none_starts_empty_and_set_applies() {
        let policy = ShellEnvironmentPolicy {
            inherit: EnvironmentInherit::None,
            set: [("CI".to_string(), "1".to_string())].into_iter().collect(),
            ..Default::default()
        };
        assert_eq!(create_env(&policy, &sample(), &[]), vars(&[("CI", "1")]));
    }

    #[test]
    fn exclude_include_only_then_set() {
        let policy = ShellEnvironmentPolicy {
            exclude: vec!["editor".to_string()],
            include_only: vec![
                "PATH".to_string(),
                "cargo_*".to_string(),
                "EDITOR".to_string(),
            ],
            set: [("API_TOKEN".to_string(), "explicit".to_string())]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let env = create_env(&policy, &sample(), &[]);
        assert_eq!(
            env,
            vars(&[
                ("PATH", "/usr/bin"),
                ("CARGO_HOME", "/c"),
                ("API_TOKEN", "explicit"),
            ])
        );
    }

    #[test]
    fn credential_looking_names_and_values_are_dropped() {
        let env = vars(&[
            ("PGPASSWORD", "p"),
            ("MYSQL_PWD", "p"),
            ("DATABASE_URL", "postgres://app:hunter2@db:5432/app"),
            ("PLAIN_URL", "https://example.test/path?user=a@b"),
            ("GH_PAT", "p"),
            ("MY_PASSWORD", "p"),
            ("NPM_CONFIG__AUTH", "p"),
            ("DOCKER_AUTH_CONFIG", "{}"),
            ("SENTRY_DSN", "https://k@sentry/1"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
            ("GPG_AGENT_INFO", "/run/gpg"),
            ("PWD", "/ws"),
            ("OLDPWD", "/"),
            ("GIT_AUTHOR_NAME", "A"),
            ("LD_LIBRARY_PATH", "/lib"),
        ]);
        let kept = create_env(&ShellEnvironmentPolicy::default(), &env, &[]);
        let mut names: Vec<_> = kept.keys().cloned().collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                "GIT_AUTHOR_NAME",
                "LD_LIBRARY_PATH",
                "OLDPWD",
                "PLAIN_URL",
                "PWD"
            ]
        );
        let policy = ShellEnvironmentPolicy {
            allow: vec!["database_url".to_string()],
            ..Default::default()
        };
        assert!(create_env(&policy, &env, &[]).contains_key("DATABASE_URL"));
    }

    #[test]
    fn provider_key_variables_never_pass_whatever_their_name() {
        let env = vars(&[("LLM_CRED", "sk-1"), ("PATH", "/usr/bin")]);
        let keys = vec!["LLM_CRED".to_string()];
        for policy in [
            ShellEnvironmentPolicy::default(),
            ShellEnvironmentPolicy {
                ignore_default_excludes: true,
                include_only: vec!["*".to_string()],
                ..Default::default()
            },
        ] {
            assert_eq!(
                create_env(&policy, &env, &keys),
                vars(&[("PATH", "/usr/bin")])
            );
        }
        // Only an explicit `set` passes a value under that name.
        let policy = ShellEnvironmentPolicy {
            set: [("LLM_CRED".to_string(), "chosen".to_string())]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        assert_eq!(create_env(&policy, &env, &keys)["LLM_CRED"], "chosen");
    }
}

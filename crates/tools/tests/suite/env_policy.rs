//! Environment scrubbing through the public API, with an injected environment.

use std::collections::HashMap;

use interpreter_tools::env_policy::{EnvironmentInherit, ShellEnvironmentPolicy, create_env};

fn process_like_env() -> HashMap<String, String> {
    [
        ("PATH", "/usr/bin"),
        ("HOME", "/home/dev"),
        ("LANG", "C.UTF-8"),
        ("AWS_SECRET_ACCESS_KEY", "x"),
        ("Github_Token", "y"),
        ("SSH_AUTH_SOCK", "/tmp/s"),
        ("RUST_LOG", "debug"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[test]
fn default_policy_scrubs_credentials_only() {
    let env = create_env(&ShellEnvironmentPolicy::default(), &process_like_env(), &[]);
    assert!(!env.contains_key("AWS_SECRET_ACCESS_KEY"));
    assert!(!env.contains_key("Github_Token"));
    // The ssh-agent signs with the user's keys: its socket is a credential too.
    assert!(!env.contains_key("SSH_AUTH_SOCK"));
    for kept in ["PATH", "HOME", "LANG", "RUST_LOG"] {
        assert!(env.contains_key(kept), "{kept} should survive");
    }
}

#[test]
fn policy_from_toml_applies_in_order() -> anyhow::Result<()> {
    let policy: ShellEnvironmentPolicy = toml_like(
        r#"{"inherit":"core","exclude":["lang"],"set":{"CI":"true","MY_TOKEN":"explicit"}}"#,
    )?;
    assert_eq!(policy.inherit, EnvironmentInherit::Core);
    let env = create_env(&policy, &process_like_env(), &[]);
    let mut names: Vec<_> = env.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, vec!["CI", "HOME", "MY_TOKEN", "PATH"]);
    Ok(())
}

#[test]
fn include_only_with_wildcards() {
    let policy = ShellEnvironmentPolicy {
        include_only: vec!["p?th".into(), "rust_*".into()],
        ..Default::default()
    };
    let env = create_env(&policy, &process_like_env(), &[]);
    let mut names: Vec<_> = env.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(names, vec!["PATH", "RUST_LOG"]);
}

/// The config loader reads TOML, but the serde shape is the same; JSON keeps this test
/// free of an extra dev-dependency.
fn toml_like(json: &str) -> anyhow::Result<ShellEnvironmentPolicy> {
    Ok(serde_json::from_str(json)?)
}

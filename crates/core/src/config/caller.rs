//! What the callers of a server front end may set (`interpreter mcp-server`'s clients
//! today; the app-server can hold its clients to the same rules).
//!
//! A server runs threads for callers with settings of their own: a tool call's `sandbox`
//! and `config`, a `thread/start`'s. The operator of the server bounds them, once, when
//! the server starts ([`CallerLimits`]); [`super::load_config`] holds every thread's
//! configuration to those bounds, and the engine holds every command and patch of the
//! thread to them ([`super::Config::sandbox_ceiling`]), so no front end has its own copy
//! of the rule.
//!
//! * A [`SandboxCeiling`]: the loosest sandbox a caller's thread may run under. Above it
//!   the configuration does not load (the request is refused before anything runs), and
//!   under it nothing leaves the sandbox: no command runs outside it and no patch writes
//!   where its commands could not, approved or not.
//! * Programs: a caller's overrides may not name a program the agent would run
//!   ([`program_settings`]) unless the operator allows it.

use interpreter_protocol::{SandboxMode, SandboxPolicy};

use super::types::Config;

/// The loosest sandbox a server's callers may run threads under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxCeiling {
    mode: SandboxMode,
    /// Whether commands may reach the network.
    network: bool,
    /// What set it, as the operator would look for it in messages
    /// (`mcp_server.max_sandbox = "workspace-write"`).
    source: String,
}

/// Modes in order of what they allow.
fn rank(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::ReadOnly => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::DangerFullAccess => 2,
    }
}

/// Whether commands under `policy` may reach the network: with its network access, or
/// without a sandbox of ours (which is what would stop them).
fn has_network(policy: &SandboxPolicy) -> bool {
    policy.runs_unsandboxed() || policy.has_full_network_access()
}

impl SandboxCeiling {
    /// `mode` as `config` (the operator's own configuration) defines it: network only
    /// with `danger-full-access`, or with `workspace-write` where the operator's
    /// `[sandbox_workspace_write] network_access` is on.
    pub fn of_mode(mode: SandboxMode, config: &Config, source: impl Into<String>) -> Self {
        let network = match mode {
            SandboxMode::ReadOnly => false,
            SandboxMode::WorkspaceWrite => config.workspace_write_network,
            SandboxMode::DangerFullAccess => true,
        };
        Self {
            mode,
            network,
            source: source.into(),
        }
    }

    /// Exactly what `policy` allows: its mode, and network if it has any.
    pub fn of_policy(policy: &SandboxPolicy, source: impl Into<String>) -> Self {
        Self {
            mode: policy.mode(),
            network: has_network(policy),
            source: source.into(),
        }
    }

    /// The lower of two ceilings (each part from the stricter), naming both sources when
    /// both bind.
    pub fn lower(self, other: Self) -> Self {
        let mode = if rank(other.mode) < rank(self.mode) {
            other.mode
        } else {
            self.mode
        };
        Self {
            mode,
            network: self.network && other.network,
            source: format!("{} and {}", self.source, other.source),
        }
    }

    /// Why `policy` is above this ceiling, or `None` when it is not.
    pub fn exceeded_by(&self, policy: &SandboxPolicy) -> Option<String> {
        let mode = policy.mode();
        if rank(mode) > rank(self.mode) {
            return Some(format!(
                "sandbox `{}` is above the ceiling `{}`",
                mode.as_str(),
                self.describe()
            ));
        }
        if has_network(policy) && !self.network {
            return Some(format!(
                "sandbox `{}` with network access is above the ceiling `{}`",
                mode.as_str(),
                self.describe()
            ));
        }
        None
    }

    /// Whether a command may run outside the sandbox (only under a `danger-full-access`
    /// ceiling).
    pub fn allows_unsandboxed(&self) -> bool {
        self.mode == SandboxMode::DangerFullAccess
    }

    pub fn allows_network(&self) -> bool {
        self.network
    }

    /// What set the ceiling, for messages.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// `workspace-write` (no network), `workspace-write` with network, ….
    pub fn describe(&self) -> String {
        match (self.mode, self.network) {
            (SandboxMode::DangerFullAccess, _) => self.mode.as_str().to_string(),
            (mode, true) => format!("{} with network", mode.as_str()),
            (mode, false) => format!("{}, no network", mode.as_str()),
        }
    }
}

/// What a server's operator lets its callers set; fixed when the server starts, so a
/// caller cannot loosen it by writing the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CallerLimits {
    /// The loosest sandbox a caller's thread may run under; `None`: any.
    pub sandbox: Option<SandboxCeiling>,
    /// Callers may add or change programs the agent runs ([`program_settings`]).
    pub allow_programs: bool,
    /// The key that would allow it, for refusals (`mcp_server.allow_caller_programs`).
    pub programs_key: String,
    /// Key paths only the operator may write (`mcp_server`: where these limits come
    /// from): a caller's write to the configuration file under one is refused.
    pub operator_keys: Vec<String>,
}

/// Every setting of the override `key = value` (a dotted key and its TOML value, as `-c`
/// or a caller's `config` gives it) that names a program the agent would run, as dotted
/// key paths; empty when there is none. Those are
///
/// * `mcp_servers.*`: the MCP servers the agent starts (`command`, `args`, `env`, `cwd`)
///   or connects to with the server's credentials (`url`, `bearer_token_env_var`,
///   headers); a server is started outside the sandbox, so any change is one;
/// * `notify` and `hooks`: commands run on events (ignored by this agent, refused all
///   the same, so a later version that reads them cannot be fed one);
/// * `shell_environment_policy.set.<loader variable>` (`LD_PRELOAD`, …): read by the
///   dynamic loader of the sandbox helper before it has sandboxed itself
///   ([`interpreter_tools::env_policy::is_loader_variable`]);
/// * any of those inside `profiles.<name>`.
///
/// Model providers have no command keys (their keys and URLs are data).
pub fn program_settings(key: &str, value: &toml::Value) -> Vec<String> {
    let mut path: Vec<String> = key.split('.').map(|s| s.trim().to_string()).collect();
    let mut found = Vec::new();
    collect_programs(&mut path, value, &mut found);
    found
}

fn collect_programs(path: &mut Vec<String>, value: &toml::Value, found: &mut Vec<String>) {
    let segments: Vec<&str> = path.iter().map(String::as_str).collect();
    if names_program(&segments) {
        found.push(path.join("."));
        return;
    }
    if let toml::Value::Table(table) = value {
        for (key, child) in table {
            path.push(key.clone());
            collect_programs(path, child, found);
            path.pop();
        }
    }
}

/// Whether the setting at `path` (or anything below it) names a program. A table that
/// only leads to such settings (`shell_environment_policy`) is looked into by the caller.
fn names_program(path: &[&str]) -> bool {
    match path {
        ["mcp_servers", ..] | ["notify", ..] | ["hooks", ..] => true,
        ["shell_environment_policy", "set", name, ..] => {
            interpreter_tools::env_policy::is_loader_variable(name)
        }
        ["profiles", _, rest @ ..] if !rest.is_empty() => names_program(rest),
        _ => false,
    }
}

/// The same, for a JSON value (a configuration write).
pub fn program_settings_json(key: &str, value: &serde_json::Value) -> Vec<String> {
    // JSON null (a removal) has no TOML form: an empty table stands for it, which names
    // the key itself and nothing below.
    let value = json_as_toml(value);
    program_settings(key, &value)
}

fn json_as_toml(value: &serde_json::Value) -> toml::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => toml::Value::Table(
            map.iter()
                .map(|(key, value)| (key.clone(), json_as_toml(value)))
                .collect(),
        ),
        Value::String(text) => toml::Value::String(text.clone()),
        Value::Bool(flag) => toml::Value::Boolean(*flag),
        // Only where a key leads matters here, not what the leaves hold.
        _ => toml::Value::Table(toml::map::Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> toml::Value {
        format!("v = {text}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut table| table.remove("v"))
            .unwrap_or_else(|| panic!("{text}"))
    }

    #[test]
    fn programs_are_found_however_the_key_is_split() {
        for (key, text, expected) in [
            (
                "mcp_servers.x.command",
                "\"sh\"",
                vec!["mcp_servers.x.command"],
            ),
            (
                "mcp_servers.x",
                "{ command = \"sh\" }",
                vec!["mcp_servers.x"],
            ),
            (
                "mcp_servers",
                "{ x = { url = \"http://e\" } }",
                vec!["mcp_servers"],
            ),
            ("notify", "[\"sh\", \"-c\", \"x\"]", vec!["notify"]),
            ("hooks.pre", "\"x\"", vec!["hooks.pre"]),
            (
                "shell_environment_policy",
                "{ set = { LD_PRELOAD = \"/tmp/x.so\", FOO = \"1\" } }",
                vec!["shell_environment_policy.set.LD_PRELOAD"],
            ),
            (
                "shell_environment_policy.set.ld_audit",
                "\"x\"",
                vec!["shell_environment_policy.set.ld_audit"],
            ),
            (
                "profiles.evil",
                "{ mcp_servers = { x = { command = \"sh\" } } }",
                vec!["profiles.evil.mcp_servers"],
            ),
        ] {
            assert_eq!(program_settings(key, &value(text)), expected, "{key}");
        }
        for (key, text) in [
            ("model", "\"m\""),
            ("sandbox_mode", "\"danger-full-access\""),
            ("shell_environment_policy.set.FOO", "\"bar\""),
            ("model_providers.x.base_url", "\"http://e\""),
            ("profiles", "{}"),
            ("mcp_server.events", "false"),
        ] {
            assert!(program_settings(key, &value(text)).is_empty(), "{key}");
        }
        assert_eq!(
            program_settings_json("mcp_servers.x", &serde_json::Value::Null),
            vec!["mcp_servers.x"]
        );
    }

    fn workspace(network: bool) -> SandboxPolicy {
        SandboxPolicy::WorkspaceWrite {
            writable_roots: Vec::new(),
            network_access: network,
            exclude_tmpdir_env_var: false,
            exclude_slash_tmp: false,
        }
    }

    #[test]
    fn ceilings_order_modes_and_network() {
        let ceiling = SandboxCeiling::of_policy(&workspace(false), "test");
        assert_eq!(ceiling.exceeded_by(&workspace(false)), None);
        assert_eq!(
            ceiling.exceeded_by(&SandboxPolicy::ReadOnly {
                network_access: false
            }),
            None
        );
        assert!(ceiling.exceeded_by(&workspace(true)).is_some());
        assert!(
            ceiling
                .exceeded_by(&SandboxPolicy::ReadOnly {
                    network_access: true
                })
                .is_some()
        );
        assert!(
            ceiling
                .exceeded_by(&SandboxPolicy::DangerFullAccess)
                .is_some()
        );
        assert!(
            ceiling
                .exceeded_by(&SandboxPolicy::ExternalSandbox {
                    network_access: false
                })
                .is_some()
        );
        assert!(!ceiling.allows_unsandboxed());
        let full = SandboxCeiling::of_policy(&SandboxPolicy::DangerFullAccess, "full");
        assert_eq!(full.exceeded_by(&SandboxPolicy::DangerFullAccess), None);
        let lower = full.lower(SandboxCeiling::of_policy(
            &SandboxPolicy::ReadOnly {
                network_access: false,
            },
            "own",
        ));
        assert_eq!(lower.describe(), "read-only, no network");
        assert_eq!(lower.source(), "full and own");
        assert!(lower.exceeded_by(&workspace(false)).is_some());
    }
}

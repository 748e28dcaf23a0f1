//! `interpreter mcp list|get|add|remove|login|logout`: reading and editing the `[mcp_servers.NAME]`
//! tables of `$INTERPRETER_HOME/config.toml`, the MCP servers the agent uses as a client.
//!
//! Only the base `config.toml` is read or written: profiles and `-c` overrides are
//! run-time layers, and editing them from here would make it unclear which file a server
//! lives in. Edits go through `toml_edit` so the user's comments, key order and
//! formatting survive. Before the file is replaced, the edited text is loaded with the
//! engine's own config loader; an edit that would make the config fail to load is refused
//! and the file is left untouched. The replacement itself is a temp file in the same
//! directory renamed over the original, so a crash never leaves half a file.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use interpreter_core::config::{
    ConfigError, ConfigOverrides, McpServerConfig, load_config, resolve_home,
};
use interpreter_mcp_client::nesting::starts_own_mcp_server;
use interpreter_mcp_client::oauth::{self, LoginOptions, OAuthError};
use interpreter_mcp_client::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpConnectionManager, McpPool,
    validate_server_name,
};
use serde::{Deserialize, Serialize};

use crate::cli::{ConfigArgs, McpAddArgs, McpArgs, McpCommand};
use crate::config_inputs;

/// Name of the config file these commands edit, inside the home directory.
const CONFIG_FILE: &str = "config.toml";
/// The top-level table holding one sub-table per server.
const SERVERS_KEY: &str = "mcp_servers";
/// Stands in for `model` while checking an edit: a config.toml that leaves the model to a
/// profile or `-c` must stay editable, and the model has nothing to do with MCP servers.
const VALIDATION_MODEL: &str = "mcp-config-check";
/// Shown instead of secret values (env values, static HTTP headers) in text output.
const MASK: &str = "*****";

#[derive(Debug, thiserror::Error)]
pub(crate) enum McpCommandError {
    #[error("no MCP server named '{name}' in {}", path.display())]
    UnknownServer { name: String, path: PathBuf },
    #[error("invalid server name '{name}': use letters, digits, '-' and '_'")]
    InvalidName { name: String },
    #[error(
        "an MCP server named '{name}' already exists in {}; pass --force to replace it",
        path.display()
    )]
    AlreadyExists { name: String, path: PathBuf },
    #[error(
        "refusing to add '{name}': `{command}` runs `interpreter mcp-server`, the MCP server \
         of this agent itself, so every thread would start another agent (the agent skips \
         such entries at startup)"
    )]
    SelfRecursion { name: String, command: String },
    #[error("invalid --url '{url}': {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("invalid environment variable name '{name}': use letters, digits and '_'")]
    InvalidEnvVarName { name: String },
    #[error("{}: `{SERVERS_KEY}` must be a table", path.display())]
    ServersNotATable { path: PathBuf },
    #[error("{}: [{SERVERS_KEY}.{name}]: {message}", path.display())]
    InvalidEntry {
        name: String,
        path: PathBuf,
        message: String,
    },
    #[error("{} is not valid TOML: {message}", path.display())]
    Parse { path: PathBuf, message: String },
    #[error("the edited config would not load, so {} was left unchanged: {source}", path.display())]
    WouldBreakConfig {
        path: PathBuf,
        #[source]
        source: ConfigError,
    },
    #[error("failed to read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Login(OAuthError),
    #[error("logged in, but connecting with the new tokens failed: {message}")]
    VerifyLogin { message: String },
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    ConfigInputs(anyhow::Error),
}

/// Entry point of `interpreter mcp ...`. `root_config` holds the root `-c`/`--profile`
/// flags, which do not apply here (said on stderr when given); `--strict-config` makes
/// the post-edit check reject unknown keys too.
pub(crate) async fn run(
    args: McpArgs,
    root_config: &ConfigArgs,
    env: &HashMap<String, String>,
) -> anyhow::Result<ExitCode> {
    if root_config.profile.is_some() || !root_config.overrides.is_empty() {
        eprintln!(
            "warning: `interpreter mcp` reads and edits config.toml only; --profile and -c are ignored"
        );
    }
    let home = resolve_home(env)?;
    let config_path = home.join(CONFIG_FILE);
    let mut stdout = std::io::stdout().lock();
    match args.command {
        McpCommand::List { json } => {
            let servers = read_servers(&config_path)?;
            if json {
                writeln!(stdout, "{}", serde_json::to_string_pretty(&servers)?)?;
            } else {
                write!(stdout, "{}", render_list(&servers, &config_path))?;
            }
        }
        McpCommand::Get { name, json } => {
            let servers = read_servers(&config_path)?;
            let server = servers
                .into_iter()
                .find(|server| server.name == name)
                .ok_or(McpCommandError::UnknownServer {
                    name,
                    path: config_path,
                })?;
            if json {
                writeln!(stdout, "{}", serde_json::to_string_pretty(&server)?)?;
            } else {
                write!(stdout, "{}", render_server(&server))?;
            }
        }
        McpCommand::Add(add) => {
            let editor = ConfigEditor::open(&home, env, root_config.strict_config)?;
            let replaced = editor.add(&add)?;
            let verb = if replaced { "Replaced" } else { "Added" };
            writeln!(
                stdout,
                "{verb} MCP server '{}' in {}.",
                add.name,
                config_path.display()
            )?;
        }
        McpCommand::Remove { name } => {
            let editor = ConfigEditor::open(&home, env, root_config.strict_config)?;
            editor.remove(&name)?;
            writeln!(
                stdout,
                "Removed MCP server '{name}' from {}.",
                config_path.display()
            )?;
        }
        McpCommand::Login {
            name,
            scopes,
            no_browser,
            follow_redirect,
        } => {
            drop(stdout);
            let server = server_config(&config_path, &name)?;
            let tools = login(
                &name,
                &server,
                env,
                &home,
                LoginOptions {
                    scopes,
                    follow_redirect,
                    callback_timeout: None,
                },
                !no_browser && !follow_redirect,
            )
            .await?;
            let mut stdout = std::io::stdout().lock();
            writeln!(
                stdout,
                "Successfully logged in to MCP server '{name}' ({tools} tools available)."
            )?;
            stdout.flush()?;
            return Ok(ExitCode::SUCCESS);
        }
        McpCommand::Logout { name } => {
            let server = server_config(&config_path, &name)?;
            if server.url.is_none() {
                return Err(McpCommandError::Login(OAuthError::NotHttp).into());
            }
            if oauth::logout(&name, &home).map_err(McpCommandError::Login)? {
                writeln!(stdout, "Removed OAuth credentials for '{name}'.")?;
            } else {
                writeln!(stdout, "No OAuth credentials stored for '{name}'.")?;
            }
        }
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The typed entry of server `name`, as the agent reads it.
fn server_config(config_path: &Path, name: &str) -> Result<McpServerConfig, McpCommandError> {
    let unknown = || McpCommandError::UnknownServer {
        name: name.to_string(),
        path: config_path.to_path_buf(),
    };
    let text = read_optional(config_path)?.ok_or_else(unknown)?;
    let file: ServersFileToml = toml::from_str(&text).map_err(|err| McpCommandError::Parse {
        path: config_path.to_path_buf(),
        message: err.message().to_string(),
    })?;
    let value = file.mcp_servers.get(name).cloned().ok_or_else(unknown)?;
    value
        .try_into()
        .map_err(|err: toml::de::Error| McpCommandError::InvalidEntry {
            name: name.to_string(),
            path: config_path.to_path_buf(),
            message: err.message().to_string(),
        })
}

/// `mcp login`: the OAuth flow, then a connection with the new tokens to check that they
/// work; returns how many tools the server offers.
async fn login(
    name: &str,
    server: &McpServerConfig,
    env: &HashMap<String, String>,
    home: &Path,
    options: LoginOptions,
    open_browser: bool,
) -> Result<usize, McpCommandError> {
    let show_url = move |url: &str| {
        // The URL is the command's output (a user copies it), so it goes to stdout.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "Authorize `{name}` by opening this URL in your browser:\n{url}\n"
        );
        let _ = stdout.flush();
        if open_browser && !open_in_browser(url) {
            eprintln!("(Browser launch failed; please copy the URL above manually.)");
        }
    };
    // A verification refused for lack of scope is recorded as a step-up (by the
    // connection), and the login runs again asking for the wider scope.
    let url = server.url.clone().unwrap_or_default();
    let mut step_ups = 0;
    loop {
        oauth::login(name, server, env, home, &options, &show_url)
            .await
            .map_err(McpCommandError::Login)?;
        match verify_login(name, server, env, home).await {
            Err(err)
                if step_ups < MAX_LOGIN_STEP_UPS && oauth::step_up_pending(home, name, &url) =>
            {
                step_ups += 1;
                eprintln!("{err}\nAuthorizing `{name}` again with the scope the server asked for.");
            }
            outcome => return outcome,
        }
    }
}

/// How many times one `mcp login` re-authorizes because the server wants more scope.
const MAX_LOGIN_STEP_UPS: usize = 2;

/// Connects with the stored tokens and lists the server's tools; how many it offers.
async fn verify_login(
    name: &str,
    server: &McpServerConfig,
    env: &HashMap<String, String>,
    home: &Path,
) -> Result<usize, McpCommandError> {
    let pool = McpPool::default();
    let servers = BTreeMap::from([(name.to_string(), server.clone())]);
    let connected =
        McpConnectionManager::connect(&pool, &servers, env, None, None, Some(home)).await;
    let outcome = match connected {
        Ok((manager, _)) => {
            let report = manager.settle(&|_| {}).await;
            let tools = manager.tools().len();
            manager.shutdown().await;
            match report.warnings.into_iter().next() {
                Some(warning) => Err(McpCommandError::VerifyLogin { message: warning }),
                None => Ok(tools),
            }
        }
        Err(err) => Err(McpCommandError::VerifyLogin {
            message: err.to_string(),
        }),
    };
    pool.shutdown().await;
    outcome
}

/// Best effort: hand `url` to the desktop's opener. `false` when none could be started.
fn open_in_browser(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

/// How one `[mcp_servers.NAME]` table is shown by `list` and `get` (and their `--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ServerView {
    pub name: String,
    pub enabled: bool,
    pub required: bool,
    pub transport: TransportView,
    /// Allow-list of raw MCP tool names; `None` means every tool.
    pub enabled_tools: Option<Vec<String>>,
    /// Deny-list applied after the allow-list.
    pub disabled_tools: Option<Vec<String>>,
    /// `None`: the default applies.
    pub startup_timeout_sec: Option<f64>,
    pub tool_timeout_sec: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum TransportView {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Option<BTreeMap<String, String>>,
        env_vars: Vec<String>,
        cwd: Option<String>,
    },
    StreamableHttp {
        url: String,
        bearer_token_env_var: Option<String>,
        http_headers: Option<BTreeMap<String, String>>,
        env_http_headers: Option<BTreeMap<String, String>>,
    },
    /// Neither or both of `command` and `url`: the agent cannot start it as written.
    Invalid { reason: String },
}

/// A server table as written in the file, read leniently (unknown keys are the loader's
/// business, not the lister's).
#[derive(Debug, Deserialize)]
struct ServerEntryToml {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    env: Option<BTreeMap<String, String>>,
    #[serde(default)]
    env_vars: Vec<EnvVarToml>,
    cwd: Option<String>,
    url: Option<String>,
    bearer_token_env_var: Option<String>,
    http_headers: Option<BTreeMap<String, String>>,
    env_http_headers: Option<BTreeMap<String, String>>,
    startup_timeout_sec: Option<f64>,
    tool_timeout_sec: Option<f64>,
    #[serde(default = "default_enabled")]
    enabled: bool,
    #[serde(default)]
    required: bool,
    enabled_tools: Option<Vec<String>>,
    disabled_tools: Option<Vec<String>>,
}

fn default_enabled() -> bool {
    true
}

/// `env_vars` entries are a variable name, or a table naming one.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum EnvVarToml {
    Name(String),
    Detailed { name: String },
}

impl EnvVarToml {
    fn into_name(self) -> String {
        match self {
            Self::Name(name) | Self::Detailed { name } => name,
        }
    }
}

/// Only the servers table; the rest of the file is the loader's concern.
#[derive(Debug, Default, Deserialize)]
struct ServersFileToml {
    #[serde(default)]
    mcp_servers: BTreeMap<String, toml::Value>,
}

impl ServerView {
    fn from_entry(name: String, entry: ServerEntryToml) -> Self {
        let transport = match (entry.command, entry.url) {
            (Some(command), None) => TransportView::Stdio {
                command,
                args: entry.args,
                env: entry.env,
                env_vars: entry
                    .env_vars
                    .into_iter()
                    .map(EnvVarToml::into_name)
                    .collect(),
                cwd: entry.cwd,
            },
            (None, Some(url)) => TransportView::StreamableHttp {
                url,
                bearer_token_env_var: entry.bearer_token_env_var,
                http_headers: entry.http_headers,
                env_http_headers: entry.env_http_headers,
            },
            (Some(_), Some(_)) => TransportView::Invalid {
                reason: "both `command` and `url` are set".into(),
            },
            (None, None) => TransportView::Invalid {
                reason: "neither `command` nor `url` is set".into(),
            },
        };
        Self {
            name,
            enabled: entry.enabled,
            required: entry.required,
            transport,
            enabled_tools: entry.enabled_tools,
            disabled_tools: entry.disabled_tools,
            startup_timeout_sec: entry.startup_timeout_sec,
            tool_timeout_sec: entry.tool_timeout_sec,
        }
    }
}

/// Every server of `config_path`, sorted by name. A missing file has none.
pub(crate) fn read_servers(config_path: &Path) -> Result<Vec<ServerView>, McpCommandError> {
    let Some(text) = read_optional(config_path)? else {
        return Ok(Vec::new());
    };
    let file: ServersFileToml = toml::from_str(&text).map_err(|err| McpCommandError::Parse {
        path: config_path.to_path_buf(),
        message: err.message().to_string(),
    })?;
    file.mcp_servers
        .into_iter()
        .map(|(name, value)| {
            let entry: ServerEntryToml =
                value
                    .try_into()
                    .map_err(|err: toml::de::Error| McpCommandError::InvalidEntry {
                        name: name.clone(),
                        path: config_path.to_path_buf(),
                        message: err.message().to_string(),
                    })?;
            Ok(ServerView::from_entry(name, entry))
        })
        .collect()
}

fn read_optional(path: &Path) -> Result<Option<String>, McpCommandError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(McpCommandError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// One aligned table, two spaces between columns.
fn render_list(servers: &[ServerView], config_path: &Path) -> String {
    if servers.is_empty() {
        return format!(
            "No MCP servers configured in {}. Add one with `interpreter mcp add NAME -- COMMAND [ARGS...]`.\n",
            config_path.display()
        );
    }
    let header = [
        "Name",
        "Transport",
        "Command / URL",
        "Enabled",
        "Required",
        "Tools",
    ];
    let rows: Vec<[String; 6]> = servers
        .iter()
        .map(|server| {
            let (kind, target) = match &server.transport {
                TransportView::Stdio { command, args, .. } => {
                    ("stdio", command_line(command, args))
                }
                TransportView::StreamableHttp { url, .. } => ("http", url.clone()),
                TransportView::Invalid { reason } => ("invalid", reason.clone()),
            };
            [
                server.name.clone(),
                kind.to_string(),
                target,
                yes_no(server.enabled).to_string(),
                yes_no(server.required).to_string(),
                tool_filter(server),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    let mut push_row = |cells: &[&str]| {
        let last = cells.len() - 1;
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index == last {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:<width$}  ");
            }
        }
        text.push('\n');
    };
    push_row(&header);
    for row in &rows {
        push_row(&row.each_ref().map(String::as_str));
    }
    text
}

/// `get` as indented `key: value` lines; secrets are masked.
fn render_server(server: &ServerView) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "{}", server.name);
    let _ = writeln!(text, "  enabled: {}", server.enabled);
    let _ = writeln!(text, "  required: {}", server.required);
    match &server.transport {
        TransportView::Stdio {
            command,
            args,
            env,
            env_vars,
            cwd,
        } => {
            let _ = writeln!(text, "  transport: stdio");
            let _ = writeln!(text, "  command: {command}");
            let _ = writeln!(
                text,
                "  args: {}",
                or_dash(interpreter_tools::display_command(args))
            );
            let _ = writeln!(text, "  cwd: {}", cwd.as_deref().unwrap_or("-"));
            let mut env_cells: Vec<String> = env
                .iter()
                .flatten()
                .map(|(key, _)| format!("{key}={MASK}"))
                .collect();
            env_cells.extend(env_vars.iter().cloned());
            let _ = writeln!(text, "  env: {}", or_dash(env_cells.join(", ")));
        }
        TransportView::StreamableHttp {
            url,
            bearer_token_env_var,
            http_headers,
            env_http_headers,
        } => {
            let _ = writeln!(text, "  transport: streamable_http");
            let _ = writeln!(text, "  url: {url}");
            let _ = writeln!(
                text,
                "  bearer_token_env_var: {}",
                bearer_token_env_var.as_deref().unwrap_or("-")
            );
            let headers: Vec<String> = http_headers
                .iter()
                .flatten()
                .map(|(key, _)| format!("{key}={MASK}"))
                .collect();
            let _ = writeln!(text, "  http_headers: {}", or_dash(headers.join(", ")));
            let env_headers: Vec<String> = env_http_headers
                .iter()
                .flatten()
                .map(|(key, var)| format!("{key}={var}"))
                .collect();
            let _ = writeln!(
                text,
                "  env_http_headers: {}",
                or_dash(env_headers.join(", "))
            );
        }
        TransportView::Invalid { reason } => {
            let _ = writeln!(text, "  transport: invalid ({reason})");
        }
    }
    if let Some(tools) = &server.enabled_tools {
        let _ = writeln!(text, "  enabled_tools: {}", list_or_empty(tools));
    }
    if let Some(tools) = &server.disabled_tools {
        let _ = writeln!(text, "  disabled_tools: {}", list_or_empty(tools));
    }
    let _ = writeln!(
        text,
        "  startup_timeout_sec: {}",
        seconds(
            server.startup_timeout_sec,
            DEFAULT_STARTUP_TIMEOUT.as_secs_f64()
        )
    );
    let _ = writeln!(
        text,
        "  tool_timeout_sec: {}",
        seconds(server.tool_timeout_sec, DEFAULT_TOOL_TIMEOUT.as_secs_f64())
    );
    let _ = writeln!(text, "  remove: interpreter mcp remove {}", server.name);
    text
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

fn or_dash(text: String) -> String {
    if text.is_empty() { "-".into() } else { text }
}

fn list_or_empty(items: &[String]) -> String {
    if items.is_empty() {
        "[]".into()
    } else {
        items.join(", ")
    }
}

fn seconds(value: Option<f64>, default: f64) -> String {
    match value {
        Some(value) => value.to_string(),
        None => format!("{default} (default)"),
    }
}

/// `all`, `only: a, b`, `except: c`, or both restrictions separated by `; `.
fn tool_filter(server: &ServerView) -> String {
    let mut parts = Vec::new();
    if let Some(tools) = &server.enabled_tools {
        parts.push(format!("only: {}", list_or_empty(tools)));
    }
    if let Some(tools) = &server.disabled_tools {
        parts.push(format!("except: {}", list_or_empty(tools)));
    }
    if parts.is_empty() {
        "all".into()
    } else {
        parts.join("; ")
    }
}

/// The command as a user would paste it into a shell.
fn command_line(command: &str, args: &[String]) -> String {
    let mut words = vec![command.to_string()];
    words.extend(args.iter().cloned());
    interpreter_tools::display_command(&words)
}

fn is_valid_env_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The base config.toml, parsed for editing, with what is needed to check and replace it.
struct ConfigEditor<'a> {
    home: &'a Path,
    /// The path shown to the user.
    config_path: PathBuf,
    /// The path actually replaced: the target when config.toml is a symlink, so the link
    /// (typical of dotfile managers) survives.
    write_path: PathBuf,
    original: String,
    document: toml_edit::DocumentMut,
    env: &'a HashMap<String, String>,
    strict: bool,
}

impl<'a> ConfigEditor<'a> {
    fn open(
        home: &'a Path,
        env: &'a HashMap<String, String>,
        strict: bool,
    ) -> Result<Self, McpCommandError> {
        let config_path = home.join(CONFIG_FILE);
        let original = read_optional(&config_path)?.unwrap_or_default();
        let document: toml_edit::DocumentMut =
            original
                .parse()
                .map_err(|err: toml_edit::TomlError| McpCommandError::Parse {
                    path: config_path.clone(),
                    message: err.message().to_string(),
                })?;
        let write_path = match std::fs::symlink_metadata(&config_path) {
            Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(&config_path)
                .map_err(|source| McpCommandError::Read {
                    path: config_path.clone(),
                    source,
                })?,
            _ => config_path.clone(),
        };
        Ok(Self {
            home,
            config_path,
            write_path,
            original,
            document,
            env,
            strict,
        })
    }

    /// Adds (or with `--force` replaces) one server. Returns whether one was replaced.
    fn add(mut self, args: &McpAddArgs) -> Result<bool, McpCommandError> {
        let name = &args.name;
        // The client's own rule: the name becomes part of tool names (`mcp__NAME__TOOL`).
        if validate_server_name(name).is_err() {
            return Err(McpCommandError::InvalidName { name: name.clone() });
        }
        let entry = new_entry(args)?;
        // The entry is ours, so it must satisfy the client's exact schema, not only the
        // lenient whole-file load (which drops unknown keys with a warning).
        let entry_value: toml::Value =
            toml::from_str(&entry.to_string()).map_err(|err| McpCommandError::InvalidEntry {
                name: name.clone(),
                path: self.config_path.clone(),
                message: err.message().to_string(),
            })?;
        entry_value
            .try_into::<McpServerConfig>()
            .map_err(|err| McpCommandError::InvalidEntry {
                name: name.clone(),
                path: self.config_path.clone(),
                message: err.message().to_string(),
            })?;

        let config_path = self.config_path.clone();
        let servers = self.servers_table_mut(true)?;
        let Some(servers) = servers else {
            return Err(McpCommandError::ServersNotATable { path: config_path });
        };
        let replaced = servers.contains_key(name);
        if replaced && !args.force {
            return Err(McpCommandError::AlreadyExists {
                name: name.clone(),
                path: config_path,
            });
        }
        match servers {
            ServersTable::Table(table) => {
                table.insert(name, toml_edit::Item::Table(entry));
            }
            ServersTable::Inline(table) => {
                table.insert(
                    name,
                    toml_edit::Value::InlineTable(entry.into_inline_table()),
                );
                // The old last entry keeps its trailing space before the new comma.
                table.fmt();
            }
        }
        self.commit()?;
        Ok(replaced)
    }

    fn remove(mut self, name: &str) -> Result<(), McpCommandError> {
        let config_path = self.config_path.clone();
        let unknown = || McpCommandError::UnknownServer {
            name: name.to_string(),
            path: config_path.clone(),
        };
        let removed = match self.servers_table_mut(false)? {
            Some(ServersTable::Table(table)) => table.remove(name).is_some(),
            Some(ServersTable::Inline(table)) => table.remove(name).is_some(),
            None => false,
        };
        if !removed {
            return Err(unknown());
        }
        self.commit()
    }

    /// The `mcp_servers` table, created (implicit, so no empty `[mcp_servers]` header is
    /// written) when `create` is set and it is missing.
    fn servers_table_mut(
        &mut self,
        create: bool,
    ) -> Result<Option<ServersTable<'_>>, McpCommandError> {
        if !self.document.contains_key(SERVERS_KEY) {
            if !create {
                return Ok(None);
            }
            let mut table = toml_edit::Table::new();
            table.set_implicit(true);
            self.document
                .insert(SERVERS_KEY, toml_edit::Item::Table(table));
        }
        let not_a_table = || McpCommandError::ServersNotATable {
            path: self.config_path.clone(),
        };
        match self.document.get_mut(SERVERS_KEY) {
            Some(toml_edit::Item::Table(table)) => Ok(Some(ServersTable::Table(table))),
            Some(toml_edit::Item::Value(toml_edit::Value::InlineTable(table))) => {
                Ok(Some(ServersTable::Inline(table)))
            }
            _ => Err(not_a_table()),
        }
    }

    /// Checks the edited text with the real loader, then replaces the file atomically.
    fn commit(self) -> Result<(), McpCommandError> {
        let candidate = self.document.to_string();
        validate_edit(
            &self.config_path,
            &self.original,
            &candidate,
            self.env,
            self.strict,
        )?;
        interpreter_private_fs::create_dir_all(self.home).map_err(|source| {
            McpCommandError::Write {
                path: self.home.to_path_buf(),
                source,
            }
        })?;
        write_atomically(&self.write_path, &candidate)
    }
}

enum ServersTable<'t> {
    Table(&'t mut toml_edit::Table),
    Inline(&'t mut toml_edit::InlineTable),
}

impl ServersTable<'_> {
    fn contains_key(&self, key: &str) -> bool {
        match self {
            Self::Table(table) => table.contains_key(key),
            Self::Inline(table) => table.contains_key(key),
        }
    }
}

/// The new server's table, with defaults omitted so the file stays short.
fn new_entry(args: &McpAddArgs) -> Result<toml_edit::Table, McpCommandError> {
    let mut entry = toml_edit::Table::new();
    if let Some(url) = &args.url {
        check_url(url)?;
        entry.insert("url", toml_edit::value(url.as_str()));
        if let Some(var) = &args.bearer_token_env_var {
            if !is_valid_env_var_name(var) {
                return Err(McpCommandError::InvalidEnvVarName { name: var.clone() });
            }
            entry.insert("bearer_token_env_var", toml_edit::value(var.as_str()));
        }
        return Ok(entry);
    }
    let Some((command, command_args)) = args.command.split_first() else {
        // clap requires `--url` or a command; this only guards against that changing.
        return Err(McpCommandError::InvalidEntry {
            name: args.name.clone(),
            path: PathBuf::from(CONFIG_FILE),
            message: "a command after `--` or --url is required".into(),
        });
    };
    let own_exe = std::env::current_exe().ok();
    // The same guard the client applies at startup, so `add` refuses exactly what the
    // agent would skip.
    let stdio = McpServerConfig {
        command: Some(command.clone()),
        args: command_args.to_vec(),
        ..McpServerConfig::default()
    };
    if starts_own_mcp_server(&stdio, own_exe.as_deref()) {
        return Err(McpCommandError::SelfRecursion {
            name: args.name.clone(),
            command: command_line(command, command_args),
        });
    }
    entry.insert("command", toml_edit::value(command.as_str()));
    if !command_args.is_empty() {
        let array: toml_edit::Array = command_args.iter().map(String::as_str).collect();
        entry.insert("args", toml_edit::value(array));
    }
    if !args.env.is_empty() {
        let mut env = toml_edit::InlineTable::new();
        for (key, value) in &args.env {
            if !is_valid_env_var_name(key) {
                return Err(McpCommandError::InvalidEnvVarName { name: key.clone() });
            }
            env.insert(key, value.as_str().into());
        }
        env.sort_values();
        entry.insert("env", toml_edit::value(env));
    }
    Ok(entry)
}

fn check_url(url: &str) -> Result<(), McpCommandError> {
    let invalid = |reason: String| McpCommandError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    let parsed = reqwest::Url::parse(url).map_err(|err| invalid(err.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https".into()));
    }
    Ok(())
}

/// Loads `candidate` with the engine's config loader, from a scratch home so the real
/// file is untouched until it passes. A config that already failed to load for reasons
/// outside this edit (a missing profile file, say) is not this command's to fix: the edit
/// is refused only when it introduces a failure.
fn validate_edit(
    config_path: &Path,
    original: &str,
    candidate: &str,
    env: &HashMap<String, String>,
    strict: bool,
) -> Result<(), McpCommandError> {
    let scratch = tempfile::Builder::new()
        .prefix("interpreter-mcp-check-")
        .tempdir()
        .map_err(|source| McpCommandError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let load = |text: &str| -> Result<Result<(), ConfigError>, McpCommandError> {
        let scratch_config = scratch.path().join(CONFIG_FILE);
        std::fs::write(&scratch_config, text).map_err(|source| McpCommandError::Write {
            path: scratch_config,
            source,
        })?;
        let config_args = ConfigArgs {
            overrides: Vec::new(),
            profile: None,
            strict_config: strict,
        };
        let overrides = ConfigOverrides {
            model: Some(VALIDATION_MODEL.to_string()),
            ..ConfigOverrides::default()
        };
        let mut scratch_env = env.clone();
        scratch_env.insert(
            "INTERPRETER_HOME".to_string(),
            scratch.path().to_string_lossy().into_owned(),
        );
        let inputs = config_inputs::build(
            &config_args,
            scratch_env,
            scratch.path().to_path_buf(),
            overrides,
        )
        .map_err(McpCommandError::ConfigInputs)?;
        Ok(load_config(inputs).map(|_| ()))
    };
    let Err(candidate_error) = load(candidate)? else {
        return Ok(());
    };
    match load(original)? {
        Err(original_error) if original_error.to_string() == candidate_error.to_string() => {
            eprintln!(
                "warning: {} already fails to load (unrelated to this edit): {original_error}",
                config_path.display()
            );
            Ok(())
        }
        _ => Err(McpCommandError::WouldBreakConfig {
            path: config_path.to_path_buf(),
            source: candidate_error,
        }),
    }
}

/// The engine's atomic, permission-keeping config writer (shared with the app-server's
/// `config/*` writes).
fn write_atomically(path: &Path, text: &str) -> Result<(), McpCommandError> {
    interpreter_core::config::edit::write_atomically(path, text).map_err(|source| {
        McpCommandError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_that_breaks_loading_is_refused() {
        let env = HashMap::new();
        let path = Path::new("/nowhere/config.toml");
        let good = "model = \"m\"\n";
        let broken = "model = \"m\"\n[mcp_servers.x]\ncommand = 5\n";
        let err = validate_edit(path, good, broken, &env, false).unwrap_err();
        assert!(
            matches!(err, McpCommandError::WouldBreakConfig { .. }),
            "{err}"
        );
        assert!(validate_edit(path, good, "model = \"m\"\n", &env, false).is_ok());
        // A config without `model` (left to a profile or -c) is still editable.
        assert!(validate_edit(path, "", "[mcp_servers.x]\ncommand = \"y\"\n", &env, false).is_ok());
        // A failure the edit did not introduce does not block it.
        let already_broken = "shell_timeout_ms = 0\n";
        let still_broken = "shell_timeout_ms = 0\n[mcp_servers.x]\ncommand = \"y\"\n";
        assert!(validate_edit(path, already_broken, still_broken, &env, false).is_ok());
    }

    #[test]
    fn tool_filter_text() {
        let mut server = ServerView {
            name: "s".into(),
            enabled: true,
            required: false,
            transport: TransportView::Invalid { reason: "x".into() },
            enabled_tools: None,
            disabled_tools: None,
            startup_timeout_sec: None,
            tool_timeout_sec: None,
        };
        assert_eq!(tool_filter(&server), "all");
        server.enabled_tools = Some(vec!["a".into(), "b".into()]);
        server.disabled_tools = Some(vec!["c".into()]);
        assert_eq!(tool_filter(&server), "only: a, b; except: c");
    }
}

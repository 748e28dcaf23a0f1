//! The command line: every flag and subcommand of `interpreter`, as clap derive types.
//!
//! Parsing only; behaviour lives in `exec`, `sandbox_cmd`, `doctor`, `mcp_cmd` and the MCP
//! server crate.
//! Flags the TypeScript SDK passes but that have no effect here are still accepted (and
//! say so in their help) so that SDK calls never fail on argument parsing.

use std::path::PathBuf;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

const ROOT_AFTER_HELP: &str = "\
Without a subcommand, when stdin and stdout are terminals, `interpreter` opens the
interactive mode (the same as `interpreter chat`; type /help there). Otherwise it
prints this help and exits 2: scripts use `interpreter exec`.

Examples:
  interpreter
  interpreter --oss
  interpreter -m qwen3-coder --full-auto \"fix the failing test\"
  interpreter exec \"explain this repository\"
  git diff | interpreter exec \"review this diff\"
  interpreter exec --json -s workspace-write \"add a unit test for parse()\"
  interpreter exec resume --last \"now run the tests\"
  interpreter -c model=\"qwen3-coder\" exec \"hello\"
  interpreter mcp-server
  interpreter app-server --listen ws://127.0.0.1:4500
  interpreter threads list
  interpreter mcp add files -- npx -y @modelcontextprotocol/server-filesystem ~/notes
  interpreter sandbox check
  interpreter doctor

Configuration lives in $INTERPRETER_HOME/config.toml (default ~/.interpreter).
Logs are off unless RUST_LOG is set (e.g. RUST_LOG=debug); they go to stderr.";

/// `--oss`, on every command that chooses a model.
const OSS_HELP: &str = "Use the local model server that answers: Ollama, LM Studio, llama.cpp, \
vLLM (in that order of preference) at their configured base URLs; with no model given, the \
server's model";

const EXEC_AFTER_HELP: &str = "\
Examples:
  interpreter exec \"list the TODOs in src/\"
  interpreter exec --oss \"list the TODOs in src/\"
  echo \"summarize\" | interpreter exec -
  cat build.log | interpreter exec \"why did the build fail?\"
  interpreter exec --json --skip-git-repo-check -C /tmp/work \"create hello.txt\"
  interpreter exec -o answer.txt \"what does main.rs do?\"
  interpreter exec resume 0199a213-81c0-7800-8aa1-bbab2a035a53 \"continue\"
  interpreter exec resume --last \"and now the docs\"
  interpreter exec review --base main

Exit codes: 0 turn completed, 1 failure or interruption, 2 bad arguments.";

const CHAT_AFTER_HELP: &str = "\
Examples:
  interpreter chat
  interpreter chat -a untrusted \"what does this repository do?\"
  interpreter chat --full-auto -m qwen3-coder
  interpreter chat --oss

At the prompt: Enter sends, /help lists the slash commands, Ctrl-C interrupts a turn
(a second Ctrl-C, or one at an empty prompt, exits), Ctrl-D at an empty prompt exits.
See docs/interactive.md.";

const MCP_AFTER_HELP: &str = "\
Examples:
  interpreter mcp list
  interpreter mcp add files -- npx -y @modelcontextprotocol/server-filesystem ~/notes
  interpreter mcp add sqlite --env LOG_LEVEL=debug -- uvx mcp-server-sqlite --db-path app.db
  interpreter mcp add docs --url https://mcp.example.com/mcp --bearer-token-env-var DOCS_TOKEN
  interpreter mcp get files --json
  interpreter mcp remove files
  interpreter mcp login docs
  interpreter mcp logout docs

These commands read and edit the [mcp_servers.NAME] tables of $INTERPRETER_HOME/config.toml
only: --profile and -c do not apply to them, and profile files are never edited. Comments
and other settings in config.toml are kept; an edit that would make the config fail to
load is refused and leaves the file unchanged.";

const APP_SERVER_AFTER_HELP: &str = "\
Examples:
  interpreter app-server
  interpreter app-server --listen ws://127.0.0.1:4500
  interpreter app-server --listen ws://0.0.0.0:4500 --ws-token-file ~/.interpreter/ws.token
  interpreter app-server --listen unix://
  interpreter app-server generate-json-schema ./schema

stdio: one JSON-RPC message per line on stdin/stdout; logs on stderr. WebSocket: one message
per text frame; clients send `Authorization: Bearer <token>` when a token file is set (required
for non-loopback addresses). unix:// serves WebSocket over the socket
$INTERPRETER_HOME/app-server-control/app-server-control.sock (mode 0600). See docs/app-server.md.";

const ACP_AFTER_HELP: &str = "\
Examples (the editor runs it; these are its settings):
  Zed, settings.json:   \"agent_servers\": {\"Interpreter\": {\"type\": \"custom\", \"command\": \"interpreter\", \"args\": [\"acp\"]}}
  with another model:   interpreter acp -c model=qwen3-coder-30b

One JSON-RPC message per line on stdin/stdout (stdout is only the protocol); logs on stderr
(RUST_LOG). Session modes: read-only, workspace-write (the default), full-access. See docs/acp.md.";

/// A coding agent for open models.
#[derive(Debug, Parser)]
#[command(
    name = "interpreter",
    version = env!("INTERPRETER_VERSION"),
    about = "A coding agent for open models behind OpenAI-compatible endpoints (Chat Completions or Responses).",
    after_help = ROOT_AFTER_HELP,
    // Without a subcommand: the interactive mode on a terminal, help otherwise (`main`).
    subcommand_required = false,
    arg_required_else_help = false
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub config: ConfigArgs,

    /// The interactive mode's flags, for `interpreter [FLAGS] [PROMPT]` without a
    /// subcommand.
    #[command(flatten)]
    pub chat: ChatOptions,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Config selection flags accepted at the root and again after a subcommand; the later
/// ones win.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ConfigArgs {
    /// Override a config value: `key=value`, dotted keys for tables, value parsed as TOML
    /// (an unparseable value is taken as a string). Repeatable.
    #[arg(short = 'c', long = "config", value_name = "key=value")]
    pub overrides: Vec<String>,

    /// Use profile NAME: the `[profiles.NAME]` table of config.toml, then `$INTERPRETER_HOME/NAME.config.toml`.
    #[arg(short = 'p', long = "profile", value_name = "NAME")]
    pub profile: Option<String>,

    /// Treat unknown config keys as errors instead of ignoring them.
    #[arg(long = "strict-config")]
    pub strict_config: bool,
}

impl ConfigArgs {
    /// These flags plus `model = NAME` as the last override, for subcommands whose `-m`
    /// is just a shorthand for `-c model=NAME`.
    pub(crate) fn with_model(mut self, model: Option<&str>) -> ConfigArgs {
        if let Some(model) = model {
            self.overrides
                .push(format!("model={}", toml::Value::String(model.to_string())));
        }
        self
    }

    /// Root flags first, then subcommand flags, so the later ones take precedence.
    pub(crate) fn merged(&self, later: &ConfigArgs) -> ConfigArgs {
        let mut overrides = self.overrides.clone();
        overrides.extend(later.overrides.iter().cloned());
        ConfigArgs {
            overrides,
            profile: later.profile.clone().or_else(|| self.profile.clone()),
            strict_config: self.strict_config || later.strict_config,
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Talk to the agent at a prompt: streamed answers, approvals asked inline, slash
    /// commands (/help). Needs a terminal. What `interpreter` alone opens on a terminal.
    #[command(after_help = CHAT_AFTER_HELP)]
    Chat(ChatArgs),
    /// Run one turn non-interactively and print the result.
    #[command(visible_alias = "e", after_help = EXEC_AFTER_HELP)]
    Exec(Box<ExecArgs>),
    /// Serve the agent as MCP tools (`codex`, `codex-reply`) over stdio.
    McpServer(McpServerArgs),
    /// Serve the v2 thread/turn protocol (JSON-RPC) for IDEs and orchestrators over stdio,
    /// WebSocket or a Unix socket.
    #[command(after_help = APP_SERVER_AFTER_HELP)]
    AppServer(AppServerArgs),
    /// Run inside an editor (Zed, JetBrains, Neovim, Emacs): the Agent Client Protocol
    /// on stdio. The editor starts this; see docs/acp.md for each editor's set-up.
    #[command(after_help = ACP_AFTER_HELP)]
    Acp(AcpArgs),
    /// Past threads, whichever front end ran them: list them, or show one readably.
    Threads(ThreadsArgs),
    /// Lifecycle hooks for this directory: list them with their trust, trust a
    /// repository's hooks. See docs/hooks.md.
    #[command(after_help = HOOKS_AFTER_HELP)]
    Hooks(HooksArgs),
    /// Run a command under the sandbox, or check what the sandbox supports here.
    Sandbox(SandboxArgs),
    /// Check that this installation works: home, config, API key, endpoint, sandbox,
    /// thread index. Exit 0 when no check failed, 1 otherwise.
    Doctor(DoctorArgs),
    /// Manage the MCP servers the agent uses as a client (`[mcp_servers.NAME]` in
    /// config.toml).
    #[command(after_help = MCP_AFTER_HELP)]
    Mcp(McpArgs),
    /// Print a shell completion script, e.g.
    /// `interpreter completion bash > ~/.local/share/bash-completion/completions/interpreter`.
    Completion {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `interpreter man > ~/.local/share/man/man1/interpreter.1`
    /// or `interpreter man | man -l -`.
    Man,
    /// Store a provider's API key in the agent home (read from stdin, one line; file mode
    /// 0600). The provider's environment variable still wins when it is set.
    Login(LoginArgs),
    /// Remove the API key `login` stored for a provider.
    Logout(LoginArgs),
}

#[derive(Debug, Args)]
pub(crate) struct LoginArgs {
    /// Provider id: a built-in (`openai`, `zai`, `moonshot`, …) or a `[model_providers.ID]`.
    #[arg(long = "provider", value_name = "ID")]
    pub provider: String,
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    pub command: McpCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum McpCommand {
    /// List the configured MCP servers.
    List {
        /// Print a JSON array, one object per server.
        #[arg(long = "json")]
        json: bool,
    },
    /// Show one MCP server. Exit 1 when no server has that name.
    Get {
        /// Server name (the NAME of `[mcp_servers.NAME]`).
        #[arg(value_name = "NAME")]
        name: String,
        /// Print one JSON object.
        #[arg(long = "json")]
        json: bool,
    },
    /// Add an MCP server: a command after `--` (stdio) or `--url` (streamable HTTP).
    Add(McpAddArgs),
    /// Remove an MCP server. Exit 1 when no server has that name.
    Remove {
        /// Server name (the NAME of `[mcp_servers.NAME]`).
        #[arg(value_name = "NAME")]
        name: String,
    },
    /// Log in to a streamable HTTP server that uses OAuth: opens the authorization page
    /// in the browser, waits for its redirect, and stores the tokens (mode 0600) in
    /// $INTERPRETER_HOME/mcp-credentials.json.
    Login {
        /// Server name (the NAME of `[mcp_servers.NAME]`).
        #[arg(value_name = "NAME")]
        name: String,
        /// Scopes to request, comma-separated (default: `oauth.scopes`, else what the
        /// server asks for).
        #[arg(long = "scopes", value_delimiter = ',')]
        scopes: Vec<String>,
        /// Do not try to open a browser; only print the URL.
        #[arg(long = "no-browser")]
        no_browser: bool,
        /// Request the authorization URL ourselves and follow its redirects instead of
        /// using a browser: for authorization servers that approve without a user
        /// (conformance tests).
        #[arg(long = "follow-redirect", hide = true)]
        follow_redirect: bool,
    },
    /// Remove the stored OAuth tokens of a server.
    Logout {
        /// Server name (the NAME of `[mcp_servers.NAME]`).
        #[arg(value_name = "NAME")]
        name: String,
    },
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("transport").required(true).args(["url", "command"])))]
pub(crate) struct McpAddArgs {
    /// Server name: letters, digits, `-` and `_`. Tools appear to the model as
    /// `mcp__NAME__TOOL`.
    #[arg(value_name = "NAME")]
    pub name: String,

    /// Streamable HTTP endpoint of the server.
    #[arg(long = "url", value_name = "URL")]
    pub url: Option<String>,

    /// Environment variable holding a bearer token, sent as `Authorization: Bearer ...`.
    #[arg(
        long = "bearer-token-env-var",
        value_name = "ENV_VAR",
        requires = "url",
        conflicts_with = "command"
    )]
    pub bearer_token_env_var: Option<String>,

    /// Environment variable for the server process (stdio only; repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env_entry, conflicts_with = "url")]
    pub env: Vec<(String, String)>,

    /// Replace an existing server of the same name.
    #[arg(long = "force")]
    pub force: bool,

    /// The command that starts the server and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// `KEY=VALUE` with a non-empty key; the value may be empty or contain `=`.
fn parse_env_entry(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!(
            "environment entries must be in KEY=VALUE form, got '{raw}'"
        )),
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct AppServerArgs {
    #[command(subcommand)]
    pub command: Option<AppServerCommand>,

    /// Where to serve: `stdio://` (default), `ws://IP:PORT`, `unix://` (the default socket
    /// under the home) or `unix://PATH`.
    #[arg(long, value_name = "URL", default_value = "stdio://")]
    pub listen: String,

    /// WebSocket only: the file holding the capability token clients must send as
    /// `Authorization: Bearer <token>`. Created with mode 0600 and a fresh token if missing;
    /// an existing one must be owned by this user and mode 0600.
    /// [default: $INTERPRETER_HOME/app-server-ws.token]
    #[arg(long, value_name = "PATH", conflicts_with = "no_auth")]
    pub ws_token_file: Option<PathBuf>,

    /// WebSocket only: accept clients without a token. Refused unless listening on
    /// loopback; any local user can then drive the agent.
    #[arg(long)]
    pub no_auth: bool,

    /// WebSocket only: a `Host` name to accept besides `localhost` and IP addresses (the
    /// name clients or a proxy use, e.g. `devbox.lan` or `devbox.lan:4500`); any other
    /// name gets 403 (DNS rebinding). Repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// Also serve `GET /metrics` (Prometheus text) on this loopback address without a
    /// token, e.g. 127.0.0.1:9464, for a scraper on this machine (docs/observability.md).
    #[arg(long = "metrics-listen", value_name = "IP:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    #[arg(long = "oss", help = OSS_HELP)]
    pub oss: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Args)]
pub(crate) struct AcpArgs {
    #[arg(long = "oss", help = OSS_HELP)]
    pub oss: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AppServerCommand {
    /// Write the protocol's JSON Schema (one file per type under v2/ and v1/) to OUT_DIR.
    GenerateJsonSchema {
        /// Output directory.
        #[arg(value_name = "OUT_DIR", required_unless_present = "out")]
        out_dir: Option<PathBuf>,
        /// Output directory (the reference's spelling).
        #[arg(long = "out", value_name = "DIR", conflicts_with = "out_dir")]
        out: Option<PathBuf>,
        /// Accepted for compatibility: the schema has no experimental part.
        #[arg(long)]
        experimental: bool,
    },
}

const HOOKS_AFTER_HELP: &str = "Examples:\n  interpreter hooks list\n  interpreter hooks trust --all\n  interpreter hooks trust '/repo/.interpreter/hooks.json:pre_tool_use:0:0'\n\nProject hooks (.interpreter/hooks.json in the repository) run only once trusted; a change\nto one makes it untrusted again until it is trusted anew.";

#[derive(Debug, Args)]
pub(crate) struct HooksArgs {
    #[command(subcommand)]
    pub command: HooksCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum HooksCommand {
    /// Every hook a thread started here would find: event, matcher, command, where it is
    /// configured, and whether it runs (trusted, untrusted, modified, disabled).
    List {
        /// Print a JSON array, one object per hook.
        #[arg(long = "json")]
        json: bool,
    },
    /// Trust project hooks at their current content: those named by KEY (as `list`
    /// prints them), or every untrusted one with --all.
    Trust {
        #[arg(value_name = "KEY", required_unless_present = "all")]
        keys: Vec<String>,
        #[arg(long = "all", conflicts_with = "keys")]
        all: bool,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ThreadsArgs {
    #[command(subcommand)]
    pub command: ThreadsCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ThreadsCommand {
    /// List threads, newest first: id, last update, source, directory, first message.
    List {
        /// Print a JSON array, one object per thread.
        #[arg(long = "json")]
        json: bool,
        /// Only threads started in this directory.
        #[arg(long = "cwd", value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// At most this many threads.
        #[arg(long = "limit", value_name = "N")]
        limit: Option<usize>,
        /// Archived threads instead.
        #[arg(long = "archived")]
        archived: bool,
    },
    /// Show one thread: its turns, messages, commands (with output) and file changes.
    Show {
        /// Thread id.
        #[arg(value_name = "ID")]
        id: String,
    },
    /// Copy every thread of the configured store (usually this machine's home) into
    /// another, e.g. the PostgreSQL store of a fleet. Safe to run again: threads already
    /// there are left as they are.
    #[command(
        after_help = "Example:\n  PGPASSWORD=... interpreter threads migrate --to postgres://interpreter@db.internal:5432/interpreter"
    )]
    Migrate {
        /// The store to copy into: a postgres:// URL (password in PGPASSWORD) or `local`.
        #[arg(long = "to", value_name = "STORE")]
        to: String,
    },
    /// Write one thread as a rollout file: JSON lines, the first its metadata.
    Export {
        /// Thread id.
        #[arg(value_name = "ID")]
        id: String,
        /// Write here instead of standard output (refuses to replace a file).
        #[arg(long = "output", short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Print the report as one JSON object: {"ok": bool, "checks": [...]}.
    #[arg(long = "json")]
    pub json: bool,

    /// Model to check (overrides `model` in config).
    #[arg(short = 'm', long = "model")]
    pub model: Option<String>,

    #[arg(long = "oss", help = OSS_HELP)]
    pub oss: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Args)]
pub(crate) struct McpServerArgs {
    /// Where to serve: `stdio://` (default) or `http://IP:PORT/PATH` for streamable HTTP
    /// (e.g. `http://127.0.0.1:8765/mcp`; port 0 picks a free port).
    #[arg(long, value_name = "URL", default_value = "stdio://")]
    pub listen: String,

    /// HTTP only: the file holding the bearer token clients must send. Created with mode
    /// 0600 and a fresh token if missing. [default: $INTERPRETER_HOME/mcp-server.token]
    #[arg(long, value_name = "PATH", conflicts_with = "no_auth")]
    pub token_file: Option<std::path::PathBuf>,

    /// HTTP only: accept requests without a token. Refused unless listening on loopback.
    #[arg(long)]
    pub no_auth: bool,

    /// HTTP only: a browser origin allowed to call (e.g. `http://localhost:5173`);
    /// requests with any other `Origin` header get 403. Repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allow_origins: Vec<String>,

    /// HTTP only: a `Host` name to accept besides `localhost` and IP addresses (the name
    /// a load balancer or proxy sends, e.g. `mcp.internal` or `mcp.internal:8443`); any
    /// other name gets 403 (DNS rebinding). Repeatable.
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// Also serve `GET /metrics` (Prometheus text) on this loopback address without a
    /// token, e.g. 127.0.0.1:9464, for a scraper on this machine (docs/observability.md).
    #[arg(long = "metrics-listen", value_name = "IP:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// HTTP only, fleet mode: the URL other replicas sharing the thread store use to
    /// forward requests for threads this one runs (e.g. `http://10.0.0.5:8765/mcp`).
    /// [default: the listen URL, unless it listens on 0.0.0.0 or ::]
    #[arg(long = "internal-url", value_name = "URL")]
    pub internal_url: Option<String>,

    /// Model for every session (overrides `model` in config; a call's `model` wins).
    #[arg(short = 'm', long = "model")]
    pub model: Option<String>,

    #[arg(long = "oss", help = OSS_HELP)]
    pub oss: bool,

    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SandboxModeArg {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl SandboxModeArg {
    pub(crate) fn to_mode(self) -> interpreter_protocol::SandboxMode {
        match self {
            Self::ReadOnly => interpreter_protocol::SandboxMode::ReadOnly,
            Self::WorkspaceWrite => interpreter_protocol::SandboxMode::WorkspaceWrite,
            Self::DangerFullAccess => interpreter_protocol::SandboxMode::DangerFullAccess,
        }
    }
}

/// `interpreter chat`: the interactive mode's flags plus the config flags.
#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    pub options: ChatOptions,

    #[command(flatten)]
    pub config: ConfigArgs,
}

/// The interactive mode's flags. Names follow `exec` where both have the setting; the
/// ids differ because `exec`'s flags are global, and clap copies a global flag's value to
/// every command with the same id, the root included.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ChatOptions {
    /// Model to use (overrides `model` in config; `/model` changes it later).
    #[arg(id = "chat_model", short = 'm', long = "model", value_name = "MODEL")]
    pub model: Option<String>,

    /// Sandbox for the commands the agent runs (`/sandbox` changes it later).
    #[arg(
        id = "chat_sandbox",
        short = 's',
        long = "sandbox",
        value_enum,
        value_name = "MODE"
    )]
    pub sandbox: Option<SandboxModeArg>,

    /// When to ask before running a command or applying a patch (`/approval` changes it
    /// later).
    #[arg(
        id = "chat_approval",
        short = 'a',
        long = "ask-for-approval",
        value_enum,
        value_name = "POLICY"
    )]
    pub approval: Option<ApprovalArg>,

    /// workspace-write sandbox and on-request approvals: the agent works in the
    /// directory without asking, and asks to go beyond it.
    #[arg(
        id = "chat_full_auto",
        long = "full-auto",
        conflicts_with_all = ["chat_sandbox", "chat_approval"]
    )]
    pub full_auto: bool,

    #[arg(id = "chat_oss", long = "oss", help = OSS_HELP)]
    pub oss: bool,

    /// Working directory of the agent.
    #[arg(id = "chat_cwd", short = 'C', long = "cd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    /// Extra writable directory for workspace-write (repeatable).
    #[arg(id = "chat_add_dirs", long = "add-dir", value_name = "DIR")]
    pub add_dirs: Vec<PathBuf>,

    /// Sent as the first message.
    #[arg(id = "chat_prompt", value_name = "PROMPT")]
    pub prompt: Option<String>,
}

impl ChatOptions {
    /// Whether any flag was given (they mean nothing before another subcommand).
    pub(crate) fn is_set(&self) -> bool {
        self.model.is_some()
            || self.sandbox.is_some()
            || self.approval.is_some()
            || self.full_auto
            || self.oss
            || self.cwd.is_some()
            || !self.add_dirs.is_empty()
            || self.prompt.is_some()
    }
}

/// `--ask-for-approval` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApprovalArg {
    /// Ask for everything but known-safe read-only commands.
    Untrusted,
    /// Ask only to retry a command that failed in the sandbox without it.
    OnFailure,
    /// Ask when the model requests to go beyond the sandbox.
    OnRequest,
    /// Never ask; what would need approval is refused.
    Never,
}

impl ApprovalArg {
    pub(crate) fn to_policy(self) -> interpreter_protocol::AskForApproval {
        use interpreter_protocol::AskForApproval;
        match self {
            Self::Untrusted => AskForApproval::Untrusted,
            Self::OnFailure => AskForApproval::OnFailure,
            Self::OnRequest => AskForApproval::OnRequest,
            Self::Never => AskForApproval::Never,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum ColorArg {
    Always,
    Never,
    #[default]
    Auto,
}

#[derive(Debug, Args)]
pub(crate) struct ExecArgs {
    #[command(subcommand)]
    pub command: Option<ExecCommand>,

    #[command(flatten)]
    pub config: ConfigArgs,

    /// Print events as JSON Lines on stdout (one object per line).
    #[arg(long = "json", visible_alias = "experimental-json", global = true)]
    pub json: bool,

    /// Model to use (overrides `model` in config).
    #[arg(short = 'm', long = "model", global = true)]
    pub model: Option<String>,

    #[arg(long = "oss", global = true, help = OSS_HELP)]
    pub oss: bool,

    /// Sandbox for the commands the agent runs.
    #[arg(short = 's', long = "sandbox", value_enum, global = true)]
    pub sandbox: Option<SandboxModeArg>,

    /// Working directory of the agent.
    #[arg(short = 'C', long = "cd", value_name = "DIR", global = true)]
    pub cwd: Option<PathBuf>,

    /// Extra writable directory for workspace-write (repeatable).
    #[arg(long = "add-dir", value_name = "DIR", global = true)]
    pub add_dirs: Vec<PathBuf>,

    /// Allow running outside a Git repository.
    #[arg(long = "skip-git-repo-check", global = true)]
    pub skip_git_repo_check: bool,

    /// JSON Schema file the final message must follow.
    #[arg(long = "output-schema", value_name = "FILE", global = true)]
    pub output_schema: Option<PathBuf>,

    /// Image(s) to attach to the prompt (comma-separated or repeated).
    #[arg(short = 'i', long = "image", value_name = "FILE", value_delimiter = ',', num_args = 1..)]
    pub images: Vec<PathBuf>,

    /// Accepted for SDK compatibility; has no effect.
    #[arg(
        long = "thread-source",
        value_name = "SOURCE",
        global = true,
        hide_short_help = true
    )]
    pub thread_source: Option<String>,

    /// Accepted for SDK compatibility; has no effect.
    #[arg(
        long = "cyber-access-program",
        value_name = "PROGRAM",
        global = true,
        hide_short_help = true
    )]
    pub cyber_access_program: Option<String>,

    /// Write the final agent message to FILE when the turn completes.
    #[arg(
        short = 'o',
        long = "output-last-message",
        value_name = "FILE",
        global = true
    )]
    pub output_last_message: Option<PathBuf>,

    /// Do not persist the thread (it cannot be resumed).
    #[arg(long = "ephemeral", global = true)]
    pub ephemeral: bool,

    /// Colored human output (has no effect on --json output).
    #[arg(long = "color", value_enum, default_value_t = ColorArg::Auto, global = true)]
    pub color: ColorArg,

    /// Run commands without a sandbox and without approvals. Also skips the Git check.
    /// Dangerous: only for throwaway environments.
    #[arg(
        long = "dangerously-bypass-approvals-and-sandbox",
        visible_alias = "yolo",
        global = true,
        conflicts_with = "sandbox"
    )]
    pub dangerously_bypass_approvals_and_sandbox: bool,

    /// Shorthand for `-s workspace-write`: the agent edits the working directory without
    /// asking. (exec never asks, so going beyond the workspace is refused, as on-request
    /// would with nobody to answer.)
    #[arg(
        long = "full-auto",
        global = true,
        conflicts_with_all = ["sandbox", "dangerously_bypass_approvals_and_sandbox"]
    )]
    pub full_auto: bool,

    /// The prompt. Omitted or `-`: read it from stdin. With a prompt, piped stdin is
    /// appended inside <stdin> tags.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum ExecCommand {
    /// Continue an earlier thread with a new prompt.
    Resume(ResumeArgs),
    /// Review changes (read-only: nothing is edited) and print the review.
    #[command(after_help = REVIEW_AFTER_HELP)]
    Review(ReviewArgs),
}

const REVIEW_AFTER_HELP: &str = "\
The review runs as one read-only turn: commands run in the read-only sandbox whatever -s
says, and no patch is applied. The diff is taken with git before the model is called
(hooks, pagers, fsmonitor, external diff, textconv and filter programs of the repository
never run, and no submodule is entered) and cut at 64 KiB; the model may read the rest
itself. The review is printed on stdout; with --json, the events are JSON Lines and the
review is the turn's agent_message item.

Examples:
  interpreter exec review
  interpreter exec review --base main
  interpreter exec review --commit HEAD~1 --title \"Fix the parser\"
  interpreter exec review \"check the error handling in src/net/\"
  interpreter exec review --json --base origin/main > review.jsonl";

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("review_target").args(["uncommitted", "base", "commit", "prompt"])))]
pub(crate) struct ReviewArgs {
    /// Review the staged, unstaged and untracked changes against HEAD (the default).
    #[arg(long = "uncommitted")]
    pub uncommitted: bool,

    /// Review the current branch against BRANCH, from their merge base.
    #[arg(long = "base", value_name = "BRANCH")]
    pub base: Option<String>,

    /// Review the changes commit SHA made.
    #[arg(long = "commit", value_name = "SHA")]
    pub commit: Option<String>,

    /// With --commit: the title shown for the commit (default: its subject line).
    #[arg(long = "title", value_name = "TITLE", requires = "commit")]
    pub title: Option<String>,

    /// Custom review instructions instead of a diff (`-`: read them from stdin).
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    #[command(flatten)]
    pub config: ConfigArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// Thread id (UUID) to resume. With --last, this position is the prompt.
    #[arg(value_name = "SESSION_ID")]
    pub session_id: Option<String>,

    /// The prompt (`-` or omitted: read stdin).
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Resume the most recently updated thread started in this directory.
    #[arg(long = "last")]
    pub last: bool,

    /// With --last: consider threads from any directory.
    #[arg(long = "all", requires = "last")]
    pub all: bool,

    /// Image(s) to attach to the prompt (comma-separated or repeated).
    #[arg(short = 'i', long = "image", value_name = "FILE", value_delimiter = ',', num_args = 1..)]
    pub images: Vec<PathBuf>,

    #[command(flatten)]
    pub config: ConfigArgs,
}

impl ResumeArgs {
    /// (thread id, prompt) with the `--last` shift applied: `resume --last PROMPT`.
    pub(crate) fn target_and_prompt(&self) -> (Option<&str>, Option<&str>) {
        if self.last {
            let prompt = self.prompt.as_deref().or(self.session_id.as_deref());
            (None, prompt)
        } else {
            (self.session_id.as_deref(), self.prompt.as_deref())
        }
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct SandboxArgs {
    #[command(subcommand)]
    pub command: Option<SandboxCommand>,

    /// Sandbox mode (default: `sandbox_mode` from config, else read-only).
    #[arg(short = 's', long = "sandbox", value_enum)]
    pub sandbox: Option<SandboxModeArg>,

    /// Extra writable directory for workspace-write (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dirs: Vec<PathBuf>,

    /// Directory the command runs in (default: current directory).
    #[arg(short = 'C', long = "cd", value_name = "DIR")]
    pub cwd: Option<PathBuf>,

    #[command(flatten)]
    pub config: ConfigArgs,

    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command_argv: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SandboxCommand {
    /// Report which sandbox features this machine supports.
    Check {
        /// Print the report as JSON.
        #[arg(long = "json")]
        json: bool,
    },
    /// Internal: the sandbox helper the engine re-executes. Handled before argument
    /// parsing; listed here only so that help mentions it.
    #[command(hide = true)]
    Linux {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        rest: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("interpreter").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sdk_invocation_parses() {
        let cli = parse(&[
            "exec",
            "--experimental-json",
            "--config",
            "a=1",
            "--model",
            "m",
            "--thread-source",
            "x",
            "--sandbox",
            "workspace-write",
            "--cd",
            "/tmp",
            "--add-dir",
            "/a",
            "--add-dir",
            "/b",
            "--skip-git-repo-check",
            "--output-schema",
            "s.json",
            "--cyber-access-program",
            "p",
            "--config",
            "approval_policy=\"never\"",
            "resume",
            "0199a213-81c0-7800-8aa1-bbab2a035a53",
            "--image",
            "a.png",
            "--image",
            "b.png",
        ]);
        let Some(Command::Exec(exec)) = cli.command else {
            panic!("not exec")
        };
        assert!(exec.json && exec.skip_git_repo_check);
        assert_eq!(exec.config.overrides.len(), 2);
        assert_eq!(exec.add_dirs.len(), 2);
        let Some(ExecCommand::Resume(resume)) = exec.command else {
            panic!("not resume")
        };
        assert_eq!(
            resume.target_and_prompt(),
            (Some("0199a213-81c0-7800-8aa1-bbab2a035a53"), None)
        );
        assert_eq!(resume.images.len(), 2);
    }

    #[test]
    fn prompt_alias_and_resume_last() {
        let cli = parse(&["-c", "x=1", "e", "-c", "y=2", "hello there"]);
        let Some(Command::Exec(exec)) = cli.command else {
            panic!("not exec")
        };
        assert_eq!(exec.prompt.as_deref(), Some("hello there"));
        assert_eq!(
            cli.config.merged(&exec.config).overrides,
            vec!["x=1".to_string(), "y=2".to_string()]
        );
        let cli = parse(&["exec", "resume", "--last", "go on", "--json"]);
        let Some(Command::Exec(exec)) = cli.command else {
            panic!("not exec")
        };
        assert!(exec.json);
        let Some(ExecCommand::Resume(resume)) = exec.command else {
            panic!("not resume")
        };
        assert_eq!(resume.target_and_prompt(), (None, Some("go on")));
    }

    #[test]
    fn sandbox_forms_parse() {
        let cli = parse(&["sandbox", "-s", "workspace-write", "--", "ls", "-la"]);
        let Some(Command::Sandbox(sandbox)) = cli.command else {
            panic!("not sandbox")
        };
        assert_eq!(sandbox.command_argv, vec!["ls", "-la"]);
        let cli = parse(&["sandbox", "check", "--json"]);
        let Some(Command::Sandbox(sandbox)) = cli.command else {
            panic!("not sandbox")
        };
        assert!(matches!(
            sandbox.command,
            Some(SandboxCommand::Check { json: true })
        ));
    }

    #[test]
    fn doctor_takes_json_and_config_flags() {
        let cli = parse(&[
            "--profile",
            "p",
            "doctor",
            "--json",
            "--strict-config",
            "-c",
            "a=1",
        ]);
        let Some(Command::Doctor(doctor)) = cli.command else {
            panic!("not doctor")
        };
        assert!(doctor.json);
        let merged = cli.config.merged(&doctor.config);
        assert!(merged.strict_config);
        assert_eq!(merged.profile.as_deref(), Some("p"));
        assert_eq!(merged.overrides, vec!["a=1".to_string()]);
    }

    #[test]
    fn mcp_add_forms_parse() {
        let cli = parse(&[
            "mcp", "add", "files", "--env", "A=b=c", "--", "npx", "-y", "pkg",
        ]);
        let Some(Command::Mcp(McpArgs {
            command: McpCommand::Add(add),
        })) = cli.command
        else {
            panic!("not mcp add")
        };
        assert_eq!(add.command, vec!["npx", "-y", "pkg"]);
        assert_eq!(add.env, vec![("A".to_string(), "b=c".to_string())]);
        let cli = parse(&["mcp", "add", "web", "--url", "http://x/mcp"]);
        assert!(matches!(cli.command, Some(Command::Mcp(_))));
        // Exactly one transport; HTTP-only and stdio-only flags do not mix.
        for bad in [
            &["mcp", "add", "x"][..],
            &["mcp", "add", "x", "--url", "http://x", "--", "cmd"],
            &["mcp", "add", "x", "--env", "A=1", "--url", "http://x"],
            &[
                "mcp",
                "add",
                "x",
                "--bearer-token-env-var",
                "T",
                "--",
                "cmd",
            ],
            &["mcp", "add", "x", "--env", "NOEQUALS", "--", "cmd"],
        ] {
            assert!(
                Cli::try_parse_from(std::iter::once("interpreter").chain(bad.iter().copied()))
                    .is_err(),
                "{bad:?} parsed"
            );
        }
    }

    #[test]
    fn unknown_flags_are_errors() {
        assert!(Cli::try_parse_from(["interpreter", "--frobnicate"]).is_err());
        assert!(Cli::try_parse_from(["interpreter", "exec", "--bogus"]).is_err());
    }

    #[test]
    fn interactive_forms_parse() {
        let cli = parse(&[]);
        assert!(cli.command.is_none() && !cli.chat.is_set());
        // A word that is not a subcommand is the first message.
        let cli = parse(&["-m", "m", "--full-auto", "-C", "/tmp", "fix the test"]);
        assert!(cli.command.is_none());
        assert_eq!(cli.chat.model.as_deref(), Some("m"));
        assert!(cli.chat.full_auto);
        assert_eq!(cli.chat.prompt.as_deref(), Some("fix the test"));
        let cli = parse(&[
            "-c",
            "a=1",
            "chat",
            "-a",
            "untrusted",
            "-s",
            "read-only",
            "hi",
        ]);
        let Some(Command::Chat(chat)) = cli.command else {
            panic!("not chat")
        };
        assert_eq!(chat.options.approval, Some(ApprovalArg::Untrusted));
        assert_eq!(chat.options.sandbox, Some(SandboxModeArg::ReadOnly));
        assert_eq!(chat.options.prompt.as_deref(), Some("hi"));
        // Subcommands still win over the prompt position, and exec's (global) flags stay
        // exec's.
        let cli = parse(&["exec", "-s", "read-only", "-m", "m", "-C", "/tmp", "hello"]);
        assert!(matches!(cli.command, Some(Command::Exec(_))));
        assert!(!cli.chat.is_set());
        assert!(
            Cli::try_parse_from(["interpreter", "chat", "--full-auto", "-s", "read-only"]).is_err()
        );
    }

    #[test]
    fn oss_is_accepted_wherever_a_model_is_chosen() {
        let cli = parse(&["--oss"]);
        assert!(cli.chat.oss && cli.chat.is_set());
        let Some(Command::Exec(exec)) = parse(&["exec", "resume", "--last", "--oss"]).command
        else {
            panic!("not exec")
        };
        assert!(exec.oss);
        let Some(Command::Chat(chat)) = parse(&["chat", "--oss"]).command else {
            panic!("not chat")
        };
        assert!(chat.options.oss);
        assert!(matches!(
            parse(&["mcp-server", "--oss", "-m", "m"]).command,
            Some(Command::McpServer(McpServerArgs { oss: true, .. }))
        ));
        assert!(matches!(
            parse(&["app-server", "--oss"]).command,
            Some(Command::AppServer(AppServerArgs { oss: true, .. }))
        ));
        assert!(matches!(
            parse(&["doctor", "--oss"]).command,
            Some(Command::Doctor(DoctorArgs { oss: true, .. }))
        ));
    }
}

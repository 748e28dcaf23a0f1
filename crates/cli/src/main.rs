//! The `interpreter` binary.
//!
//! `main` owns process-level concerns only: dispatching the sandbox helper before anything
//! else exists (no runtime, no threads, no logging — the helper must `exec` a single-
//! threaded process), parsing arguments, reading the process environment once, logging
//! to stderr, and turning results into exit codes (0 ok, 1 failure, 2 usage).

mod chat;
mod cli;
mod config_inputs;
mod doctor;
mod exec;
mod hooks_cmd;
mod layering;
mod login;
mod mcp_cmd;
mod render;
mod sandbox_cmd;
mod signals;
mod telemetry;
mod terminal;
mod threads_cmd;

use std::collections::HashMap;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    // The sandbox helper installs Landlock/seccomp on *this* process and then execs the
    // command; seccomp filters and Landlock rulesets apply per thread, so this must run
    // before clap, the tokio runtime or any logging thread exist.
    let raw_args: Vec<String> = std::env::args().collect();
    if raw_args.get(1).map(String::as_str) == Some("sandbox")
        && raw_args.get(2).map(String::as_str) == Some("linux")
    {
        return sandbox_cmd::run_linux_helper_from_args(&raw_args[3..]);
    }
    // Not for the helper above: an unprivileged helper must write its own
    // /proc/self/uid_map, which a non-dumpable process may not.
    make_non_dumpable();

    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help/version to stdout and usage errors to stderr, with exit 2.
            let _ = err.print();
            return ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(2));
        }
    };

    match &cli.command {
        // `interpreter` alone is the interactive mode only on a terminal; scripts that
        // run it bare keep getting help and a usage exit code.
        None if !chat::on_terminal() => {
            if cli.chat.is_set() {
                eprintln!(
                    "Error: the interactive mode needs a terminal (stdin and stdout); use `interpreter exec` in scripts"
                );
            } else {
                use clap::CommandFactory;
                eprint!("{}", Cli::command().render_help());
            }
            return ExitCode::from(2);
        }
        Some(_) if cli.chat.is_set() => {
            eprintln!(
                "Error: -m, -s, -a, --full-auto, --oss, -C, --add-dir and a prompt before a subcommand belong to the interactive mode; put them after the subcommand"
            );
            return ExitCode::from(2);
        }
        Some(Command::Chat(_)) if !chat::on_terminal() => {
            eprintln!(
                "Error: `interpreter chat` needs a terminal (stdin and stdout); use `interpreter exec` in scripts"
            );
            return ExitCode::from(2);
        }
        _ => {}
    }

    let env: HashMap<String, String> = std::env::vars().collect();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("Error: failed to start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    // Before logging, whose events may be exported too, and before any front end starts a
    // turn (the engine's instruments bind to the provider installed here).
    let telemetry = match telemetry_settings(&cli, &env) {
        Some((front_end, settings)) => {
            let _inside = runtime.enter();
            let serve_metrics = matches!(front_end, "mcp-server" | "app-server");
            telemetry::install(&settings, front_end, serve_metrics)
        }
        None => telemetry::Telemetry::default(),
    };
    init_logging(telemetry.log_layer());
    let outcome = runtime.block_on(run(cli, env));
    // What is queued goes out while the runtime that sends it still runs.
    telemetry.shutdown();
    // Tasks still blocked on stdin or a child must not keep the process alive.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match outcome {
        Ok(code) => code,
        Err(err) => {
            // Errors can quote a provider's or a server's answer.
            eprintln!("Error: {}", terminal::neutralize_controls(&one_line(&err)));
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli, env: HashMap<String, String>) -> anyhow::Result<ExitCode> {
    match cli.command {
        None => chat::run_chat(cli.chat, cli.config, env).await,
        Some(Command::Chat(args)) => {
            let config_args = cli.config.merged(&args.config);
            chat::run_chat(args.options, config_args, env).await
        }
        Some(Command::Exec(args)) => {
            let config_args = cli.config.merged(&args.config);
            Box::pin(exec::run_exec(*args, config_args, env)).await
        }
        Some(Command::McpServer(args)) => {
            let config_args = cli
                .config
                .merged(&args.config)
                .with_model(args.model.as_deref());
            let cwd = exec::resolve_cwd(None)?;
            let inputs = config_inputs::for_serving(config_args, args.oss, env, cwd).await?;
            let listen = mcp_server_listen(&args, &inputs)?;
            let stop = tokio_util::sync::CancellationToken::new();
            signals::cancel_on_stop_signal(stop.clone());
            serve_metrics_port(args.metrics_listen, &stop).await?;
            // Boxed: the server's future is large, and main's stack need not carry it.
            Box::pin(interpreter_mcp_server::run(
                interpreter_mcp_server::McpServerOptions {
                    config_inputs: inputs,
                    listen,
                },
                stop,
            ))
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::AppServer(args)) => {
            if let Some(cli::AppServerCommand::GenerateJsonSchema { out_dir, out, .. }) =
                args.command
            {
                let dir = out_dir
                    .or(out)
                    .ok_or_else(|| anyhow::anyhow!("an output directory is required"))?;
                let written = interpreter_app_server::schema::write_schema(&dir)?;
                eprintln!("wrote {written} schema files to {}", dir.display());
                return Ok(ExitCode::SUCCESS);
            }
            let config_args = cli.config.merged(&args.config);
            let cwd = exec::resolve_cwd(None)?;
            let inputs =
                config_inputs::for_serving(config_args, args.oss, env, cwd.clone()).await?;
            let listen = interpreter_app_server::Listen::parse(&args.listen, &inputs.home, &cwd)?;
            if !matches!(listen, interpreter_app_server::Listen::WebSocket(_))
                && (args.ws_token_file.is_some() || args.no_auth || !args.allow_hosts.is_empty())
            {
                anyhow::bail!(
                    "--ws-token-file, --no-auth and --allow-host apply only to --listen ws://…"
                );
            }
            let stop = tokio_util::sync::CancellationToken::new();
            signals::cancel_on_stop_signal(stop.clone());
            serve_metrics_port(args.metrics_listen, &stop).await?;
            Box::pin(interpreter_app_server::run(
                interpreter_app_server::AppServerOptions {
                    config_inputs: inputs,
                    listen,
                    ws_token_file: args.ws_token_file,
                    no_auth: args.no_auth,
                    allow_hosts: args.allow_hosts,
                },
                stop,
            ))
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Acp(args)) => {
            let config_args = cli.config.merged(&args.config);
            let cwd = exec::resolve_cwd(None)?;
            let inputs = config_inputs::for_serving(config_args, args.oss, env, cwd).await?;
            let stop = tokio_util::sync::CancellationToken::new();
            signals::cancel_on_stop_signal(stop.clone());
            Box::pin(interpreter_acp::run(
                interpreter_acp::AcpOptions {
                    config_inputs: inputs,
                },
                stop,
            ))
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Threads(args)) => threads_cmd::run(args, &cli.config, env).await,
        Some(Command::Hooks(args)) => hooks_cmd::run(args, &cli.config, env),
        Some(Command::Sandbox(args)) => {
            let config_args = cli.config.merged(&args.config);
            sandbox_cmd::run(args, config_args, env).await
        }
        Some(Command::Doctor(args)) => {
            let config_args = cli
                .config
                .merged(&args.config)
                .with_model(args.model.as_deref());
            doctor::run(args, config_args, env).await
        }
        Some(Command::Mcp(args)) => mcp_cmd::run(args, &cli.config, &env).await,
        Some(Command::Login(args)) => login::login(&args.provider, &env),
        Some(Command::Logout(args)) => login::logout(&args.provider, &env),
        Some(Command::Completion { shell }) => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "interpreter", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Man) => {
            let command = <Cli as clap::CommandFactory>::command();
            clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `--metrics-listen`: binds now (a port in use is a start-up error) and serves `/metrics`
/// until the server stops.
async fn serve_metrics_port(
    addr: Option<std::net::SocketAddr>,
    stop: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let Some(addr) = addr else {
        return Ok(());
    };
    let listener = interpreter_transport::listener::MetricsListener::bind(addr)
        .await
        .map_err(|err| anyhow::anyhow!("--metrics-listen {addr}: {err}"))?;
    eprintln!("metrics on http://{}/metrics", listener.local_addr());
    let stop = stop.clone();
    tokio::spawn(async move {
        if let Err(err) = listener.serve(stop).await {
            tracing::warn!("the metrics listener stopped: {err}");
        }
    });
    Ok(())
}

/// Where `interpreter mcp-server` listens, from its flags.
fn mcp_server_listen(
    args: &cli::McpServerArgs,
    inputs: &interpreter_core::config::ConfigInputs,
) -> anyhow::Result<interpreter_mcp_server::Listen> {
    if args.listen == "stdio://" || args.listen == "stdio" {
        if args.no_auth
            || args.token_file.is_some()
            || !args.allow_origins.is_empty()
            || !args.allow_hosts.is_empty()
            || args.internal_url.is_some()
        {
            anyhow::bail!(
                "--token-file, --no-auth, --allow-origin, --allow-host and --internal-url apply only to --listen http://…"
            );
        }
        return Ok(interpreter_mcp_server::Listen::Stdio);
    }
    let listen = interpreter_mcp_server::HttpListen::parse(&args.listen)?;
    let token_file = if args.no_auth {
        None
    } else {
        Some(
            args.token_file
                .clone()
                .unwrap_or_else(|| inputs.home.join("mcp-server.token")),
        )
    };
    Ok(interpreter_mcp_server::Listen::Http {
        listen,
        token_file,
        allowed_origins: args.allow_origins.clone(),
        allowed_hosts: args.allow_hosts.clone(),
        internal_url: match &args.internal_url {
            Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                anyhow::bail!("--internal-url must be an http:// or https:// URL, not `{url}`")
            }
            other => other.clone(),
        },
    })
}

/// Makes this process non-dumpable: its `/proc/PID/environ` (API keys), memory and file
/// descriptors become off limits to processes without `CAP_SYS_PTRACE`, including
/// sandboxed commands running as the same user (or as root, whose capabilities the sandbox
/// drops). Also no core dumps with those keys in them. Commands we start are unaffected:
/// `exec` resets the flag.
fn make_non_dumpable() {
    #[cfg(target_os = "linux")]
    if let Err(err) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        // Nothing depends on it working; the sandbox still refuses ptrace.
        eprintln!("warning: could not make the process non-dumpable: {err}");
    }
}

/// What telemetry export the command's configuration asks for (`[otel]` and the `OTEL_*`
/// variables), for the commands that run turns. A configuration that does not load is
/// left to the command, which reports it; bad telemetry settings are a warning, never a
/// reason not to run.
fn telemetry_settings(
    cli: &Cli,
    env: &HashMap<String, String>,
) -> Option<(
    &'static str,
    interpreter_telemetry::settings::TelemetrySettings,
)> {
    let front_end = telemetry::front_end(cli.command.as_ref())?;
    let config_args = match &cli.command {
        Some(Command::Chat(args)) => cli.config.merged(&args.config),
        Some(Command::Exec(args)) => cli.config.merged(&args.config),
        Some(Command::McpServer(args)) => cli.config.merged(&args.config),
        Some(Command::AppServer(args)) => cli.config.merged(&args.config),
        Some(Command::Acp(args)) => cli.config.merged(&args.config),
        _ => cli.config.clone(),
    };
    let otel = telemetry::otel_table(&config_args, env)?;
    match interpreter_telemetry::settings::resolve(&otel, env) {
        Ok(settings) => Some((front_end, settings)),
        Err(err) => {
            eprintln!("warning: telemetry is off: {err}");
            // The servers still count for their own /metrics.
            Some((
                front_end,
                interpreter_telemetry::settings::resolve(
                    &interpreter_telemetry::settings::OtelToml::default(),
                    &HashMap::new(),
                )
                .ok()?,
            ))
        }
    }
}

/// Debugging logs exist only when `RUST_LOG` asks for them: what a user needs to know
/// reaches them as events and one-line messages, never as tracing lines. They go to
/// stderr only: stdout is the protocol in `--json` and `mcp-server` modes. Exported
/// OTel logs (`[otel] exporter`, `OTEL_LOGS_EXPORTER`) are a separate stream, at info
/// and above, without the exporters' own transport chatter (which would feed itself) and
/// without what MCP servers print on their stderr (their own output, which may carry a
/// tool's input or output: content is exported only when asked for).
fn init_logging<L>(otel_logs: Option<L>)
where
    L: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
{
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let otel = otel_logs.map(|layer| {
        layer.with_filter(tracing_subscriber::EnvFilter::new(
            "info,h2=off,hyper=off,hyper_util=off,tonic=off,tower=off,reqwest=off,\
             opentelemetry=off,opentelemetry_sdk=off,opentelemetry_otlp=off,\
             interpreter_mcp_client::sdk=warn",
        ))
    });
    let fmt = tracing_subscriber::EnvFilter::try_from_default_env()
        .ok()
        .map(|filter| {
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(filter)
        });
    if otel.is_none() && fmt.is_none() {
        return;
    }
    let _ = tracing_subscriber::registry()
        .with(otel)
        .with(fmt)
        .try_init();
}

/// The error and its causes on one line, so scripts can grep a single `Error:` line.
fn one_line(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for (index, cause) in err.chain().enumerate() {
        let cause = cause.to_string();
        if index > 0 {
            if text.contains(&cause) {
                continue;
            }
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

//! `mock-model --script FILE.json [--record FILE.json]`: the scripted model server mock
//! (Chat Completions and Responses API) as a process, for tests written in other
//! languages.
//!
//! Prints exactly one line `{"base_url":"http://127.0.0.1:PORT/v1"}` on stdout, serves
//! until stdin closes or the process gets SIGINT/SIGTERM, then writes
//! `{"requests":[...],"endpoints":[...],"violations":[...]}` to the record file when one
//! was given.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use interpreter_test_support::{MockModelServer, MockResponse};
use tokio::io::AsyncReadExt as _;

struct Args {
    script: PathBuf,
    record: Option<PathBuf>,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut script = None;
    let mut record = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--script") => script = args.next().map(PathBuf::from),
            Some("--record") => record = args.next().map(PathBuf::from),
            _ => bail!(
                "unexpected argument {arg:?}; usage: mock-model --script FILE.json [--record FILE.json]"
            ),
        }
    }
    let script = script.context("missing --script FILE.json")?;
    Ok(Args { script, record })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let text = std::fs::read_to_string(&args.script)
        .with_context(|| format!("reading {}", args.script.display()))?;
    let responses: Vec<MockResponse> = serde_json::from_str(&text).with_context(|| {
        format!(
            "parsing {} as an array of scripted responses",
            args.script.display()
        )
    })?;

    let server = MockModelServer::start()
        .await
        .context("binding 127.0.0.1")?;
    for response in responses {
        server.push(response);
    }
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "{}",
            serde_json::json!({"base_url": server.base_url()})
        )?;
        stdout.flush()?;
    }

    wait_for_shutdown().await;

    if let Some(path) = &args.record {
        let record = serde_json::to_vec_pretty(&server.record())?;
        std::fs::write(path, record).with_context(|| format!("writing {}", path.display()))?;
    }
    // Exit here rather than return: tokio's stdin reader sits on a blocking thread that a
    // signal does not wake, and dropping the runtime would wait for it forever.
    std::process::exit(0)
}

/// Returns when stdin reaches EOF (the parent closed it or exited) or on SIGINT/SIGTERM.
async fn wait_for_shutdown() {
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buffer = [0u8; 1024];
        while let Ok(read) = stdin.read(&mut buffer).await {
            if read == 0 {
                break;
            }
        }
    };
    let terminated = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = stdin_closed => {}
        () = terminated => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

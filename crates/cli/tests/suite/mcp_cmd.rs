//! `interpreter mcp list|get|add|remove` end to end: the real binary editing a fresh
//! `INTERPRETER_HOME` per test, with the child's environment passed explicitly.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tempfile::TempDir;

/// Generous: a debug build on a loaded machine. Only a hang hits it.
const RUN_DEADLINE: Duration = Duration::from_secs(60);

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    fn assert_success(&self) -> &Self {
        assert_eq!(
            self.code,
            Some(0),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    fn assert_failure_mentions(&self, needle: &str) {
        assert_eq!(
            self.code,
            Some(1),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert!(
            self.stderr.contains(needle),
            "stderr lacks {needle:?}:\n{}",
            self.stderr
        );
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}):\n{}", self.stdout))
    }
}

/// Runs `interpreter ARGS` with only PATH, HOME and INTERPRETER_HOME set.
async fn run(interpreter_home: &Path, args: &[&str]) -> Output {
    let cwd = TempDir::new().expect("cwd tempdir");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"));
    command
        .args(args)
        .current_dir(cwd.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", cwd.path())
        .env("INTERPRETER_HOME", interpreter_home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("spawn interpreter");
    let output = tokio::time::timeout(RUN_DEADLINE, child.wait_with_output())
        .await
        .expect("interpreter mcp did not finish before the deadline (killed)")
        .expect("wait for interpreter");
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn config_text(home: &Path) -> String {
    std::fs::read_to_string(home.join("config.toml")).expect("read config.toml")
}

#[tokio::test]
async fn add_list_get_remove_round_trip() {
    let home = TempDir::new().expect("home");
    let home = home.path();

    let empty = run(home, &["mcp", "list"]).await;
    empty.assert_success();
    assert!(
        empty.stdout.contains("No MCP servers configured"),
        "{}",
        empty.stdout
    );
    assert_eq!(
        run(home, &["mcp", "list", "--json"]).await.json(),
        json!([])
    );

    run(
        home,
        &[
            "mcp",
            "add",
            "files",
            "--env",
            "ROOT_LABEL=notes",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/srv/notes",
        ],
    )
    .await
    .assert_success();
    let added = run(
        home,
        &[
            "mcp",
            "add",
            "docs",
            "--url",
            "https://mcp.example.com/mcp",
            "--bearer-token-env-var",
            "DOCS_TOKEN",
        ],
    )
    .await;
    added.assert_success();
    assert!(
        added.stdout.contains("Added MCP server 'docs'"),
        "{}",
        added.stdout
    );

    // The file is what the agent's loader reads: plain tables, defaults omitted.
    let parsed: toml::Table = toml::from_str(&config_text(home)).expect("config is TOML");
    assert_eq!(
        parsed["mcp_servers"]["files"],
        toml::Value::Table(
            toml::from_str(
                "command = \"npx\"\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv/notes\"]\nenv = { ROOT_LABEL = \"notes\" }\n"
            )
            .unwrap()
        )
    );
    assert_eq!(
        parsed["mcp_servers"]["docs"],
        toml::Value::Table(
            toml::from_str(
                "url = \"https://mcp.example.com/mcp\"\nbearer_token_env_var = \"DOCS_TOKEN\"\n"
            )
            .unwrap()
        )
    );

    let list = run(home, &["mcp", "list"]).await;
    list.assert_success();
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", list.stdout);
    assert!(lines[0].starts_with("Name") && lines[0].contains("Transport"));
    // Sorted by name.
    assert!(lines[1].starts_with("docs ") && lines[1].contains("https://mcp.example.com/mcp"));
    assert!(lines[2].starts_with("files ") && lines[2].contains("stdio"));
    assert!(lines[2].contains("npx -y @modelcontextprotocol/server-filesystem /srv/notes"));

    let list_json = run(home, &["mcp", "list", "--json"]).await.json();
    let names: Vec<&str> = list_json
        .as_array()
        .expect("array")
        .iter()
        .map(|server| server["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, vec!["docs", "files"]);

    assert_eq!(
        run(home, &["mcp", "get", "files", "--json"]).await.json(),
        json!({
            "name": "files",
            "enabled": true,
            "required": false,
            "transport": {
                "type": "stdio",
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"],
                "env": {"ROOT_LABEL": "notes"},
                "env_vars": [],
                "cwd": null
            },
            "enabled_tools": null,
            "disabled_tools": null,
            "startup_timeout_sec": null,
            "tool_timeout_sec": null
        })
    );
    let docs = run(home, &["mcp", "get", "docs", "--json"]).await.json();
    assert_eq!(docs["transport"]["type"], "streamable_http");
    assert_eq!(docs["transport"]["bearer_token_env_var"], "DOCS_TOKEN");

    let get = run(home, &["mcp", "get", "files"]).await;
    get.assert_success();
    assert!(get.stdout.starts_with("files\n"), "{}", get.stdout);
    assert!(
        get.stdout.contains("  transport: stdio\n"),
        "{}",
        get.stdout
    );
    // Env values may be secrets: text output masks them.
    assert!(get.stdout.contains("ROOT_LABEL=*****"), "{}", get.stdout);
    assert!(!get.stdout.contains("ROOT_LABEL=notes"), "{}", get.stdout);

    let removed = run(home, &["mcp", "remove", "files"]).await;
    removed.assert_success();
    assert!(removed.stdout.contains("Removed MCP server 'files'"));
    let remaining = run(home, &["mcp", "list", "--json"]).await.json();
    assert_eq!(remaining.as_array().expect("array").len(), 1);
    assert_eq!(remaining[0]["name"], "docs");
    run(home, &["mcp", "get", "files"])
        .await
        .assert_failure_mentions("no MCP server named 'files'");
}

#[tokio::test]
async fn comments_and_other_settings_survive_edits() {
    let home = TempDir::new().expect("home");
    let original = "\
# Personal settings.
model = \"qwen3-coder\" # the fast one

[mcp_servers.notes]
# Keep this one: it indexes my notes.
command = \"notes-mcp\"
enabled_tools = [\"search\"]   # read-only
";
    std::fs::write(home.path().join("config.toml"), original).expect("write config");

    run(home.path(), &["mcp", "add", "extra", "--", "extra-mcp"])
        .await
        .assert_success();
    let edited = config_text(home.path());
    assert!(
        edited.starts_with(original),
        "the original text must be kept verbatim:\n{edited}"
    );
    assert!(
        edited.contains("[mcp_servers.extra]\ncommand = \"extra-mcp\"\n"),
        "{edited}"
    );

    run(home.path(), &["mcp", "remove", "extra"])
        .await
        .assert_success();
    assert_eq!(config_text(home.path()), original);

    let list = run(home.path(), &["mcp", "list"]).await;
    list.assert_success();
    assert!(list.stdout.contains("only: search"), "{}", list.stdout);
}

#[tokio::test]
async fn duplicate_name_needs_force() {
    let home = TempDir::new().expect("home");
    run(home.path(), &["mcp", "add", "tool", "--", "first-server"])
        .await
        .assert_success();
    let before = config_text(home.path());

    run(home.path(), &["mcp", "add", "tool", "--", "second-server"])
        .await
        .assert_failure_mentions("already exists");
    assert_eq!(
        config_text(home.path()),
        before,
        "a refused add must not write"
    );

    let forced = run(
        home.path(),
        &[
            "mcp",
            "add",
            "tool",
            "--force",
            "--url",
            "http://127.0.0.1:9/mcp",
        ],
    )
    .await;
    forced.assert_success();
    assert!(forced.stdout.contains("Replaced"), "{}", forced.stdout);
    let server = run(home.path(), &["mcp", "get", "tool", "--json"])
        .await
        .json();
    // Replaced whole: no stdio keys linger next to the URL.
    assert_eq!(
        server["transport"],
        json!({
            "type": "streamable_http",
            "url": "http://127.0.0.1:9/mcp",
            "bearer_token_env_var": null,
            "http_headers": null,
            "env_http_headers": null
        })
    );
}

#[tokio::test]
async fn invalid_names_and_urls_are_refused() {
    let home = TempDir::new().expect("home");
    for name in ["has space", "dot.name", "ümlaut"] {
        run(home.path(), &["mcp", "add", name, "--", "server"])
            .await
            .assert_failure_mentions("invalid server name");
    }
    run(
        home.path(),
        &["mcp", "add", "web", "--url", "ftp://example.com"],
    )
    .await
    .assert_failure_mentions("invalid --url");
    assert!(
        !home.path().join("config.toml").exists(),
        "refused adds must not create config.toml"
    );
}

#[tokio::test]
async fn own_mcp_server_is_refused() {
    let home = TempDir::new().expect("home");
    let own_exe = env!("CARGO_BIN_EXE_interpreter");
    for argv in [
        vec!["interpreter", "mcp-server"],
        vec![own_exe, "-c", "model=\"x\"", "mcp-server"],
    ] {
        let mut args = vec!["mcp", "add", "myself", "--"];
        args.extend(argv);
        run(home.path(), &args)
            .await
            .assert_failure_mentions("interpreter mcp-server");
    }
    assert!(!home.path().join("config.toml").exists());
}

#[tokio::test]
async fn unknown_names_fail() {
    let home = TempDir::new().expect("home");
    std::fs::write(home.path().join("config.toml"), "model = \"m\"\n").expect("write");
    run(home.path(), &["mcp", "remove", "ghost"])
        .await
        .assert_failure_mentions("no MCP server named 'ghost'");
    run(home.path(), &["mcp", "get", "ghost", "--json"])
        .await
        .assert_failure_mentions("no MCP server named 'ghost'");
    assert_eq!(config_text(home.path()), "model = \"m\"\n");
}

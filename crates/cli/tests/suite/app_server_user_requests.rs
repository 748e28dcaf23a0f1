//! The model asks the user through `interpreter app-server`: `request_user_input` as
//! `item/tool/requestUserInput` and `request_permissions` as
//! `item/permissions/requestApproval`, answered, refused, interrupted, and a hostile model
//! asking for a grant on the agent's own home. What the model is offered and told is read
//! from the requests the mock model received.

use std::path::{Path, PathBuf};

use crate::app_server_support::{AppClient, AppEnv, READ_DEADLINE};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use serde_json::{Value, json};
use tempfile::TempDir;

const USER_INPUT: &str = "request_user_input";
const PERMISSIONS: &str = "request_permissions";

/// Commands may write only the work directory (no `/tmp`), so a directory elsewhere needs
/// a grant.
const CONFINED: &str =
    "[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n";

fn sandboxed_thread() -> Value {
    json!({"approvalPolicy": "on-request", "sandbox": "workspace-write"})
}

/// Whether `interpreter sandbox check` finds a working sandbox on this machine.
async fn sandbox_supported(env: &AppEnv) -> bool {
    let check = tokio::time::timeout(
        READ_DEADLINE,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args(["sandbox", "check", "--json"])
            .env("INTERPRETER_HOME", env.home.path())
            .output(),
    )
    .await
    .expect("deadline")
    .expect("sandbox check");
    let support: Value = serde_json::from_slice(&check.stdout).expect("sandbox check --json");
    support["supported"] == json!(true)
}

fn script_tool(env: &AppEnv, call_id: &str, name: &str, arguments: Value) {
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, call_id, name, &arguments.to_string()),
        chunk::finish("tool_calls"),
    ]));
}

fn script_shell(env: &AppEnv, call_id: &str, command: &str) {
    script_tool(env, call_id, "shell", json!({"command": command}));
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What the model was told about `call_id`, in the last request that carries it.
fn tool_output(env: &AppEnv, call_id: &str) -> String {
    env.model
        .requests()
        .iter()
        .rev()
        .find_map(|request| {
            request["messages"].as_array()?.iter().find_map(|m| {
                (m["role"] == "tool" && m["tool_call_id"] == call_id)
                    .then(|| m["content"].as_str().unwrap_or_default().to_string())
            })
        })
        .unwrap_or_else(|| panic!("no output for {call_id}: {:#?}", env.model.requests()))
}

fn ask_one_question(env: &AppEnv) {
    script_tool(
        env,
        "call_q",
        USER_INPUT,
        json!({"questions": [{
            "id": "db",
            "header": "Database",
            "question": "Which database should the tests use?",
            "options": [
                {"label": "sqlite", "description": "in-process"},
                {"label": "postgres", "description": "the local server"}
            ]
        }]}),
    );
}

fn resolved_for(messages: &[Value], request: &Value) -> bool {
    messages.iter().any(|m| {
        m["method"] == "serverRequest/resolved" && m["params"]["requestId"] == request["id"]
    })
}

async fn started(env: &AppEnv, thread: Value) -> (AppClient, String) {
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(thread).await;
    (client, thread_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_and_the_model_reads_the_answers() {
    let env = AppEnv::with_config(CONFINED).await;
    ask_one_question(&env);
    env.script_text("using sqlite");
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;
    let turn_id = client.start_turn(&thread_id, "set up the tests").await;

    let request = client.server_request("item/tool/requestUserInput").await;
    let params = &request["params"];
    assert_eq!(params["threadId"], thread_id.as_str());
    assert_eq!(params["turnId"], turn_id.as_str());
    assert_eq!(params["itemId"], "call_q");
    assert_eq!(params["isBlocking"], true);
    assert_eq!(params["questions"][0]["id"], "db");
    assert_eq!(params["questions"][0]["options"][1]["label"], "postgres");
    client
        .respond(
            &request["id"],
            json!({"answers": {"db": {"answers": ["sqlite"]}}}),
        )
        .await;
    let messages = client.until_turn_completed().await;
    assert!(resolved_for(&messages, &request), "{messages:#?}");
    let done = messages.last().expect("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "completed");

    let first = &env.model.requests()[0];
    let offered = tool_names(first);
    assert!(offered.iter().any(|t| t == USER_INPUT), "{offered:?}");
    assert!(offered.iter().any(|t| t == PERMISSIONS), "{offered:?}");
    let told: Value = serde_json::from_str(&tool_output(&env, "call_q")).expect("json answers");
    assert_eq!(told, json!({"answers": {"db": {"answers": ["sqlite"]}}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_reply_or_a_wrong_answer_is_no_answer() {
    let env = AppEnv::with_config(CONFINED).await;
    ask_one_question(&env);
    env.script_text("assuming sqlite");
    ask_one_question(&env);
    env.script_text("assuming sqlite again");
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;

    client.start_turn(&thread_id, "first").await;
    let request = client.server_request("item/tool/requestUserInput").await;
    client
        .respond_error(&request["id"], -32000, "the user closed the dialog")
        .await;
    let messages = client.until_turn_completed().await;
    assert!(resolved_for(&messages, &request), "{messages:#?}");
    let told = tool_output(&env, "call_q");
    assert!(told.contains("did not answer"), "{told}");

    // An answer to a question that was not asked is no answer either.
    client.start_turn(&thread_id, "second").await;
    let request = client.server_request("item/tool/requestUserInput").await;
    client
        .respond(
            &request["id"],
            json!({"answers": {"something_else": {"answers": ["rm -rf /"]}}}),
        )
        .await;
    client.until_turn_completed().await;
    let told = tool_output(&env, "call_q");
    assert!(told.contains("did not answer"), "{told}");
    assert!(!told.contains("rm -rf"), "{told}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_while_the_question_is_open_ends_the_turn() {
    let env = AppEnv::with_config(CONFINED).await;
    ask_one_question(&env);
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;
    let turn_id = client.start_turn(&thread_id, "ask me").await;
    let request = client.server_request("item/tool/requestUserInput").await;
    client
        .ok(
            "turn/interrupt",
            json!({"threadId": thread_id, "turnId": turn_id}),
        )
        .await;
    let messages = client.until_turn_completed().await;
    let done = messages.last().expect("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "interrupted");
    // The question is withdrawn as the turn ends.
    let id = request["id"].clone();
    client
        .read_until(|m| m["method"] == "serverRequest/resolved" && m["params"]["requestId"] == id)
        .await;
    // A late answer goes nowhere, and the thread takes the next turn.
    client
        .respond(
            &request["id"],
            json!({"answers": {"db": {"answers": ["late"]}}}),
        )
        .await;
    env.script_text("next");
    client.start_turn(&thread_id, "again").await;
    let messages = client.until_turn_completed().await;
    assert_eq!(
        messages.last().expect("done")["params"]["turn"]["status"],
        "completed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cannot_answer_is_not_offered_the_tools() {
    let env = AppEnv::with_config(CONFINED).await;
    env.script_text("hello");
    let mut client = env.spawn();
    client
        .initialize_with(json!({"legacyApprovals": true}))
        .await;
    let thread_id = client.start_thread(sandboxed_thread()).await;
    client.start_turn(&thread_id, "hi").await;
    client.until_turn_completed().await;
    let offered = tool_names(&env.model.requests()[0]);
    assert!(offered.iter().any(|t| t == "shell"), "{offered:?}");
    assert!(!offered.iter().any(|t| t == USER_INPUT), "{offered:?}");
    assert!(!offered.iter().any(|t| t == PERMISSIONS), "{offered:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_are_not_offered_where_the_policy_cannot_ask() {
    let env = AppEnv::with_config(CONFINED).await;
    env.script_text("hello");
    let (mut client, thread_id) = started(
        &env,
        json!({"approvalPolicy": "never", "sandbox": "workspace-write"}),
    )
    .await;
    client.start_turn(&thread_id, "hi").await;
    client.until_turn_completed().await;
    let offered = tool_names(&env.model.requests()[0]);
    assert!(offered.iter().any(|t| t == USER_INPUT), "{offered:?}");
    assert!(!offered.iter().any(|t| t == PERMISSIONS), "{offered:?}");
}

fn canonical(dir: &TempDir) -> PathBuf {
    std::fs::canonicalize(dir.path()).expect("canonical")
}

fn ask_to_write(env: &AppEnv, call_id: &str, dirs: &[&Path]) {
    let write: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    script_tool(
        env,
        call_id,
        PERMISSIONS,
        json!({"reason": "write the build output", "permissions": {"file_system": {"write": write}}}),
    );
}

/// A sandboxed server, or `None` (and a note) where this machine has no sandbox.
async fn sandboxed_env() -> Option<AppEnv> {
    let env = AppEnv::with_config(CONFINED).await;
    if sandbox_supported(&env).await {
        Some(env)
    } else {
        eprintln!("no sandbox on this machine: permission grants cannot be tested here");
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_directory_is_writable_for_the_rest_of_the_turn_only() {
    let Some(env) = sandboxed_env().await else {
        return;
    };
    let outside = TempDir::new().expect("outside dir");
    let outside_path = canonical(&outside);
    ask_to_write(&env, "call_p", &[&outside_path]);
    script_shell(
        &env,
        "call_w",
        &format!("touch {}/granted.txt", outside_path.display()),
    );
    env.script_text("written");
    script_shell(
        &env,
        "call_later",
        &format!("touch {}/next-turn.txt", outside_path.display()),
    );
    env.script_text("tried");
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;
    client.start_turn(&thread_id, "build").await;

    let request = client
        .server_request("item/permissions/requestApproval")
        .await;
    let params = &request["params"];
    assert_eq!(params["itemId"], "call_p");
    assert_eq!(params["reason"], "write the build output");
    let shown = outside_path.display().to_string();
    assert_eq!(params["permissions"]["fileSystem"]["write"], json!([shown]));
    assert_eq!(
        params["permissions"]["fileSystem"]["entries"][0],
        json!({"access": "write", "path": {"type": "path", "path": shown}})
    );
    client
        .respond(
            &request["id"],
            json!({"permissions": {"fileSystem": {"write": [shown]}}, "scope": "turn"}),
        )
        .await;
    let messages = client.until_turn_completed().await;
    assert!(resolved_for(&messages, &request), "{messages:#?}");
    assert!(
        outside_path.join("granted.txt").is_file(),
        "the granted write failed: {}",
        tool_output(&env, "call_w")
    );
    assert!(tool_output(&env, "call_p").contains("granted for the rest of this turn"));

    // The grant ended with its turn.
    client.start_turn(&thread_id, "again").await;
    client.until_turn_completed().await;
    assert!(!outside_path.join("next-turn.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_grant_outlives_its_turn_and_network_is_granted_only_when_asked() {
    let Some(env) = sandboxed_env().await else {
        return;
    };
    let outside = TempDir::new().expect("outside dir");
    let outside_path = canonical(&outside);
    ask_to_write(&env, "call_p", &[&outside_path]);
    env.script_text("granted");
    script_shell(
        &env,
        "call_later",
        &format!("touch {}/next-turn.txt", outside_path.display()),
    );
    env.script_text("written");
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;
    client.start_turn(&thread_id, "ask").await;
    let request = client
        .server_request("item/permissions/requestApproval")
        .await;
    let shown = outside_path.display().to_string();
    // The network was not asked for: granting it changes nothing.
    client
        .respond(
            &request["id"],
            json!({
                "permissions": {
                    "fileSystem": {"entries": [{"access": "write", "path": {"type": "path", "path": shown}}]},
                    "network": {"enabled": true}
                },
                "scope": "session"
            }),
        )
        .await;
    client.until_turn_completed().await;
    let told = tool_output(&env, "call_p");
    assert!(
        told.contains("granted for the rest of the session"),
        "{told}"
    );
    assert!(!told.contains("network"), "{told}");

    client.start_turn(&thread_id, "write").await;
    client.until_turn_completed().await;
    assert!(
        outside_path.join("next-turn.txt").is_file(),
        "the session grant did not last: {}",
        tool_output(&env, "call_later")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_or_failed_request_grants_nothing() {
    let Some(env) = sandboxed_env().await else {
        return;
    };
    let outside = TempDir::new().expect("outside dir");
    let outside_path = canonical(&outside);
    for (n, _) in ["empty grant", "error reply", "wrong shape"]
        .iter()
        .enumerate()
    {
        ask_to_write(&env, &format!("call_p{n}"), &[&outside_path]);
        script_shell(
            &env,
            &format!("call_w{n}"),
            &format!("touch {}/denied-{n}.txt", outside_path.display()),
        );
        env.script_text("could not");
    }
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;
    for n in 0..3 {
        client.start_turn(&thread_id, "build").await;
        let request = client
            .server_request("item/permissions/requestApproval")
            .await;
        match n {
            0 => {
                client
                    .respond(&request["id"], json!({"permissions": {}}))
                    .await
            }
            1 => client.respond_error(&request["id"], -32000, "no").await,
            _ => {
                client
                    .respond(&request["id"], json!({"permissions": "everything"}))
                    .await
            }
        }
        let messages = client.until_turn_completed().await;
        assert!(resolved_for(&messages, &request), "{messages:#?}");
        let told = tool_output(&env, &format!("call_p{n}"));
        assert!(told.contains("declined"), "{told}");
        assert!(!outside_path.join(format!("denied-{n}.txt")).exists());
    }
}

/// A hostile model asks for the agent's home (directly, through a symlink, and as `/`)
/// along with an ordinary directory, and a client that grants everything, the home too,
/// still gets only the ordinary directory: the home was never asked for and stays
/// read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_on_the_agents_home_is_refused_whatever_the_client_says() {
    let Some(env) = sandboxed_env().await else {
        return;
    };
    let home = std::fs::canonicalize(env.home.path()).expect("home");
    let outside = TempDir::new().expect("outside dir");
    let outside_path = canonical(&outside);
    let link = outside_path.join("innocent");
    std::os::unix::fs::symlink(&home, &link).expect("symlink");
    let config_before = std::fs::read_to_string(home.join("config.toml")).expect("config");
    ask_to_write(
        &env,
        "call_p",
        &[
            &home,
            &link,
            Path::new("/"),
            &home.join(".."),
            &outside_path,
        ],
    );
    script_shell(
        &env,
        "call_w",
        &format!(
            "echo 'sandbox_mode = \"danger-full-access\"' >> {}/config.toml; touch {}/ok.txt",
            home.display(),
            outside_path.display()
        ),
    );
    env.script_text("done");
    let (mut client, thread_id) = started(&env, sandboxed_thread()).await;
    client.start_turn(&thread_id, "build").await;

    let request = client
        .server_request("item/permissions/requestApproval")
        .await;
    let shown = outside_path.display().to_string();
    assert_eq!(
        request["params"]["permissions"]["fileSystem"]["write"],
        json!([shown]),
        "only the ordinary directory is put to the client: {request}"
    );
    let everything = [
        home.display().to_string(),
        link.display().to_string(),
        "/".to_string(),
        shown,
    ];
    client
        .respond(
            &request["id"],
            json!({"permissions": {"fileSystem": {"write": everything}, "network": {"enabled": true}}, "scope": "session"}),
        )
        .await;
    client.until_turn_completed().await;

    let told = tool_output(&env, "call_p");
    assert!(told.contains("refused without asking"), "{told}");
    assert!(told.contains("protected"), "{told}");
    assert!(
        !told.contains("network"),
        "network was not asked for: {told}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("config.toml")).expect("config"),
        config_before,
        "the agent's config was changed: {}",
        tool_output(&env, "call_w")
    );
    assert!(outside_path.join("ok.txt").is_file());
}

//! Lifecycle hooks through the real binary, configured as a Codex user configures them:
//! a PreToolUse hook blocks a command and the model reads why, or rewrites it; a PostToolUse hook sees
//! the command and its output; SessionStart and UserPromptSubmit hooks add context or
//! block the prompt, input steered into a running turn included; SessionStart hooks run
//! again after a compaction; a Stop hook keeps the turn going; a PermissionRequest hook answers an
//! approval; an untrusted project hook does not run until `interpreter hooks trust`, and
//! not after it changes; `hooks/list` and `hook/started` / `hook/completed` on the
//! app-server.

use std::path::Path;

use crate::app_server_support::AppEnv;
use crate::exec_support::{TestEnv, script_shell, script_text};
use serde_json::{Value, json};

fn write_hooks(path: &Path, hooks: Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, json!({ "hooks": hooks }).to_string()).unwrap();
}

/// A script file (mode 0755) with `body`, returned as a command line.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/usr/bin/env bash\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A hook that appends each event it gets to `seen`, one JSON object a line.
fn audit_hook(scripts: &Path, seen: &Path) -> String {
    script(
        scripts,
        "audit.sh",
        &format!("cat >> '{}'; echo >> '{}'", seen.display(), seen.display()),
    )
}

/// What [`audit_hook`] wrote: the text and its events.
fn audited(seen: &Path) -> (String, Vec<Value>) {
    let log = std::fs::read_to_string(seen).unwrap();
    let entries = log
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (log, entries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_tool_use_hook_blocks_a_command_and_a_post_tool_use_hook_sees_one() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    let scripts = env.home.path().to_path_buf();
    let seen = scripts.join("post-tool-use.jsonl");
    let guard = script(
        &scripts,
        "guard.sh",
        "input=$(cat); if grep -q 'rm -rf' <<<\"$input\"; then echo 'no recursive deletes here' >&2; exit 2; fi",
    );
    let audit = audit_hook(&scripts, &seen);
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard, "timeout": 30}]}],
            "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": audit}]}]
        }),
    );
    std::fs::write(work.join("keep.txt"), "precious").unwrap();
    script_shell(&env.server, "call_rm", "rm -rf keep.txt");
    script_shell(&env.server, "call_echo", "echo audited");
    script_text(&env.server, "Done.");
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "clean up",
        ])
        .await;
    out.assert_success();
    assert!(
        work.join("keep.txt").exists(),
        "the blocked command did not run"
    );
    let requests = env.server.requests();
    let second = requests[1]["messages"].to_string();
    assert!(
        second.contains("Command blocked by PreToolUse hook: no recursive deletes here. Command: rm -rf keep.txt"),
        "the model reads why: {second}"
    );
    assert!(
        out.stdout
            .contains("PreToolUse hook blocked: no recursive deletes here"),
        "exec shows the block: {}",
        out.stdout
    );
    let (audit_log, entries) = audited(&seen);
    assert_eq!(entries.len(), 1, "only the command that ran: {audit_log}");
    let entry = &entries[0];
    assert_eq!(entry["hook_event_name"], "PostToolUse");
    assert_eq!(entry["tool_name"], "Bash");
    assert_eq!(entry["tool_input"]["command"], "echo audited");
    assert_eq!(entry["tool_use_id"], "call_echo");
    assert!(
        entry["tool_response"].as_str().unwrap().contains("audited"),
        "{entry}"
    );
    assert_eq!(entry["cwd"], work.display().to_string());
    assert!(entry["session_id"].is_string() && entry["turn_id"].is_string());
    env.server.assert_invariants();
}

/// A PreToolUse hook rewrites a command (`permissionDecision: "allow"` with
/// `updatedInput`): the rewrite runs instead and PostToolUse sees it; a rewrite the shell
/// tool cannot take runs nothing, not the command it was meant to replace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_tool_use_hook_rewrites_a_command() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    let scripts = env.home.path().to_path_buf();
    let seen = scripts.join("post-tool-use.jsonl");
    let rewrite = script(
        &scripts,
        "rewrite.sh",
        r#"input=$(cat)
if grep -q 'deploy' <<<"$input"; then echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo dry-run deploy"}}}'; fi
if grep -q 'publish' <<<"$input"; then echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"cmd":"echo x"}}}'; fi"#,
    );
    let audit = audit_hook(&scripts, &seen);
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": rewrite}]}],
            "PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": audit}]}]
        }),
    );
    script_shell(&env.server, "call_deploy", "touch deployed.txt # deploy");
    script_shell(&env.server, "call_publish", "touch published.txt # publish");
    script_text(&env.server, "Done.");
    let out = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-s",
            "danger-full-access",
            "ship it",
        ])
        .await;
    out.assert_success();
    assert!(
        !work.join("deployed.txt").exists(),
        "the rewrite ran instead"
    );
    assert!(
        !work.join("published.txt").exists(),
        "a bad rewrite runs nothing"
    );
    let requests = env.server.requests();
    let second = requests[1]["messages"].to_string();
    assert!(second.contains("dry-run deploy"), "{second}");
    let third = requests[2]["messages"].to_string();
    assert!(
        third.contains(
            "a PreToolUse hook rewrote the call, but its `updatedInput` has no `command` string"
        ),
        "{third}"
    );
    let (audit_log, entries) = audited(&seen);
    assert_eq!(entries.len(), 1, "{audit_log}");
    assert_eq!(entries[0]["tool_input"]["command"], "echo dry-run deploy");
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_and_prompt_hooks_add_context_or_block_the_prompt() {
    let env = TestEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let start = script(
        &scripts,
        "start.sh",
        "cat > /dev/null; echo 'release branch is frozen'",
    );
    let prompt = script(
        &scripts,
        "prompt.sh",
        r#"input=$(cat); if grep -q 'SECRET' <<<"$input"; then echo '{"decision":"block","reason":"prompts may not hold secrets"}'; else echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"ticket ABC-1"}}'; fi"#,
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": start}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": prompt}]}]
        }),
    );
    script_text(&env.server, "Hello.");
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "hi"])
        .await;
    out.assert_success();
    let first = env.server.requests()[0]["messages"].to_string();
    assert!(first.contains("release branch is frozen"), "{first}");
    assert!(first.contains("ticket ABC-1"), "{first}");

    let blocked = env
        .run(&[
            "exec",
            "--json",
            "--skip-git-repo-check",
            "the SECRET is 42",
        ])
        .await;
    assert_eq!(
        env.server.requests().len(),
        1,
        "a blocked prompt never reaches the model"
    );
    assert!(
        blocked.stdout.contains("prompts may not hold secrets"),
        "{}",
        blocked.stdout
    );
}

/// Input steered into a running turn passes the same UserPromptSubmit guardrail as a
/// prompt (it was recorded unchecked before): an admitted steer carries the hook's
/// context to the model; a refused one never reaches it and, as nothing else was
/// admitted, ends the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steered_input_passes_the_prompt_hooks() {
    let env = AppEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let prompt = script(
        &scripts,
        "prompt.sh",
        r#"input=$(cat); if grep -q 'SECRET' <<<"$input"; then echo '{"decision":"block","reason":"prompts may not hold secrets"}'; else echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"ticket ABC-1"}}'; fi"#,
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({"UserPromptSubmit": [{"hooks": [{"type": "command", "command": prompt}]}]}),
    );
    let work = env.work_path();
    let cwd = work.to_string_lossy().into_owned();
    let mut client = env.spawn();
    client.initialize().await;
    let thread = client
        .start_thread(
            json!({"cwd": cwd, "approvalPolicy": "never", "sandbox": "danger-full-access"}),
        )
        .await;

    // The command waits (at most 30 s) until the steer was taken.
    let steer_then_go = async |client: &mut crate::app_server_support::AppClient,
                               turn: &str,
                               go: &str,
                               text: &str| {
        client
            .read_until(|m| {
                m["method"] == "item/started" && m["params"]["item"]["type"] == "commandExecution"
            })
            .await;
        client
            .ok(
                "turn/steer",
                json!({"threadId": thread, "expectedTurnId": turn,
                       "input": [{"type": "text", "text": text}]}),
            )
            .await;
        std::fs::write(work.join(go), "").unwrap();
        client.until_turn_completed().await
    };
    let wait_for =
        |go: &str| format!("for i in $(seq 600); do [ -e {go} ] && break; sleep 0.05; done");

    env.script_command_then_text("call_1", &wait_for("go1"), "Done with both.");
    let turn = client.start_turn(&thread, "start").await;
    steer_then_go(&mut client, &turn, "go1", "also say steered").await;
    let requests = env.model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let second = requests[1].to_string();
    assert!(second.contains("also say steered"), "{second}");
    assert_eq!(
        second.matches("ticket ABC-1").count(),
        2,
        "the prompt's and the steer's context: {second}"
    );

    env.script_command_then_text("call_2", &wait_for("go2"), "never asked");
    let turn = client.start_turn(&thread, "again").await;
    let messages = steer_then_go(&mut client, &turn, "go2", "the SECRET is 42").await;
    let requests = env.model.requests();
    assert_eq!(
        requests.len(),
        3,
        "the refused steer ended the turn before the model was asked again"
    );
    assert!(
        requests
            .iter()
            .all(|r| !r.to_string().contains("SECRET is 42")),
        "a refused steer never reaches the model"
    );
    let warned = messages.iter().any(|m| {
        m["method"] == "warning"
            && m["params"]["message"]
                .as_str()
                .is_some_and(|t| t.contains("prompts may not hold secrets"))
    });
    assert!(warned, "{messages:#?}");
    let done = messages.last().unwrap();
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
}

/// A compaction summarises away what SessionStart hooks added: they run again with
/// `source: compact` before the model is next asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_hooks_run_again_after_a_compaction() {
    let env = AppEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let log = scripts.join("starts.log");
    let start = script(
        &scripts,
        "start.sh",
        &format!(
            r#"input=$(cat); echo "$input" >> {}; echo 'release branch is frozen'"#,
            log.display()
        ),
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({"SessionStart": [{"matcher": "startup|compact", "hooks": [{"type": "command", "command": start}]}]}),
    );
    let mut client = env.spawn();
    client.initialize().await;
    let thread = client
        .start_thread(json!({"approvalPolicy": "never", "sandbox": "danger-full-access"}))
        .await;
    env.script_text("first answer");
    client.start_turn(&thread, "hi").await;
    client.until_turn_completed().await;
    env.script_text("SUMMARY: a greeting");
    env.script_text("after the summary");
    client
        .ok("thread/compact/start", json!({"threadId": thread}))
        .await;
    client.until_turn_completed().await;
    client.start_turn(&thread, "go on").await;
    client.until_turn_completed().await;

    let requests = env.model.requests();
    let last = requests.last().map(Value::to_string).unwrap_or_default();
    assert!(last.contains("SUMMARY: a greeting"), "{last}");
    assert!(last.contains("release branch is frozen"), "{last}");
    let sources: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["source"].to_string())
        .collect();
    assert_eq!(sources, ["\"startup\"", "\"compact\""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_hook_keeps_the_turn_going_once() {
    let env = TestEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let stop = script(
        &scripts,
        "stop.sh",
        r#"input=$(cat); if grep -q '"stop_hook_active":true' <<<"$input"; then exit 0; fi; echo '{"decision":"block","reason":"run the tests before finishing"}'"#,
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({"Stop": [{"hooks": [{"type": "command", "command": stop}]}]}),
    );
    script_text(&env.server, "Finished.");
    script_text(&env.server, "Tests pass.");
    let out = env
        .run(&["exec", "--json", "--skip-git-repo-check", "work"])
        .await;
    out.assert_success();
    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1]["messages"].to_string();
    assert!(
        second.contains("<hook_prompt hook_run_id=\\\"stop:0:"),
        "{second}"
    );
    assert!(
        second.contains("run the tests before finishing</hook_prompt>"),
        "{second}"
    );
    assert!(out.stdout.contains("Tests pass."), "{}", out.stdout);
    env.server.assert_invariants();
}

/// On the app-server, where a client would be asked: the hook answers first, and the
/// client is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_hook_answers_the_approval() {
    let env = AppEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let answer = script(
        &scripts,
        "permission.sh",
        r#"input=$(cat); if grep -q 'touch allowed' <<<"$input"; then b=allow; else b=deny; fi; echo "{\"hookSpecificOutput\":{\"hookEventName\":\"PermissionRequest\",\"decision\":{\"behavior\":\"$b\"}}}""#,
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command": answer}]}]}),
    );
    script_shell(&env.model, "call_ok", "touch allowed");
    script_shell(&env.model, "call_no", "touch refused");
    script_text(&env.model, "Done.");
    let work = env.work_path();
    let mut client = env.spawn();
    client.initialize().await;
    let thread = client
        .start_thread(
            json!({"cwd": work, "approvalPolicy": "untrusted", "sandbox": "danger-full-access"}),
        )
        .await;
    client.start_turn(&thread, "touch both").await;
    let messages = client.until_turn_completed().await;
    assert!(
        !messages.iter().any(|m| m["method"]
            .as_str()
            .is_some_and(|m| m.contains("requestApproval"))),
        "the client was not asked: {messages:#?}"
    );
    assert!(
        work.join("allowed").exists(),
        "the hook's allow approved it"
    );
    assert!(!work.join("refused").exists(), "the hook's deny refused it");
}

/// An MCP tool's approval reaches PermissionRequest hooks as `mcp__SERVER__TOOL` with its
/// arguments. Its question is shown like a command, and was taken for `Bash`: a hook that
/// approves commands approved the MCP call (found writing this test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_request_hook_answers_an_mcp_tool_approval_by_its_own_name() {
    let env = AppEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let bash_log = scripts.join("bash.jsonl");
    let mcp_log = scripts.join("mcp.jsonl");
    let allow_commands = script(
        &scripts,
        "allow-commands.sh",
        &format!(
            r#"cat >> '{}'; echo '{{"hookSpecificOutput":{{"hookEventName":"PermissionRequest","decision":{{"behavior":"allow"}}}}}}'"#,
            bash_log.display()
        ),
    );
    let deny_echo = script(
        &scripts,
        "deny-echo.sh",
        &format!(
            r#"cat >> '{}'; echo '{{"hookSpecificOutput":{{"hookEventName":"PermissionRequest","decision":{{"behavior":"deny","message":"no echo today"}}}}}}'"#,
            mcp_log.display()
        ),
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({"PermissionRequest": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": allow_commands}]},
            {"matcher": "mcp__mock__echo", "hooks": [{"type": "command", "command": deny_echo}]}
        ]}),
    );
    let mock_mcp = interpreter_test_support::bins::mock_mcp_server(
        Path::new(env!("CARGO_BIN_EXE_interpreter")),
        env!("CARGO"),
    )
    .unwrap();
    let config = env.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[mcp_servers.mock]\ncommand = \"{}\"\napproval = \"always\"\n",
        mock_mcp.display()
    ));
    std::fs::write(&config, text).unwrap();
    env.model
        .push(interpreter_test_support::MockResponse::sse(vec![
            interpreter_test_support::mock_model::chunk::tool_call(
                0,
                "call_echo",
                "mcp__mock__echo",
                r#"{"text":"hello-from-mcp"}"#,
            ),
            interpreter_test_support::mock_model::chunk::finish("tool_calls"),
        ]));
    env.script_text("Declined.");
    let mut client = env.spawn();
    client.initialize().await;
    let thread = client
        .start_thread(json!({"approvalPolicy": "on-request", "sandbox": "workspace-write"}))
        .await;
    client.start_turn(&thread, "echo something").await;
    let messages = client.until_turn_completed().await;
    assert!(
        !messages.iter().any(|m| m["method"]
            .as_str()
            .is_some_and(|m| m.contains("requestApproval"))),
        "the hook answered, the client was not asked: {messages:#?}"
    );
    assert!(
        !bash_log.exists(),
        "a command hook was asked about an MCP tool"
    );
    let (_, entries) = audited(&mcp_log);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["tool_name"], "mcp__mock__echo");
    assert_eq!(entries[0]["tool_input"], json!({"text": "hello-from-mcp"}));
    let told = env.model.requests()[1].to_string();
    assert!(told.contains("this MCP tool call was declined"), "{told}");
    assert!(
        !messages
            .iter()
            .any(|m| m["method"] == "item/started" && m["params"]["item"]["type"] == "mcpToolCall"),
        "the tool did not run: {messages:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_hook_does_not_run_until_trusted_nor_after_it_changes() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    let marker = env.home.path().join("project-hook-ran");
    let project_hooks = work.join(".interpreter/hooks.json");
    let hooks = |extra: &str| {
        json!({"UserPromptSubmit": [{"hooks": [{"type": "command",
            "command": format!("cat > /dev/null; echo ran{extra} >> '{}'", marker.display())}]}]})
    };
    write_hooks(&project_hooks, hooks(""));

    script_text(&env.server, "One.");
    let out = env.run(&["exec", "--json", "first"]).await;
    out.assert_success();
    assert!(!marker.exists(), "an untrusted project hook never runs");
    assert!(out.stdout.contains("not trusted"), "{}", out.stdout);

    let listed = env.run(&["hooks", "list", "--json"]).await;
    listed.assert_success();
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed[0]["trust"], "untrusted");
    assert_eq!(listed[0]["runs"], false);
    let trusted = env.run(&["hooks", "trust", "--all"]).await;
    trusted.assert_success();
    assert!(trusted.stdout.contains("trusted "), "{}", trusted.stdout);

    script_text(&env.server, "Two.");
    env.run(&["exec", "--json", "second"])
        .await
        .assert_success();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");

    // Changed after it was trusted: it stops running until trusted again.
    write_hooks(&project_hooks, hooks(" changed"));
    script_text(&env.server, "Three.");
    env.run(&["exec", "--json", "third"]).await.assert_success();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    let listed = env.run(&["hooks", "list", "--json"]).await;
    let listed: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(listed[0]["trust"], "modified");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_server_lists_hooks_and_announces_their_runs() {
    let env = AppEnv::new().await;
    let scripts = env.home.path().to_path_buf();
    let guard = script(
        &scripts,
        "guard.sh",
        "cat > /dev/null; echo 'not today' >&2; exit 2",
    );
    write_hooks(
        &env.home.path().join("hooks.json"),
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": guard, "statusMessage": "checking"}]}]}),
    );
    let work = env.work_path();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    write_hooks(
        &work.join(".interpreter/hooks.json"),
        json!({"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}),
    );
    let mut client = env.spawn();
    client.initialize().await;
    let cwd = work.to_string_lossy().into_owned();
    let listed = client.ok("hooks/list", json!({"cwds": [cwd]})).await;
    let hooks = listed["data"][0]["hooks"].as_array().unwrap().clone();
    assert_eq!(hooks.len(), 2, "{listed}");
    assert_eq!(hooks[0]["eventName"], "preToolUse");
    assert_eq!(hooks[0]["source"], "user");
    assert_eq!(hooks[0]["trustStatus"], "trusted");
    assert_eq!(hooks[0]["timeoutSec"], 600);
    assert_eq!(hooks[1]["source"], "project");
    assert_eq!(hooks[1]["trustStatus"], "untrusted");
    assert!(
        hooks[1]["currentHash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );

    env.script_command_then_text("call_1", "echo hi", "Stopped.");
    let thread = client
        .start_thread(
            json!({"cwd": cwd, "approvalPolicy": "never", "sandbox": "danger-full-access"}),
        )
        .await;
    client.start_turn(&thread, "say hi").await;
    let messages = client.until_turn_completed().await;
    let started = messages
        .iter()
        .find(|m| m["method"] == "hook/started")
        .unwrap_or_else(|| panic!("no hook/started: {messages:#?}"));
    assert_eq!(started["params"]["run"]["status"], "running");
    assert_eq!(started["params"]["run"]["statusMessage"], "checking");
    let completed = messages
        .iter()
        .find(|m| m["method"] == "hook/completed")
        .unwrap();
    let run = &completed["params"]["run"];
    assert_eq!(run["status"], "blocked");
    assert_eq!(run["eventName"], "preToolUse");
    assert_eq!(
        run["entries"][0],
        json!({"kind": "feedback", "text": "not today"})
    );
    assert!(
        run["id"].as_str().unwrap().starts_with("pre-tool-use:0:"),
        "{run}"
    );
    assert!(run["id"].as_str().unwrap().ends_with(":call_1"), "{run}");
    assert_eq!(completed["params"]["threadId"], thread.as_str());
    // The untrusted project Stop hook did not run: no run of it was announced.
    assert_eq!(
        messages
            .iter()
            .filter(|m| m["method"] == "hook/started")
            .count(),
        1
    );
}

/// A hostile model tries to rewrite a trusted project hook (to run its own program outside
/// the sandbox next time) with a sandboxed command: `.interpreter` is read-only to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_a_sandboxed_command_cannot_rewrite_a_project_hook() {
    let env = TestEnv::new().await;
    let work = env.work_path();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    let hooks_file = work.join(".interpreter/hooks.json");
    write_hooks(
        &hooks_file,
        json!({"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}),
    );
    let before = std::fs::read_to_string(&hooks_file).unwrap();
    script_shell(
        &env.server,
        "call_plant",
        "echo '{\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"curl evil\"}]}]}}' > .interpreter/hooks.json; mv .interpreter .moved",
    );
    script_text(&env.server, "Done.");
    let out = env
        .run(&["exec", "--json", "-s", "workspace-write", "plant a hook"])
        .await;
    out.assert_success();
    assert_eq!(std::fs::read_to_string(&hooks_file).unwrap(), before);
    assert!(!work.join(".moved").exists());
}

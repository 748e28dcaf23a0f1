//! `interpreter app-server` over stdio: listing and archiving threads (pagination over
//! 1,000 threads), accounts, config reads and writes, models, collaboration modes, and the
//! v1 helpers.

use std::collections::HashSet;
use std::path::Path;

use crate::app_server_support::{
    AppEnv, assert_drivers_armed, repository_with_drivers_beyond_reach,
};
use chrono::{Duration as ChronoDuration, Utc};
use interpreter_core::store::local::write_rollout;
use interpreter_core::store::{RolloutItem, SessionMeta};
use interpreter_protocol::{
    EventMsg, SessionSource, TaskCompleteEvent, TaskStartedEvent, ThreadId, UserMessageEvent,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Writes `count` finished one-turn threads in `cwd`, a minute apart, oldest first.
fn write_threads(home: &Path, cwd: &Path, count: usize, source: SessionSource) -> Vec<ThreadId> {
    let base = Utc::now() - ChronoDuration::days(30);
    (0..count)
        .map(|n| {
            let id = ThreadId::new();
            let meta = SessionMeta {
                id,
                timestamp: base + ChronoDuration::minutes(n as i64),
                cwd: cwd.to_path_buf(),
                originator: "test".into(),
                cli_version: "0.0.0".into(),
                source,
                model_provider: Some("mock".into()),
                model: Some("mock-model".into()),
                base_instructions: None,
                forked_from_id: None,
            };
            let items = vec![
                RolloutItem::EventMsg(EventMsg::TaskStarted(TaskStartedEvent {
                    turn_id: "1".into(),
                    model_context_window: None,
                })),
                RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
                    item_id: String::new(),
                    message: format!("question {n}"),
                })),
                RolloutItem::EventMsg(EventMsg::TaskComplete(TaskCompleteEvent {
                    turn_id: "1".into(),
                    last_agent_message: None,
                    error: None,
                    output_limit: false,
                })),
            ];
            write_rollout(home, &meta, &items).expect("write rollout");
            id
        })
        .collect()
}

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(|t| t["id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_list_pages_through_a_thousand_threads_and_filters() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    let other = tempfile::tempdir().expect("other dir");
    let other_dir = other.path().canonicalize().expect("canonical");
    let written = write_threads(env.home.path(), &work, 1000, SessionSource::Exec);
    write_threads(env.home.path(), &other_dir, 5, SessionSource::Mcp);
    let mut client = env.spawn();
    client.initialize().await;

    // Newest first (created_at desc), 100 per page, every thread exactly once.
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let page = client
            .ok(
                "thread/list",
                json!({"limit": 100, "cursor": cursor, "cwd": work.to_string_lossy()}),
            )
            .await;
        pages += 1;
        seen.extend(ids(&page));
        cursor = page["nextCursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(pages, 10);
    assert_eq!(seen.len(), 1000);
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 1000);
    let newest_first: Vec<String> = written.iter().rev().map(ToString::to_string).collect();
    assert_eq!(seen, newest_first);

    // The backwards cursor of a page, with the direction reversed, lists what precedes it.
    let second = client
        .ok(
            "thread/list",
            json!({"limit": 3, "cwd": work.to_string_lossy(), "cursor": null}),
        )
        .await;
    let next = client
        .ok(
            "thread/list",
            json!({"limit": 3, "cwd": work.to_string_lossy(), "cursor": second["nextCursor"]}),
        )
        .await;
    let back = client
        .ok(
            "thread/list",
            json!({"limit": 3, "cwd": work.to_string_lossy(), "cursor": next["backwardsCursor"], "sortDirection": "asc"}),
        )
        .await;
    let mut back_ids = ids(&back);
    back_ids.reverse();
    assert_eq!(back_ids, ids(&second));

    // Default limit 25; ascending; filters by source and cwd.
    let page = client.ok("thread/list", json!({})).await;
    assert_eq!(page["data"].as_array().map(Vec::len), Some(25));
    let asc = client
        .ok(
            "thread/list",
            json!({"sortDirection": "asc", "limit": 1, "cwd": work.to_string_lossy()}),
        )
        .await;
    assert_eq!(ids(&asc), vec![written[0].to_string()]);
    let mcp = client
        .ok("thread/list", json!({"sourceKinds": ["mcp"], "limit": 100}))
        .await;
    assert_eq!(mcp["data"].as_array().map(Vec::len), Some(5));
    assert_eq!(mcp["data"][0]["source"], json!({"custom": "mcp"}));
    assert_eq!(mcp["data"][0]["status"]["type"], "notLoaded");
    let by_cwd = client
        .ok(
            "thread/list",
            json!({"cwd": [other_dir.to_string_lossy()], "limit": 100}),
        )
        .await;
    assert_eq!(by_cwd["data"].as_array().map(Vec::len), Some(5));
    let search = client
        .ok(
            "thread/list",
            json!({"searchTerm": "question 999", "sortKey": "updated_at"}),
        )
        .await;
    assert_eq!(ids(&search), vec![written[999].to_string()]);
    let bad = client
        .call("thread/list", json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(bad["error"]["code"], -32600);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid cursor")
    );

    // Archive hides a thread from the default listing; unarchive brings it back.
    let target = written[999].to_string();
    let archived = client
        .ok("thread/archive", json!({"threadId": target}))
        .await;
    assert_eq!(archived, json!({}));
    let note = client.notification("thread/archived").await;
    assert_eq!(note["params"]["threadId"], target.as_str());
    let first = client
        .ok(
            "thread/list",
            json!({"limit": 1, "cwd": work.to_string_lossy()}),
        )
        .await;
    assert_eq!(ids(&first), vec![written[998].to_string()]);
    let only_archived = client.ok("thread/list", json!({"archived": true})).await;
    assert_eq!(ids(&only_archived), vec![target.clone()]);
    let back = client
        .ok("thread/unarchive", json!({"threadId": target}))
        .await;
    assert_eq!(back["thread"]["id"], target.as_str());
    let first = client
        .ok(
            "thread/list",
            json!({"limit": 1, "cwd": work.to_string_lossy()}),
        )
        .await;
    assert_eq!(ids(&first), vec![target.clone()]);

    // thread/read of a stored thread, with and without turns.
    let read = client
        .ok(
            "thread/read",
            json!({"threadId": target, "includeTurns": true}),
        )
        .await;
    assert_eq!(read["thread"]["status"]["type"], "notLoaded");
    assert_eq!(read["thread"]["preview"], "question 999");
    assert_eq!(read["thread"]["turns"][0]["status"], "completed");
    assert_eq!(
        read["thread"]["turns"][0]["items"][0]["type"],
        "userMessage"
    );
    let missing = client
        .call(
            "thread/read",
            json!({"threadId": ThreadId::new().to_string()}),
        )
        .await;
    assert_eq!(missing["error"]["code"], -32600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_store_the_key_privately() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    // MOCK_API_KEY is set in the environment: an API-key account.
    let account = client.ok("account/read", json!({})).await;
    assert_eq!(
        account,
        json!({"account": {"type": "apiKey"}, "requiresOpenaiAuth": false})
    );
    let login = client
        .ok(
            "account/login/start",
            json!({"type": "apiKey", "apiKey": "sk-stored"}),
        )
        .await;
    assert_eq!(login, json!({"type": "apiKey"}));
    let done = client.notification("account/login/completed").await;
    assert_eq!(done["params"]["success"], true);
    let updated = client.notification("account/updated").await;
    assert_eq!(updated["params"]["authMode"], "apikey");
    let auth = env
        .home
        .path()
        .join(interpreter_model_client::credentials::CREDENTIALS_FILE);
    let text = std::fs::read_to_string(&auth).expect("credentials file");
    assert!(
        text.contains("sk-stored") && text.contains("\"mock\""),
        "{text}"
    );
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&auth).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let chatgpt = client
        .call("account/login/start", json!({"type": "chatgpt"}))
        .await;
    assert_eq!(chatgpt["error"]["code"], -32600);
    let cancel = client
        .ok("account/login/cancel", json!({"loginId": "x"}))
        .await;
    assert_eq!(cancel, json!({"status": "notFound"}));
    let limits = client.ok("account/rateLimits/read", Value::Null).await;
    assert_eq!(limits["rateLimits"]["primary"], Value::Null);
    let status = client
        .ok("getAuthStatus", json!({"includeToken": true}))
        .await;
    // The environment wins over the stored key.
    assert_eq!(status["authMethod"], "apikey");
    assert_eq!(status["authToken"], "test-key");
    let logout = client.ok("account/logout", Value::Null).await;
    assert_eq!(logout, json!({}));
    let updated = client.notification("account/updated").await;
    assert_eq!(updated["params"]["authMode"], Value::Null);
    let text = std::fs::read_to_string(&auth).expect("credentials file");
    assert!(!text.contains("sk-stored"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reads_and_writes_keep_comments_and_detect_conflicts() {
    let env = AppEnv::with_config("# keep this comment\napproval_timeout_sec = 30").await;
    let mut client = env.spawn();
    client.initialize().await;
    let read = client
        .ok("config/read", json!({"includeLayers": true}))
        .await;
    assert_eq!(read["config"]["model"], "mock-model");
    assert_eq!(read["config"]["approval_timeout_sec"], 30);
    assert_eq!(read["origins"]["model"]["name"]["type"], "user");
    let version = read["origins"]["model"]["version"].clone();
    assert_eq!(read["layers"][0]["version"], version);

    let written = client
        .ok(
            "config/value/write",
            json!({"keyPath": "model_reasoning_effort", "value": "high", "mergeStrategy": "replace", "expectedVersion": version}),
        )
        .await;
    assert_eq!(written["status"], "ok");
    assert_ne!(written["version"], version);
    let text = std::fs::read_to_string(env.home.path().join("config.toml")).expect("config");
    assert!(text.contains("# keep this comment"), "{text}");
    assert!(text.contains("model_reasoning_effort = \"high\""), "{text}");

    let stale = client
        .call(
            "config/value/write",
            json!({"keyPath": "model", "value": "other", "mergeStrategy": "replace", "expectedVersion": version}),
        )
        .await;
    assert_eq!(stale["error"]["code"], -32600);
    assert_eq!(
        stale["error"]["data"]["config_write_error_code"],
        "configVersionConflict"
    );

    let batch = client
        .ok(
            "config/batchWrite",
            json!({"edits": [
                {"keyPath": "app_server.approval_fallback", "value": "approve", "mergeStrategy": "upsert"},
                {"keyPath": "approval_timeout_sec", "value": null, "mergeStrategy": "replace"}
            ], "expectedVersion": written["version"]}),
        )
        .await;
    assert_eq!(batch["status"], "ok");
    let text = std::fs::read_to_string(env.home.path().join("config.toml")).expect("config");
    assert!(
        text.contains("[app_server]") && !text.contains("approval_timeout_sec"),
        "{text}"
    );

    let invalid = client
        .call(
            "config/value/write",
            json!({"keyPath": "approval_policy", "value": "sometimes", "mergeStrategy": "replace"}),
        )
        .await;
    assert_eq!(
        invalid["error"]["data"]["config_write_error_code"],
        "configValidationError"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_and_collaboration_modes() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let models = client.ok("model/list", json!({})).await;
    assert_eq!(models["data"][0]["id"], "mock-model");
    assert_eq!(models["data"][0]["isDefault"], true);
    assert_eq!(models["nextCursor"], Value::Null);
    let paged = client
        .ok("model/list", json!({"limit": 1, "cursor": "0"}))
        .await;
    assert_eq!(paged["data"].as_array().map(Vec::len), Some(1));
    let bad = client.call("model/list", json!({"cursor": "x"})).await;
    assert_eq!(bad["error"]["code"], -32600);
    // Experimental in Codex: only for clients that ask for the experimental API.
    let gated = client.call("collaborationMode/list", json!({})).await;
    assert_eq!(gated["error"]["code"], -32600, "{gated}");
    assert_eq!(
        gated["error"]["message"],
        "collaborationMode/list requires experimentalApi capability"
    );
    let mut client = env.spawn();
    client
        .initialize_with(json!({"experimentalApi": true}))
        .await;
    let modes = client.ok("collaborationMode/list", json!({})).await;
    assert_eq!(
        modes,
        json!({"data": [
            {"name": "Plan", "mode": "plan", "model": null, "reasoning_effort": "medium"},
            {"name": "Default", "mode": "default", "model": null, "reasoning_effort": null}
        ]})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_helpers() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    let ids = write_threads(env.home.path(), &work, 1, SessionSource::Exec);
    std::fs::create_dir_all(work.join("src")).expect("src");
    std::fs::write(work.join("src/main_loop.rs"), "fn main() {}\n").expect("file");
    std::fs::write(work.join("readme.md"), "hi\n").expect("file");
    std::fs::write(work.join(".gitignore"), "ignored_main.rs\n").expect("gitignore");
    std::fs::write(work.join("ignored_main.rs"), "\n").expect("file");
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("git");
        assert!(status.status.success(), "{status:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "init"]);
    std::fs::write(work.join("readme.md"), "hi there\n").expect("edit");

    let mut client = env.spawn();
    // The fuzzy file search sessions are experimental in Codex.
    client
        .initialize_with(json!({"experimentalApi": true}))
        .await;
    let summary = client
        .ok(
            "getConversationSummary",
            json!({"conversationId": ids[0].to_string()}),
        )
        .await;
    assert_eq!(summary["summary"]["conversationId"], ids[0].to_string());
    assert_eq!(summary["summary"]["preview"], "question 0");
    assert_eq!(summary["summary"]["source"], "exec");
    let path = summary["summary"]["path"].clone();
    let by_path = client
        .ok("getConversationSummary", json!({"rolloutPath": path}))
        .await;
    assert_eq!(by_path["summary"]["conversationId"], ids[0].to_string());

    let diff = client
        .ok("gitDiffToRemote", json!({"cwd": work.to_string_lossy()}))
        .await;
    assert_eq!(diff["sha"].as_str().map(str::len), Some(40));
    assert!(
        diff["diff"].as_str().unwrap().contains("+hi there"),
        "{diff}"
    );

    let found = client
        .ok("fuzzyFileSearch", json!({"query": "mainlp", "roots": [work.to_string_lossy()], "cancellationToken": null}))
        .await;
    let files = found["files"].as_array().expect("files");
    assert_eq!(files[0]["path"], "src/main_loop.rs");
    assert_eq!(files[0]["match_type"], "file");
    assert!(
        files.iter().all(|f| f["path"] != "ignored_main.rs"),
        "{files:?}"
    );

    client
        .ok(
            "fuzzyFileSearch/sessionStart",
            json!({"sessionId": "s1", "roots": [work.to_string_lossy()]}),
        )
        .await;
    client
        .ok(
            "fuzzyFileSearch/sessionUpdate",
            json!({"sessionId": "s1", "query": "readme"}),
        )
        .await;
    let updated = client.notification("fuzzyFileSearch/sessionUpdated").await;
    assert_eq!(updated["params"]["sessionId"], "s1");
    assert_eq!(updated["params"]["files"][0]["path"], "readme.md");
    let completed = client
        .notification("fuzzyFileSearch/sessionCompleted")
        .await;
    assert_eq!(completed["params"], json!({"sessionId": "s1"}));
    client
        .ok("fuzzyFileSearch/sessionStop", json!({"sessionId": "s1"}))
        .await;
    let gone = client
        .call(
            "fuzzyFileSearch/sessionUpdate",
            json!({"sessionId": "s1", "query": "x"}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32600);
}

/// Found by the adversarial pass: a model that `git init`s the workspace and sets
/// `core.fsmonitor` had `gitDiffToRemote` run it outside any sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_pass_git_diff_to_remote_runs_nothing_a_repository_planted() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    let marker = work.join("planted-ran");
    let script = work.join("planted.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {}\ncat\n", marker.display()),
    )
    .expect("script");
    let sh = |script_text: &str| {
        let output = std::process::Command::new("sh")
            .args(["-c", script_text])
            .current_dir(&work)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .expect("sh");
        assert!(output.status.success(), "{output:?}");
    };
    sh(
        "chmod +x planted.sh && git init -q && echo one > a.txt && git add a.txt && git commit -qm one \
        && git config core.fsmonitor \"$PWD/planted.sh\" && git config filter.x.clean \"$PWD/planted.sh\" \
        && git config diff.x.textconv \"$PWD/planted.sh\" && echo '* filter=x diff=x' > .gitattributes \
        && echo two >> a.txt",
    );
    let mut client = env.spawn();
    client.initialize().await;
    let diff = client
        .ok("gitDiffToRemote", json!({"cwd": work.to_string_lossy()}))
        .await;
    assert!(diff["diff"].as_str().unwrap().contains("+two"), "{diff}");
    assert!(
        !marker.exists(),
        "gitDiffToRemote ran a program the repository named"
    );
}

/// A filter whose name holds `=` and a submodule with a filter of its own: neither runs
/// under `gitDiffToRemote`, and the diff is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_pass_git_diff_to_remote_runs_no_driver_beyond_reach_of_dash_c() {
    let env = AppEnv::new().await;
    let work = env.work_path();
    let marker = repository_with_drivers_beyond_reach(&work, env.home.path());
    assert_drivers_armed(&work, &marker);
    let mut client = env.spawn();
    client.initialize().await;
    let diff = client
        .ok("gitDiffToRemote", json!({"cwd": work.to_string_lossy()}))
        .await;
    assert!(diff["diff"].as_str().unwrap().contains("+two"), "{diff}");
    assert!(
        !marker.exists(),
        "gitDiffToRemote ran a driver: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_providers_are_created_edited_and_made_the_default() {
    let env = AppEnv::new().await;
    let mut client = env.spawn();
    client.initialize().await;
    let config_path = env.home.path().join("config.toml");

    let capabilities = client
        .ok("modelProvider/capabilities/read", json!({}))
        .await;
    assert_eq!(
        capabilities,
        json!({"imageGeneration": false, "webSearch": false})
    );

    // A new gateway: its id comes from its name.
    let created = client
        .ok(
            "modelProvider/config/write",
            json!({"settings": {"type": "customGateway", "name": "My vLLM",
                   "baseUrl": "http://127.0.0.1:9/v1", "envKey": "VLLM_KEY"}}),
        )
        .await;
    assert_eq!(
        created["provider"],
        json!({"id": "my-vllm", "name": "My vLLM", "baseUrl": "http://127.0.0.1:9/v1",
               "canEdit": true,
               "settings": {"type": "customGateway",
                            "auth": {"mode": "environmentVariable", "envKey": "VLLM_KEY"}}})
    );
    // Edited: an omitted field stays, `null` clears.
    let edited = client
        .ok(
            "modelProvider/config/write",
            json!({"settings": {"type": "customGateway", "providerId": "my-vllm",
                   "envKey": null}}),
        )
        .await;
    assert_eq!(edited["provider"]["baseUrl"], "http://127.0.0.1:9/v1");
    assert_eq!(
        edited["provider"]["settings"]["auth"],
        json!({"mode": "none"})
    );

    let listed = client
        .ok(
            "modelProvider/default/set",
            json!({"providerId": "my-vllm"}),
        )
        .await;
    assert_eq!(listed["defaultProviderId"], "my-vllm");
    let text = std::fs::read_to_string(&config_path).unwrap();
    assert!(text.contains("model_provider = \"my-vllm\""), "{text}");
    assert!(text.contains("[model_providers.my-vllm]"), "{text}");
    let listed = client.ok("modelProvider/list", json!({})).await;
    let by_id = |id: &str| {
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id("my-vllm")["canEdit"], true);
    assert_eq!(by_id("ollama")["canEdit"], false);

    // Refused, and the file is left as it was.
    let before = std::fs::read_to_string(&config_path).unwrap();
    let refused = [
        (
            "modelProvider/default/set",
            json!({"providerId": "nobody"}),
            "unknown model provider",
        ),
        (
            "modelProvider/config/write",
            json!({"settings": {"type": "customGateway", "providerId": "ollama",
                   "baseUrl": "http://127.0.0.1:1/v1"}}),
            "built-in provider",
        ),
        (
            "modelProvider/config/write",
            json!({"settings": {"type": "customGateway", "providerId": "a.b", "name": "x"}}),
            "invalid provider id",
        ),
        (
            "modelProvider/config/write",
            json!({"settings": {"type": "bedrock", "providerId": "amazon-bedrock"}}),
            "only `customGateway`",
        ),
        (
            "modelProvider/config/write",
            json!({"settings": {"type": "customGateway", "name": "bad", "baseUrl": "not a url"}}),
            "base_url",
        ),
    ];
    for (method, params, message) in refused {
        let answer = client.call(method, params.clone()).await;
        let text = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(text.contains(message), "{method} {params}: {answer}");
    }
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), before);
}

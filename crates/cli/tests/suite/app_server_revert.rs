//! `thread/revert` and `thread/reverted` of `interpreter app-server`, through the real
//! binary and the mock model: history reverts that last across a restart and reach the
//! model, the refusals that change nothing, and the opt-in `revertFiles`, including what
//! a hostile model could have done to the files since its patches.

use std::os::unix::fs::symlink;
use std::path::Path;

use crate::app_server_support::{AppClient, AppEnv, RenameLoop, wait_for_stderr};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use interpreter_test_support::process::JsonLinesProcess;
use serde_json::{Value, json};

/// Patches apply without asking, inside the workspace only (`/tmp` is not a root, so the
/// temporary directories standing for "outside" are outside).
const WORKSPACE_WRITE: &str = "approval_policy = \"never\"\nsandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nexclude_slash_tmp = true\n";

/// Script: apply `patch` through the apply_patch tool, then answer `text`.
fn script_patch(env: &AppEnv, call_id: &str, patch: &str, text: &str) {
    let arguments = json!({ "input": patch }).to_string();
    env.model.push(MockResponse::sse(vec![
        chunk::tool_call(0, call_id, "apply_patch", &arguments),
        chunk::finish("tool_calls"),
    ]));
    env.script_text(text);
}

fn update(file: &str, old: &str, new: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {file}\n@@\n-{old}\n+{new}\n*** End Patch\n")
}

/// A turn with the text `text` that the model answers with `answer`; its id.
async fn turn(client: &mut AppClient, env: &AppEnv, thread_id: &str, text: &str) -> String {
    env.script_text(&format!("answer to {text}"));
    let turn_id = client.start_turn(thread_id, text).await;
    client.until_turn_completed().await;
    turn_id
}

async fn turn_ids(client: &mut AppClient, thread_id: &str) -> Vec<String> {
    let listed = client
        .ok(
            "thread/turns/list",
            json!({"threadId": thread_id, "sortDirection": "asc"}),
        )
        .await;
    ids(&listed["data"])
}

fn ids(turns: &Value) -> Vec<String> {
    turns
        .as_array()
        .expect("turns")
        .iter()
        .map(|turn| turn["id"].as_str().expect("turn id").to_string())
        .collect()
}

async fn revert(client: &mut AppClient, thread_id: &str, before: &str, files: bool) -> Value {
    let mut params = json!({"threadId": thread_id, "beforeTurnId": before});
    if files {
        params["revertFiles"] = json!(true);
    }
    client.ok("thread/revert", params).await
}

fn last_request(env: &AppEnv) -> String {
    env.model
        .requests()
        .last()
        .expect("a model request")
        .to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read file")
}

fn skipped_reason(answer: &Value, path: &Path) -> String {
    let skipped = answer["fileRevert"]["skipped"]
        .as_array()
        .expect("skipped list");
    skipped
        .iter()
        .find(|s| s["path"] == path.to_string_lossy().as_ref())
        .unwrap_or_else(|| panic!("{} not skipped: {answer}", path.display()))["reason"]
        .as_str()
        .expect("reason")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reverts_drop_turns_for_good_and_the_model_no_longer_sees_them() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let notes = env.work_path().join("notes.txt");
    std::fs::write(&notes, "draft\n").unwrap();
    let (thread_id, first, fifth) = {
        let mut client = env.spawn();
        client.initialize().await;
        let thread_id = client.start_thread(json!({})).await;
        let first = turn(&mut client, &env, &thread_id, "first-question").await;
        let second = turn(&mut client, &env, &thread_id, "second-question").await;
        script_patch(&env, "p1", &update("notes.txt", "draft", "final"), "edited");
        let third = client.start_turn(&thread_id, "third-question").await;
        client.until_turn_completed().await;
        let fourth = turn(&mut client, &env, &thread_id, "fourth-question").await;
        assert_eq!(read(&notes), "final\n");

        // The last turn.
        let answer = revert(&mut client, &thread_id, &fourth, false).await;
        assert_eq!(answer["thread"]["id"], thread_id.as_str());
        assert_eq!(answer["thread"]["turns"], json!([]));
        assert_eq!(answer["turnsBackwardsCursor"], "0");
        assert_eq!(answer["itemsBackwardsCursor"], "0");
        assert!(answer.get("fileRevert").is_none(), "{answer}");
        let reverted = client.notification("thread/reverted").await;
        assert_eq!(reverted["params"], json!({"threadId": thread_id}));
        assert_eq!(
            turn_ids(&mut client, &thread_id).await,
            vec![first.clone(), second.clone(), third.clone()]
        );
        // The cursor reads the kept turns from the newest.
        let newest = client
            .ok(
                "thread/turns/list",
                json!({"threadId": thread_id, "sortDirection": "desc", "limit": 1,
                       "cursor": answer["turnsBackwardsCursor"]}),
            )
            .await;
        assert_eq!(ids(&newest["data"]), vec![third.clone()]);

        // The last two, one of them a patch: Codex's contract is that by default the
        // files stay as they are.
        let answer = revert(&mut client, &thread_id, &second, false).await;
        assert!(answer.get("fileRevert").is_none(), "{answer}");
        assert_eq!(read(&notes), "final\n");
        assert_eq!(turn_ids(&mut client, &thread_id).await, vec![first.clone()]);

        // The model's next request holds the first turn only, and the new turn's id is
        // none of the dropped ones.
        let fifth = turn(&mut client, &env, &thread_id, "fifth-question").await;
        assert!(![&second, &third, &fourth].contains(&&fifth), "{fifth}");
        let body = last_request(&env);
        assert!(body.contains("first-question"), "{body}");
        assert!(body.contains("fifth-question"), "{body}");
        for dropped in [
            "second-question",
            "third-question",
            "fourth-question",
            "answer to second",
        ] {
            assert!(!body.contains(dropped), "{dropped} in {body}");
        }
        (thread_id, first, fifth)
    };

    // A new server reads the reverted thread from disk, and the model hears the same.
    let mut client = env.spawn();
    client.initialize().await;
    let read_back = client
        .ok(
            "thread/read",
            json!({"threadId": thread_id, "includeTurns": true}),
        )
        .await;
    let kept = vec![first.clone(), fifth.clone()];
    assert_eq!(ids(&read_back["thread"]["turns"]), kept);
    assert_eq!(turn_ids(&mut client, &thread_id).await, kept);
    let resumed = client
        .ok("thread/resume", json!({"threadId": thread_id}))
        .await;
    assert_eq!(ids(&resumed["thread"]["turns"]), kept);
    turn(&mut client, &env, &thread_id, "sixth-question").await;
    let body = last_request(&env);
    assert!(body.contains("fifth-question"), "{body}");
    for dropped in ["second-question", "third-question", "fourth-question"] {
        assert!(!body.contains(dropped), "{dropped} in {body}");
    }

    // Everything: nothing is left to page through.
    let answer = revert(&mut client, &thread_id, &first, false).await;
    assert_eq!(answer["turnsBackwardsCursor"], Value::Null);
    assert_eq!(answer["itemsBackwardsCursor"], Value::Null);
    assert!(turn_ids(&mut client, &thread_id).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_reverts_change_nothing() {
    let env = AppEnv::with_config("sandbox_mode = \"danger-full-access\"").await;
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client
        .start_thread(json!({"approvalPolicy": "never"}))
        .await;
    let first = turn(&mut client, &env, &thread_id, "only-question").await;
    // Another thread with more turns: its later turn ids are not turns of this one.
    let other = client
        .start_thread(json!({"approvalPolicy": "never"}))
        .await;
    let mut other_turns = Vec::new();
    for text in ["a", "b", "c"] {
        other_turns.push(turn(&mut client, &env, &other, text).await);
    }
    let foreign = other_turns
        .iter()
        .find(|id| **id != first)
        .expect("a turn id the first thread lacks")
        .clone();

    for before in ["no-such-turn", foreign.as_str()] {
        let answer = client
            .call(
                "thread/revert",
                json!({"threadId": thread_id, "beforeTurnId": before}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("turn not found"),
            "{answer}"
        );
    }
    let answer = client
        .call(
            "thread/revert",
            json!({"threadId": "not-a-thread", "beforeTurnId": first}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");

    // An ephemeral thread has no durable history to revert.
    let ephemeral = client
        .start_thread(json!({"approvalPolicy": "never", "ephemeral": true}))
        .await;
    let ephemeral_turn = turn(&mut client, &env, &ephemeral, "fleeting").await;
    let answer = client
        .call(
            "thread/revert",
            json!({"threadId": ephemeral, "beforeTurnId": ephemeral_turn}),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ephemeral"),
        "{answer}"
    );

    // While a turn runs.
    env.script_command("c1", "sleep 3");
    env.script_text("slept");
    let running = client.start_turn(&thread_id, "sleep").await;
    client
        .read_until(|m| {
            m["method"] == "item/started" && m["params"]["item"]["type"] == "commandExecution"
        })
        .await;
    for before in [first.as_str(), running.as_str()] {
        let answer = client
            .call(
                "thread/revert",
                json!({"threadId": thread_id, "beforeTurnId": before}),
            )
            .await;
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("a turn is running"),
            "{answer}"
        );
    }
    client.until_turn_completed().await;
    assert_eq!(
        turn_ids(&mut client, &thread_id).await,
        vec![first.clone(), running]
    );
    assert_eq!(turn_ids(&mut client, &other).await, other_turns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_reverted_reaches_every_connection_that_follows_the_thread() {
    let env = AppEnv::new().await;
    let socket = env.home.path().join("app.sock");
    let server = JsonLinesProcess::spawn(
        env.command(&["--listen", &format!("unix://{}", socket.display())]),
    )
    .expect("spawn");
    wait_for_stderr(&server, "listening on unix://").await;
    let mut first = AppClient::connect_unix(server, &socket).await;
    first.initialize().await;
    let thread_id = first.start_thread(json!({})).await;
    let turn_id = turn(&mut first, &env, &thread_id, "question").await;

    let server = first.server.take().expect("server");
    let mut second = AppClient::connect_unix(server, &socket).await;
    second.initialize().await;
    second
        .ok("thread/resume", json!({"threadId": thread_id}))
        .await;

    revert(&mut first, &thread_id, &turn_id, false).await;
    for client in [&mut first, &mut second] {
        let reverted = client.notification("thread/reverted").await;
        assert_eq!(reverted["params"]["threadId"], thread_id.as_str());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_files_restores_what_the_turn_changed_and_skips_what_changed_since() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    std::fs::write(ws.join("kept.txt"), "original\n").unwrap();
    std::fs::write(ws.join("edited.txt"), "original\n").unwrap();
    std::fs::write(ws.join("gone.txt"), "keep me\n").unwrap();
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let before = turn(&mut client, &env, &thread_id, "look").await;

    let patch = "*** Begin Patch\n\
        *** Update File: kept.txt\n@@\n-original\n+patched once\n\
        *** Update File: edited.txt\n@@\n-original\n+patched\n\
        *** Add File: sub/created.txt\n+new\n\
        *** Delete File: gone.txt\n\
        *** End Patch\n";
    script_patch(&env, "p1", patch, "first edit");
    let edit_turn = client.start_turn(&thread_id, "edit").await;
    client.until_turn_completed().await;
    // A later turn edits kept.txt again: undone newest first, it comes back whole.
    script_patch(
        &env,
        "p2",
        &update("kept.txt", "patched once", "patched twice"),
        "second edit",
    );
    client.start_turn(&thread_id, "edit again").await;
    client.until_turn_completed().await;
    assert_eq!(read(&ws.join("kept.txt")), "patched twice\n");
    assert!(!ws.join("gone.txt").exists());

    // The user changed a file after the turn: theirs stays.
    std::fs::write(ws.join("edited.txt"), "the user's version\n").unwrap();

    let answer = revert(&mut client, &thread_id, &edit_turn, true).await;
    let restored: Vec<String> = answer["fileRevert"]["restored"]
        .as_array()
        .expect("restored")
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    let path = |name: &str| ws.join(name).to_string_lossy().into_owned();
    assert_eq!(
        restored,
        vec![
            path("kept.txt"),
            path("gone.txt"),
            path("sub/created.txt"),
            path("kept.txt")
        ],
        "{answer}"
    );
    assert!(
        skipped_reason(&answer, &ws.join("edited.txt")).contains("changed since"),
        "{answer}"
    );
    assert_eq!(read(&ws.join("kept.txt")), "original\n");
    assert_eq!(read(&ws.join("gone.txt")), "keep me\n");
    assert!(!ws.join("sub/created.txt").exists());
    assert_eq!(read(&ws.join("edited.txt")), "the user's version\n");
    assert_eq!(turn_ids(&mut client, &thread_id).await, vec![before]);
}

/// Hostile: after its patches, the model (through a command, or a later turn) swaps what
/// the paths lead to, hoping the revert writes outside the workspace for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_files_never_writes_through_a_symlink_or_a_swapped_directory() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let outside = tempfile::TempDir::new().expect("outside");
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::write(ws.join("victim.txt"), "before\n").unwrap();
    std::fs::write(ws.join("deleted.txt"), "old\n").unwrap();
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let patch = "*** Begin Patch\n\
        *** Update File: victim.txt\n@@\n-before\n+after\n\
        *** Add File: dir/inner.txt\n+inner\n\
        *** Delete File: deleted.txt\n\
        *** End Patch\n";
    script_patch(&env, "p1", patch, "edited");
    let edit_turn = client.start_turn(&thread_id, "edit").await;
    client.until_turn_completed().await;

    // The file is now a symlink to a file outside with the content the turn left.
    std::fs::write(outside.join("target.txt"), "after\n").unwrap();
    std::fs::remove_file(ws.join("victim.txt")).unwrap();
    symlink(outside.join("target.txt"), ws.join("victim.txt")).unwrap();
    // The directory is now a symlink to a directory outside holding the same file.
    std::fs::create_dir(outside.join("dir")).unwrap();
    std::fs::write(outside.join("dir/inner.txt"), "inner\n").unwrap();
    std::fs::remove_dir_all(ws.join("dir")).unwrap();
    symlink(outside.join("dir"), ws.join("dir")).unwrap();
    // The deleted file's name is now a dangling symlink to a path outside.
    symlink(outside.join("planted.txt"), ws.join("deleted.txt")).unwrap();

    let answer = revert(&mut client, &thread_id, &edit_turn, true).await;
    assert_eq!(answer["fileRevert"]["restored"], json!([]), "{answer}");
    let victim = skipped_reason(&answer, &ws.join("victim.txt"));
    assert!(victim.contains("leads to"), "{victim}");
    let inner = skipped_reason(&answer, &ws.join("dir/inner.txt"));
    assert!(inner.contains("leads to"), "{inner}");
    let deleted = skipped_reason(&answer, &ws.join("deleted.txt"));
    assert!(deleted.contains("leads to"), "{deleted}");

    assert_eq!(read(&outside.join("target.txt")), "after\n");
    assert_eq!(read(&outside.join("dir/inner.txt")), "inner\n");
    assert!(!outside.join("planted.txt").exists());
    assert!(
        std::fs::symlink_metadata(ws.join("victim.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

/// Hostile: a symlink in the workspace that points inside it still is never written
/// through, and a deleted file whose name is taken again is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_files_leaves_a_symlink_planted_inside_the_workspace() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    std::fs::write(ws.join("victim.txt"), "before\n").unwrap();
    std::fs::write(ws.join("deleted.txt"), "old\n").unwrap();
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    let patch = "*** Begin Patch\n\
        *** Update File: victim.txt\n@@\n-before\n+after\n\
        *** Delete File: deleted.txt\n\
        *** End Patch\n";
    script_patch(&env, "p1", patch, "edited");
    let edit_turn = client.start_turn(&thread_id, "edit").await;
    client.until_turn_completed().await;

    // victim.txt becomes a link to a file in the workspace with the content the turn
    // left: writing through it would change a file the patch never wrote.
    std::fs::rename(ws.join("victim.txt"), ws.join("real.txt")).unwrap();
    symlink("real.txt", ws.join("victim.txt")).unwrap();
    std::fs::write(ws.join("deleted.txt"), "someone else's\n").unwrap();

    let answer = revert(&mut client, &thread_id, &edit_turn, true).await;
    assert_eq!(answer["fileRevert"]["restored"], json!([]), "{answer}");
    skipped_reason(&answer, &ws.join("victim.txt"));
    let deleted = skipped_reason(&answer, &ws.join("deleted.txt"));
    assert!(deleted.contains("exists again"), "{deleted}");
    assert_eq!(read(&ws.join("real.txt")), "after\n");
    assert_eq!(read(&ws.join("deleted.txt")), "someone else's\n");
}

/// Hostile: a revert writes only where the thread may write now; a thread resumed
/// read-only restores nothing, whatever its patches once wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revert_files_restores_only_inside_the_writable_roots_of_the_current_config() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    std::fs::write(ws.join("notes.txt"), "before\n").unwrap();
    let (thread_id, edit_turn) = {
        let mut client = env.spawn();
        client.initialize().await;
        let thread_id = client.start_thread(json!({})).await;
        script_patch(
            &env,
            "p1",
            &update("notes.txt", "before", "after"),
            "edited",
        );
        let edit_turn = client.start_turn(&thread_id, "edit").await;
        client.until_turn_completed().await;
        (thread_id, edit_turn)
    };
    let config = env.home.path().join("config.toml");
    let text = read(&config).replace("\"workspace-write\"", "\"read-only\"");
    std::fs::write(&config, text).unwrap();

    let mut client = env.spawn();
    client.initialize().await;
    let answer = revert(&mut client, &thread_id, &edit_turn, true).await;
    assert_eq!(answer["fileRevert"]["restored"], json!([]), "{answer}");
    let reason = skipped_reason(&answer, &ws.join("notes.txt"));
    assert!(reason.contains("writable roots"), "{reason}");
    assert_eq!(read(&ws.join("notes.txt")), "after\n");
}

/// Attack 2 of the fourth adversarial pass, on `thread/revert`: while the revert puts
/// files back, another process swaps the directory holding them with a symlink to a
/// directory outside that holds look-alikes. Removing a file the turn created and
/// creating one it deleted went by path; now both are done beneath the workspace's
/// descriptor, so the outside directory is neither emptied nor written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_a_concurrent_rename_loop_never_lands_a_revert_outside() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let outside = tempfile::TempDir::new().expect("outside");
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    std::fs::create_dir(ws.join("dir")).unwrap();
    let count = 40;
    let mut patch = String::from("*** Begin Patch\n");
    for index in 0..count {
        std::fs::write(ws.join(format!("dir/old{index}")), "old\n").unwrap();
        // What a by-name removal of the added files would remove instead.
        std::fs::write(outside.join(format!("new{index}")), "x\n").unwrap();
        patch.push_str(&format!(
            "*** Add File: dir/new{index}\n+x\n*** Delete File: dir/old{index}\n"
        ));
    }
    patch.push_str("*** End Patch\n");
    symlink(&outside, ws.join("dir-link")).unwrap();
    let mut client = env.spawn();
    client.initialize().await;
    let thread_id = client.start_thread(json!({})).await;
    script_patch(&env, "p1", &patch, "edited");
    let edit_turn = client.start_turn(&thread_id, "edit").await;
    client.until_turn_completed().await;

    let racer = RenameLoop::start(ws.join("dir"), ws.join("dir-link"));
    let answer = revert(&mut client, &thread_id, &edit_turn, true).await;
    let swaps = racer.stop();
    assert!(swaps > 0, "the racer never ran");

    for index in 0..count {
        assert_eq!(
            read(&outside.join(format!("new{index}"))),
            "x\n",
            "a look-alike outside was removed: {answer}"
        );
        assert!(
            !outside.join(format!("old{index}")).exists(),
            "a deleted file was put back outside: {answer}"
        );
    }
}

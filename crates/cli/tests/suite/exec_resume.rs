//! Resuming threads across processes: by id, `--last`, unknown ids, damaged rollouts,
//! and that replayed history keeps reasoning and tool call ids; and that the thread
//! index heals itself from the rollouts (deleted, garbage, behind disk).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use interpreter_core::store::local::{STATE_DB_FILE, write_rollout};
use interpreter_core::store::{RolloutItem, SessionMeta};
use interpreter_protocol::{EventMsg, ResponseItem, SessionSource, ThreadId, UserMessageEvent};

use crate::exec_support::{TestEnv, json_warnings, request_mentions};
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;
use pretty_assertions::assert_eq;
use serde_json::json;

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![
        chunk::text(text),
        chunk::finish("stop"),
        chunk::usage(5, 2),
    ])
}

const EXEC: [&str; 3] = ["exec", "--json", "--skip-git-repo-check"];

fn args<'a>(rest: &[&'a str]) -> Vec<&'a str> {
    EXEC.iter().copied().chain(rest.iter().copied()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_by_id_after_the_process_exited_sees_history() {
    let env = TestEnv::new().await;
    env.server.push(answer("first answer"));
    env.server.push(answer("second answer"));

    let first = env.run(&args(&["remember the word apricot"])).await;
    first.assert_success();
    let thread_id = first.thread_id();

    let second = env
        .run(&args(&["resume", &thread_id, "what was the word?"]))
        .await;
    second.assert_success();
    assert_eq!(second.thread_id(), thread_id);
    let events = second.events();
    assert_eq!(
        events[events.len() - 2]["item"]["text"],
        json!("second answer")
    );

    let requests = env.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(request_mentions(&requests[1], "remember the word apricot"));
    assert!(request_mentions(&requests[1], "first answer"));
    assert!(request_mentions(&requests[1], "what was the word?"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_last_picks_the_latest_thread_in_this_directory() {
    let env = TestEnv::new().await;
    env.server.push(answer("one"));
    env.server.push(answer("two"));
    env.server.push(answer("three"));

    let older = env.run(&args(&["first thread"])).await;
    older.assert_success();
    let newer = env.run(&args(&["second thread"])).await;
    newer.assert_success();
    assert_ne!(older.thread_id(), newer.thread_id());

    let resumed = env
        .run(&args(&["resume", "--last", "continue please"]))
        .await;
    resumed.assert_success();
    assert_eq!(resumed.thread_id(), newer.thread_id());
    let requests = env.server.requests();
    assert!(request_mentions(&requests[2], "second thread"));
    assert!(!request_mentions(&requests[2], "first thread"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_of_an_unknown_id_fails_naming_the_id() {
    let env = TestEnv::new().await;
    let unknown = "0199a213-81c0-7800-8aa1-bbab2a035a53";
    let out = env.run(&args(&["resume", unknown, "hello"])).await;
    assert_eq!(out.code, Some(1), "stderr: {}", out.stderr);
    assert!(out.stderr.contains(unknown), "stderr: {}", out.stderr);
    assert!(out.stdout.is_empty(), "no thread may start: {}", out.stdout);
    assert!(env.server.requests().is_empty());

    let not_a_uuid = env.run(&args(&["resume", "my-thread", "hello"])).await;
    assert_eq!(not_a_uuid.code, Some(1));
    assert!(
        not_a_uuid.stderr.contains("my-thread"),
        "{}",
        not_a_uuid.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_survives_a_truncated_last_rollout_line() {
    let env = TestEnv::new().await;
    env.server.push(answer("before the crash"));
    env.server.push(answer("after the crash"));

    let first = env.run(&args(&["note: kiwi"])).await;
    first.assert_success();
    let thread_id = first.thread_id();

    // A process killed mid-write leaves half a JSON line without a newline.
    let rollout = env.rollout_file(&thread_id);
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&rollout)
        .expect("open rollout");
    file.write_all(br#"{"timestamp":"2025-01-01T00:00:00Z","type":"response_item","payl"#)
        .expect("append half a line");
    drop(file);

    let second = env
        .run(&args(&["resume", &thread_id, "what was the note?"]))
        .await;
    second.assert_success();
    assert_eq!(
        json_warnings(&second.events(), "skipped truncated last line"),
        1,
        "stdout: {}",
        second.stdout
    );
    let requests = env.server.requests();
    assert!(request_mentions(&requests[1], "note: kiwi"));
    assert!(request_mentions(&requests[1], "before the crash"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_and_tool_call_ids_are_replayed_on_resume() {
    let env = TestEnv::new().await;
    let shell_args = json!({"command": "echo replay"}).to_string();
    env.server.push(MockResponse::sse(vec![
        chunk::reasoning("I should run a command."),
        chunk::tool_call(0, "call_replay_1", "shell", &shell_args),
        chunk::finish("tool_calls"),
    ]));
    env.server.push(MockResponse::sse(vec![
        chunk::reasoning("The command printed replay."),
        chunk::text("It printed replay."),
        chunk::finish("stop"),
    ]));
    env.server.push(answer("still here"));

    let first = env
        .run(&args(&["-s", "danger-full-access", "run echo replay"]))
        .await;
    first.assert_success();
    let reasoning: Vec<_> = first
        .events()
        .into_iter()
        .filter(|event| event["item"]["type"] == "reasoning")
        .collect();
    assert!(
        !reasoning.is_empty(),
        "no reasoning item in {}",
        first.stdout
    );

    let thread_id = first.thread_id();
    let second = env.run(&args(&["resume", &thread_id, "again?"])).await;
    second.assert_success();

    let requests = env.server.requests();
    assert_eq!(requests.len(), 3);
    let replayed = requests[2]["messages"].to_string();
    assert!(
        replayed.contains("call_replay_1"),
        "tool id not replayed: {replayed}"
    );
    assert!(
        replayed.contains("I should run a command."),
        "reasoning not replayed: {replayed}"
    );
    env.server.assert_invariants();
}

/// The metadata of a thread `exec` started in `cwd` at `timestamp` with the mock model.
fn exec_meta(cwd: &Path, timestamp: DateTime<Utc>) -> SessionMeta {
    SessionMeta {
        id: ThreadId::new(),
        timestamp,
        cwd: cwd.to_path_buf(),
        originator: "test".into(),
        cli_version: "0.0.0".into(),
        source: SessionSource::Exec,
        model_provider: Some("mock".into()),
        model: Some("mock-model".into()),
        base_instructions: None,
        forked_from_id: None,
    }
}

/// Writes a finished one-exchange thread started in `cwd`, as the recorder would, with
/// a modification time `seq` seconds after a fixed instant so recency is unambiguous.
fn write_thread(home: &Path, cwd: &Path, seq: u64, question: &str) -> (ThreadId, PathBuf) {
    let base = 1_767_225_600; // 2026-01-01T00:00:00Z
    let started = DateTime::<Utc>::from_timestamp(base + i64::try_from(seq).unwrap(), 0).unwrap();
    let meta = exec_meta(cwd, started);
    let items = [
        RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
            item_id: String::new(),
            message: question.into(),
        })),
        RolloutItem::ResponseItem(ResponseItem::user_text(question)),
        RolloutItem::ResponseItem(ResponseItem::assistant_text(format!(
            "answer to {question}"
        ))),
    ];
    let path = write_rollout(home, &meta, &items).expect("write rollout");
    let modified = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600 + seq);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|file| file.set_modified(modified))
        .expect("set mtime");
    (meta.id, path)
}

fn remove_index(home: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(home.join(format!("{STATE_DB_FILE}{suffix}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_index_is_rebuilt_and_resume_last_finds_the_newest_of_1000() {
    let env = TestEnv::new().await;
    env.server.push(answer("welcome back"));
    let cwd = env.work_path();
    let mut newest = None;
    // Written out of order, so neither file names nor directory order give it away.
    for seq in (0..1000u64).map(|n| (n * 7919) % 1000) {
        let (id, _) = write_thread(env.home.path(), &cwd, seq, &format!("question {seq}"));
        if seq == 999 {
            newest = Some(id);
        }
    }
    let newest = newest.expect("newest thread").to_string();
    remove_index(env.home.path());

    let out = env
        .run(&args(&["resume", "--last", "where were we?"]))
        .await;
    out.assert_success();
    assert_eq!(out.thread_id(), newest);
    // The repair is one of the thread's warnings: an `error` item on stdout.
    assert_eq!(
        json_warnings(&out.events(), "was missing; rebuilt it from 1000 rollouts"),
        1,
        "stdout: {}",
        out.stdout
    );
    assert!(!out.stderr.contains("rebuilt"), "stderr: {}", out.stderr);
    let requests = env.server.requests();
    assert!(request_mentions(&requests[0], "question 999"));
    assert!(request_mentions(&requests[0], "where were we?"));

    // Healed once: the next run has nothing to repair.
    env.server.push(answer("still here"));
    let again = env.run(&args(&["resume", "--last", "and now?"])).await;
    again.assert_success();
    assert_eq!(again.thread_id(), newest);
    assert!(!again.stdout.contains("thread index"), "{}", again.stdout);
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_index_is_moved_aside_and_rebuilt_and_new_threads_are_indexed() {
    let env = TestEnv::new().await;
    env.server.push(answer("old answer"));
    env.server.push(answer("new answer"));
    env.server.push(answer("resumed answer"));
    let old = env.run(&args(&["old thread"])).await;
    old.assert_success();

    remove_index(env.home.path());
    let garbage = b"\x00\x01 definitely not SQLite \xff\xfe garbage garbage garbage";
    std::fs::write(env.home.path().join(STATE_DB_FILE), garbage).expect("write garbage");

    let new = env.run(&args(&["new thread"])).await;
    new.assert_success();
    assert_eq!(
        json_warnings(&new.events(), "rebuilt it from 1 rollout"),
        1,
        "stdout: {}",
        new.stdout
    );
    assert!(new.stdout.contains("was unreadable"), "{}", new.stdout);
    let moved: Vec<PathBuf> = std::fs::read_dir(env.home.path())
        .expect("read home")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("state.sqlite.corrupt-"))
                && path.extension().is_none_or(|ext| ext != "sqlite-wal")
        })
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(std::fs::read(&moved[0]).expect("read moved"), garbage);

    // The new thread made it into the rebuilt index: --last finds it without any repair.
    let resumed = env.run(&args(&["resume", "--last", "continue"])).await;
    resumed.assert_success();
    assert_eq!(resumed.thread_id(), new.thread_id());
    assert!(
        !resumed.stdout.contains("thread index"),
        "{}",
        resumed.stdout
    );
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_byte_rollout_is_an_error_naming_the_file() {
    let env = TestEnv::new().await;
    env.server.push(answer("first"));
    let first = env.run(&args(&["hello"])).await;
    first.assert_success();
    let thread_id = first.thread_id();
    let rollout = env.rollout_file(&thread_id);
    std::fs::write(&rollout, b"").expect("truncate rollout");

    let out = env.run(&args(&["resume", &thread_id, "hello again"])).await;
    assert_eq!(
        out.code,
        Some(1),
        "stdout: {}\nstderr: {}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains(&rollout.display().to_string()) && out.stderr.contains("0 bytes"),
        "stderr: {}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "no thread may start: {}", out.stdout);
    assert_eq!(
        env.server.requests().len(),
        1,
        "no model call for the resume"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_last_skips_a_thread_whose_rollout_was_deleted() {
    let env = TestEnv::new().await;
    env.server.push(answer("one"));
    env.server.push(answer("two"));
    env.server.push(answer("three"));
    let older = env.run(&args(&["older thread"])).await;
    older.assert_success();
    let newer = env.run(&args(&["newer thread"])).await;
    newer.assert_success();
    std::fs::remove_file(env.rollout_file(&newer.thread_id())).expect("delete newest");

    let resumed = env.run(&args(&["resume", "--last", "continue"])).await;
    resumed.assert_success();
    assert_eq!(resumed.thread_id(), older.thread_id());
    let requests = env.server.requests();
    assert!(request_mentions(&requests[2], "older thread"));
    env.server.assert_invariants();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_last_catches_up_with_rollouts_the_index_missed() {
    let env = TestEnv::new().await;
    env.server.push(answer("indexed"));
    env.server.push(answer("caught up"));
    let indexed = env.run(&args(&["indexed thread"])).await;
    indexed.assert_success();
    // A rollout the index never heard of (copied in, or written while it was unusable),
    // newer than everything indexed.
    let far_future = 4_000_000_000;
    let (missed, _) = write_thread(
        env.home.path(),
        &env.work_path(),
        far_future,
        "missed thread",
    );

    let resumed = env.run(&args(&["resume", "--last", "continue"])).await;
    resumed.assert_success();
    assert_eq!(resumed.thread_id(), missed.to_string());
    assert_eq!(
        json_warnings(&resumed.events(), "indexed 1 rollout it did not know"),
        1,
        "stdout: {}",
        resumed.stdout
    );
    env.server.assert_invariants();
}

/// A process that died mid-turn leaves a turn started and never ended. Resuming records
/// it as interrupted (once) and runs only the new prompt: the old turn's commands may
/// already have had effects, so nothing of it is run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_left_unfinished_by_a_dead_process_is_recorded_as_interrupted() {
    let env = TestEnv::new().await;
    let meta = exec_meta(&env.work_path(), Utc::now());
    let items = [
        RolloutItem::EventMsg(EventMsg::TaskStarted(
            interpreter_protocol::TaskStartedEvent {
                turn_id: "1".into(),
                model_context_window: None,
            },
        )),
        RolloutItem::EventMsg(EventMsg::UserMessage(UserMessageEvent {
            item_id: String::new(),
            message: "delete the build directory".into(),
        })),
        RolloutItem::ResponseItem(ResponseItem::user_text("delete the build directory")),
    ];
    let path = write_rollout(env.home.path(), &meta, &items).unwrap();
    env.server.push(answer("done"));
    env.server.push(answer("done again"));

    let id = meta.id.to_string();
    let resumed = env.run(&args(&["resume", &id, "what happened?"])).await;
    resumed.assert_success();
    assert_eq!(
        json_warnings(&resumed.events(), "turn 1 was interrupted"),
        1,
        "{}",
        resumed.stdout
    );
    let aborted = |text: &str| {
        text.lines()
            .filter(|line| line.contains("\"turn_aborted\"") && line.contains("\"turn_id\":\"1\""))
            .count()
    };
    assert_eq!(aborted(&std::fs::read_to_string(&path).unwrap()), 1);
    let requests = env.server.requests();
    assert_eq!(requests.len(), 1, "only the new prompt runs");
    assert!(request_mentions(&requests[0], "what happened?"));

    // Recorded once: the next resume finds it ended.
    let again = env.run(&args(&["resume", &id, "and now?"])).await;
    again.assert_success();
    assert_eq!(json_warnings(&again.events(), "was interrupted"), 0);
    assert_eq!(aborted(&std::fs::read_to_string(&path).unwrap()), 1);
}

/// A resumed thread goes on with the model it ran with, not the config file's; a model
/// the caller picks for the resumed run wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_thread_keeps_its_model_unless_the_caller_picks_one() {
    let env = TestEnv::new().await;
    env.server.push(answer("one"));
    env.server.push(answer("two"));
    env.server.push(answer("three"));

    let first = env.run(&args(&["-m", "first-model", "hello"])).await;
    first.assert_success();
    let thread_id = first.thread_id();

    // The config file names `mock-model`; the thread ran on `first-model`.
    let resumed = env.run(&args(&["resume", &thread_id, "again"])).await;
    resumed.assert_success();
    let picked = env
        .run(&args(&[
            "-m",
            "third-model",
            "resume",
            &thread_id,
            "once more",
        ]))
        .await;
    picked.assert_success();

    let models: Vec<String> = env
        .server
        .requests()
        .iter()
        .map(|request| request["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(models, ["first-model", "first-model", "third-model"]);
    env.server.assert_invariants();
}

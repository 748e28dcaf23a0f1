//! Problems the engine works around but the user must hear about reach them as the
//! thread's warnings, once, whatever the log level: a truncated AGENTS.md, rollout lines
//! skipped on resume, a rebuilt thread index and unreadable stored credentials. People
//! see `warning: …` on stderr; `--json` carries an `error` item on stdout. A fresh home
//! shows none of them.

use crate::exec_support;

use std::path::Path;

use crate::exec_support::{RunOutput, TestEnv, json_warnings};
use interpreter_core::store::local::STATE_DB_FILE;
use interpreter_model_client::credentials::CREDENTIALS_FILE;
use interpreter_test_support::MockResponse;
use interpreter_test_support::mock_model::chunk;

const TRUNCATED: &str = "truncated to 64 of its";
const SKIPPED_LINE: &str = "skipped unreadable line 2";
const INDEX_REBUILT: &str = "was unreadable";
const CREDENTIALS: &str = "ignoring stored credentials";

fn answer(text: &str) -> MockResponse {
    MockResponse::sse(vec![chunk::text(text), chunk::finish("stop")])
}

fn exec_args<'a>(json: bool, rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["exec", "--skip-git-repo-check"];
    if json {
        args.push("--json");
    }
    args.extend_from_slice(rest);
    args
}

/// The warning is shown exactly once, where that output mode shows warnings, and nowhere
/// else.
#[track_caller]
fn assert_warned_once(out: &RunOutput, json: bool, needle: &str) {
    out.assert_success();
    if json {
        assert_eq!(
            json_warnings(&out.events(), needle),
            1,
            "{needle:?} as one warning item in:\n{}",
            out.stdout
        );
        assert!(
            !out.stderr.contains(needle),
            "{needle:?} also on stderr:\n{}",
            out.stderr
        );
    } else {
        let shown = out
            .stderr
            .lines()
            .filter(|line| line.contains("warning: ") && line.contains(needle))
            .count();
        assert_eq!(shown, 1, "{needle:?} once on stderr:\n{}", out.stderr);
        assert_eq!(
            out.stderr.matches(needle).count(),
            1,
            "stderr:\n{}",
            out.stderr
        );
        assert!(!out.stdout.contains(needle), "stdout:\n{}", out.stdout);
    }
}

#[track_caller]
fn assert_no_warnings(out: &RunOutput, json: bool) {
    out.assert_success();
    if json {
        assert_eq!(
            json_warnings(&out.events(), ""),
            0,
            "stdout:\n{}",
            out.stdout
        );
    } else {
        assert!(!out.stderr.contains("warning"), "stderr:\n{}", out.stderr);
    }
}

fn remove_index(home: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(home.join(format!("{STATE_DB_FILE}{suffix}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_home_shows_no_warnings_new_or_resumed() {
    let env = TestEnv::new().await;
    std::fs::write(env.work_path().join("AGENTS.md"), "Be brief.").expect("AGENTS.md");
    for json in [false, true] {
        env.server.push(answer("hi"));
        let out = env.run(&exec_args(json, &["hello"])).await;
        assert_no_warnings(&out, json);
    }
    env.server.push(answer("again"));
    let out = env
        .run(&exec_args(true, &["resume", "--last", "again"]))
        .await;
    assert_no_warnings(&out, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_agents_md_is_a_warning() {
    let env = TestEnv::new().await;
    let agents = env.work_path().join("AGENTS.md");
    std::fs::write(&agents, "Always answer in French. ".repeat(100)).expect("AGENTS.md");
    for json in [false, true] {
        env.server.push(answer("bonjour"));
        let out = env
            .run(&exec_args(
                json,
                &["-c", "project_doc_max_bytes=64", "hello"],
            ))
            .await;
        assert_warned_once(&out, json, TRUNCATED);
        let shown = if json { &out.stdout } else { &out.stderr };
        assert!(
            shown.contains(&agents.display().to_string()),
            "names the file: {shown}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_line_skipped_on_resume_is_a_warning() {
    let env = TestEnv::new().await;
    env.server.push(answer("first"));
    let first = env.run(&exec_args(true, &["remember apricot"])).await;
    first.assert_success();
    let thread_id = first.thread_id();
    let rollout = env.rollout_file(&thread_id);
    let text = std::fs::read_to_string(&rollout).expect("read rollout");
    let (meta, rest) = text.split_once('\n').expect("two lines");
    std::fs::write(&rollout, format!("{meta}\n{{\"not\": \"a record\"\n{rest}"))
        .expect("damage rollout");

    for json in [false, true] {
        env.server.push(answer("apricot"));
        let out = env
            .run(&exec_args(json, &["resume", &thread_id, "the word?"]))
            .await;
        assert_warned_once(&out, json, SKIPPED_LINE);
        let shown = if json { &out.stdout } else { &out.stderr };
        assert!(
            shown.contains(&rollout.display().to_string()),
            "names the file: {shown}"
        );
    }
    // The rest of the history was kept.
    let requests = env.server.requests();
    assert!(exec_support::request_mentions(
        &requests[2],
        "remember apricot"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuilt_thread_index_is_a_warning() {
    let env = TestEnv::new().await;
    env.server.push(answer("first"));
    let first = env.run(&exec_args(true, &["first thread"])).await;
    assert_no_warnings(&first, true);

    for json in [false, true] {
        remove_index(env.home.path());
        std::fs::write(env.home.path().join(STATE_DB_FILE), b"\x00 not SQLite \xff")
            .expect("garbage index");
        env.server.push(answer("next"));
        let out = env.run(&exec_args(json, &["another thread"])).await;
        assert_warned_once(&out, json, INDEX_REBUILT);
        let shown = if json { &out.stdout } else { &out.stderr };
        assert!(shown.contains("rebuilt it from"), "{shown}");

        // Healed once: the next run has nothing to say.
        env.server.push(answer("quiet"));
        let again = env.run(&exec_args(json, &["quiet thread"])).await;
        assert_no_warnings(&again, json);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_stored_credentials_are_a_warning() {
    let env = TestEnv::new().await;
    // No env_key: the provider's key would come from `interpreter login`'s file.
    env.write_raw_config(&format!(
        "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
         name = \"mock\"\nbase_url = \"{}\"\nwire_api = \"chat\"\nrequest_max_retries = 0\n",
        env.server.base_url()
    ));
    std::fs::write(env.home.path().join(CREDENTIALS_FILE), "{ not json").expect("credentials");
    for json in [false, true] {
        env.server.push(answer("hi"));
        let out = env.run(&exec_args(json, &["hello"])).await;
        assert_warned_once(&out, json, CREDENTIALS);
        let shown = if json { &out.stdout } else { &out.stderr };
        assert!(shown.contains(CREDENTIALS_FILE), "names the file: {shown}");
    }

    std::fs::remove_file(env.home.path().join(CREDENTIALS_FILE)).expect("remove credentials");
    env.server.push(answer("hi"));
    let out = env.run(&exec_args(false, &["hello"])).await;
    assert_no_warnings(&out, false);
}

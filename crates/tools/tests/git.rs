//! The agent's own git, run in a repository whose config the model planted: nothing it
//! names runs.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use interpreter_tools::git;

fn sh(dir: &Path, script: &str) {
    let status = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .status()
        .expect("sh");
    assert!(status.success(), "{script}");
}

/// A repository as a hostile model leaves it: every config hook that runs a program points
/// at a script that leaves a marker file.
fn planted_repository() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().to_path_buf();
    let marker = repo.join("ran");
    std::fs::create_dir_all(&marker).expect("marker dir");
    let planted = format!(
        "#!/bin/sh\ntouch {}/\"$(basename \"$0\")-$$\"\ncat\n",
        marker.display()
    );
    for name in [
        "fsmonitor",
        "clean",
        "textconv",
        "external",
        "hook",
        "pager",
    ] {
        let path = repo.join(format!("{name}.sh"));
        std::fs::write(&path, &planted).expect("script");
        sh(&repo, &format!("chmod +x {}", path.display()));
    }
    sh(
        &repo,
        "git init -q && echo one > a.txt && git add a.txt && git commit -qm one \
         && mkdir hooks && cp hook.sh hooks/post-index-change && cp hook.sh hooks/pre-commit \
         && git config core.fsmonitor \"$PWD/fsmonitor.sh\" \
         && git config filter.evil.clean \"$PWD/clean.sh\" \
         && git config filter.evil.process \"$PWD/clean.sh\" \
         && git config diff.evil.textconv \"$PWD/textconv.sh\" \
         && git config diff.external \"$PWD/external.sh\" \
         && git config core.hooksPath \"$PWD/hooks\" \
         && git config core.pager \"$PWD/pager.sh\" \
         && echo '* filter=evil diff=evil' > .gitattributes \
         && echo two >> a.txt",
    );
    (dir, repo)
}

fn markers(repo: &Path) -> Vec<String> {
    std::fs::read_dir(repo.join("ran"))
        .expect("marker dir")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test]
async fn adversarial_pass_planted_repository_config_runs_nothing() {
    let (_guard, repo) = planted_repository();
    // Without the runner, plain git runs the planted programs: the fixture is armed.
    sh(&repo, "git diff HEAD > /dev/null && git status > /dev/null");
    assert!(!markers(&repo).is_empty(), "the planted config ran nothing");
    std::fs::remove_dir_all(repo.join("ran")).expect("clear markers");
    std::fs::create_dir_all(repo.join("ran")).expect("marker dir");

    let timeout = Duration::from_secs(30);
    let head = git::run(&repo, &["rev-parse", "HEAD"], timeout)
        .await
        .expect("rev-parse");
    let diff = git::run(
        &repo,
        &["diff", "--no-color", "--binary", head.trim()],
        timeout,
    )
    .await
    .expect("diff");
    assert!(diff.contains("+two"), "diff: {diff}");
    for args in [
        &["status", "--porcelain"][..],
        &["log", "-p", "-1"][..],
        &["show", "HEAD"][..],
        &["add", "a.txt"][..],
    ] {
        git::run(&repo, args, timeout).await.expect("git");
    }
    assert_eq!(markers(&repo), Vec::<String>::new());
}

#[tokio::test]
async fn a_failing_git_command_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = git::run(dir.path(), &["rev-parse", "HEAD"], Duration::from_secs(30))
        .await
        .expect_err("no repository");
    assert!(
        error.to_string().starts_with("git rev-parse HEAD failed: "),
        "{error}"
    );
}

#[tokio::test]
async fn a_capped_run_stops_git_at_the_cap_and_says_so() {
    let (_guard, repo) = planted_repository();
    let big: String = (0..50_000).map(|n| format!("line {n}\n")).collect();
    std::fs::write(repo.join("a.txt"), big).expect("big change");
    let timeout = Duration::from_secs(30);
    let cut = git::run_capped(&repo, &["diff", "HEAD"], timeout, 4096)
        .await
        .expect("capped diff");
    assert!(cut.cut);
    assert_eq!(cut.stdout.len(), 4096);
    assert!(
        cut.stdout.starts_with("diff --git a/a.txt b/a.txt"),
        "{}",
        cut.stdout
    );
    let whole = git::run_capped(&repo, &["rev-parse", "HEAD"], timeout, 4096)
        .await
        .expect("small output");
    assert!(!whole.cut);
    assert_eq!(whole.stdout.trim().len(), 40);
    let error = git::run_capped(&repo, &["rev-parse", "no-such-ref"], timeout, 4096)
        .await
        .expect_err("a bad ref fails");
    assert!(
        error.to_string().contains("rev-parse no-such-ref failed"),
        "{error}"
    );
    // The hardening holds for capped runs too.
    assert_eq!(markers(&repo), Vec::<String>::new());
}

//! The agent's own git, run in a repository whose config the model planted: nothing it
//! names runs.

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

/// The planted script of [`planted_repository`], as a command for a config value.
fn planted_script(repo: &Path, name: &str) -> String {
    repo.join(format!("{name}.sh")).display().to_string()
}

/// Appends raw `text` (bytes git's own `git config` would not write) to the repository's
/// config.
fn append_config(git_dir: &Path, text: &[u8]) {
    use std::io::Write;
    let mut config = std::fs::OpenOptions::new()
        .append(true)
        .open(git_dir.join("config"))
        .expect("config");
    config.write_all(text).expect("append config");
}

/// `-c filter.NAME.clean=` cannot name a driver whose name holds `=` (git splits at the
/// first one), and a name that is not UTF-8 was once skipped: both are switched off.
#[tokio::test]
async fn adversarial_a_filter_named_with_an_equals_sign_or_stray_bytes_runs_nothing() {
    let (_guard, repo) = planted_repository();
    let clean = planted_script(&repo, "clean");
    let mut config = Vec::new();
    config.extend_from_slice(format!("[filter \"a=b\"]\n\tclean = {clean}\n").as_bytes());
    config.extend_from_slice(b"[filter \"\xff=\"]\n\tclean = ");
    config.extend_from_slice(clean.as_bytes());
    config.extend_from_slice(b"\n");
    append_config(&repo.join(".git"), &config);
    std::fs::write(
        repo.join(".gitattributes"),
        b"*.txt filter=a=b\n*.md filter=\xff=\n",
    )
    .expect("attributes");
    std::fs::write(repo.join("b.md"), "md\n").expect("md");
    // Armed: plain git runs both drivers.
    sh(&repo, "git add a.txt b.md && git reset -q");
    assert!(markers(&repo).len() >= 2, "{:?}", markers(&repo));
    std::fs::remove_dir_all(repo.join("ran")).expect("clear markers");
    std::fs::create_dir_all(repo.join("ran")).expect("marker dir");

    let timeout = Duration::from_secs(30);
    let diff = git::run(&repo, &["diff", "HEAD"], timeout)
        .await
        .expect("diff");
    assert!(diff.contains("+two"), "diff: {diff}");
    git::run(&repo, &["add", "a.txt", "b.md"], timeout)
        .await
        .expect("add");
    git::run(&repo, &["status", "--porcelain"], timeout)
        .await
        .expect("status");
    assert_eq!(markers(&repo), Vec::<String>::new());
}

/// A submodule's git runs with the submodule's own config, which no setting of the
/// superproject reaches: a filter planted in a submodule directory would run on the
/// superproject's diff. The agent's git never enters a submodule.
#[tokio::test]
async fn adversarial_a_filter_planted_in_a_submodule_runs_nothing() {
    let (_guard, repo) = planted_repository();
    let clean = planted_script(&repo, "clean");
    sh(
        &repo,
        &format!(
            "git commit -qam two && mkdir sub && cd sub && git init -q && echo s > s.txt \
             && git add s.txt && git commit -qm s && cd .. && git add sub && git commit -qm sub \
             && printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./sub\\n' > .gitmodules \
             && git config submodule.sub.ignore none \
             && cd sub && git config filter.sub.clean '{clean}' && git config core.fsmonitor '{clean}' \
             && echo '* filter=sub' > .gitattributes"
        ),
    );
    let touch_submodule_file = || {
        // A new mtime with the same size: git must read (and filter) the file to know.
        let file = std::fs::File::options()
            .write(true)
            .open(repo.join("sub/s.txt"))
            .expect("s.txt");
        file.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
            .expect("mtime");
    };
    std::fs::remove_dir_all(repo.join("ran")).expect("clear markers");
    std::fs::create_dir_all(repo.join("ran")).expect("marker dir");
    // Armed: plain git diff in the superproject runs the submodule's filter.
    touch_submodule_file();
    sh(&repo, "git -c core.fsmonitor=false diff HEAD > /dev/null");
    assert!(
        !markers(&repo).is_empty(),
        "the submodule's filter did not run"
    );
    std::fs::remove_dir_all(repo.join("ran")).expect("clear markers");
    std::fs::create_dir_all(repo.join("ran")).expect("marker dir");

    let timeout = Duration::from_secs(30);
    for args in [
        &["diff", "HEAD"][..],
        &["diff", "--no-color", "--binary", "HEAD~1"][..],
        &["status", "--porcelain"][..],
        &["log", "-p", "-2"][..],
        &["show", "HEAD"][..],
        &["ls-files", "-z", "--others", "--exclude-standard"][..],
    ] {
        touch_submodule_file();
        git::run(&repo, args, timeout).await.expect("git");
    }
    assert_eq!(markers(&repo), Vec::<String>::new());
}

/// The runner runs only what it knows how to harden, and no caller can turn the
/// hardening off.
#[tokio::test]
async fn a_subcommand_or_option_that_would_undo_the_hardening_is_refused() {
    let (_guard, repo) = planted_repository();
    let timeout = Duration::from_secs(30);
    for args in [
        &["diff", "--ext-diff"][..],
        &["diff", "--ignore-submodules=none"][..],
        &["log", "--textconv", "-p"][..],
        &["status", "--recurse-submodules"][..],
        &["fetch", "origin"][..],
        &["-c", "core.fsmonitor=x", "status"][..],
    ] {
        let error = git::run(&repo, args, timeout).await.expect_err("refused");
        assert!(error.to_string().contains("was not run"), "{error}");
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

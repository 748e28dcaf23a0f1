//! `interpreter app-server`'s `fs/*` methods over the real binary: every method's happy
//! path and errors, `fs/watch` notifications, and the confinement rule against hostile
//! requests (symlinks out of the workspace, `..`, relative paths, a read-only sandbox,
//! the agent's home, `.git`, removing a root, copying in from outside, huge files, FIFOs).
//! Each hostile test makes the attack and fails if it worked.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::app_server_support::{AppClient, AppEnv, READ_DEADLINE, RenameLoop, wait_for_stderr};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use interpreter_test_support::process::JsonLinesProcess;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

/// Workspace-write with only the workspace writable: `/tmp` (where the test's other
/// directories live) stays outside the roots.
const WORKSPACE_WRITE: &str = "sandbox_mode = \"workspace-write\"\n[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n";

/// The largest file `fs/readFile` returns.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

async fn started(config: &str) -> (AppEnv, AppClient) {
    let env = AppEnv::with_config(config).await;
    let mut client = env.spawn();
    client.initialize().await;
    (env, client)
}

fn s(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn b64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// The error of a response that must have failed, with its code.
fn error_of(response: &Value) -> (i64, String) {
    let error = response
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {response}"));
    (
        error["code"].as_i64().expect("code"),
        error["message"].as_str().expect("message").to_string(),
    )
}

/// `method` must be refused with `-32600` and a message containing `reason`.
async fn refused(client: &mut AppClient, method: &str, params: Value, reason: &str) -> String {
    let response = client.call(method, params.clone()).await;
    let (code, message) = error_of(&response);
    assert_eq!(code, -32600, "{method} {params}: {message}");
    assert!(
        message.contains(reason),
        "{method} {params}: expected {reason:?} in {message:?}"
    );
    message
}

async fn read(client: &mut AppClient, path: &Path) -> Vec<u8> {
    let result = client.ok("fs/readFile", json!({"path": s(path)})).await;
    BASE64
        .decode(result["dataBase64"].as_str().expect("dataBase64"))
        .expect("base64")
}

/// An outside directory (not under any root) holding `secret.txt`.
fn outside_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("outside");
    let path = dir.path().canonicalize().expect("canonical");
    std::fs::write(path.join("secret.txt"), "outside secret").expect("write secret");
    (dir, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_directories_round_trip_in_the_workspace() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();

    // createDirectory: recursive by default; non-recursive needs the parent.
    let nested = ws.join("a/b/c");
    client
        .ok("fs/createDirectory", json!({"path": s(&nested)}))
        .await;
    assert!(nested.is_dir());
    let (code, _) = error_of(
        &client
            .call(
                "fs/createDirectory",
                json!({"path": s(&ws.join("x/y")), "recursive": false}),
            )
            .await,
    );
    assert_eq!(code, -32603);
    client
        .ok(
            "fs/createDirectory",
            json!({"path": s(&ws.join("flat")), "recursive": false}),
        )
        .await;

    // writeFile / readFile, binary contents, replacing an existing file.
    let file = ws.join("a/data.bin");
    let bytes: Vec<u8> = (0..=255u8).collect();
    let result = client
        .ok(
            "fs/writeFile",
            json!({"path": s(&file), "dataBase64": b64(&bytes)}),
        )
        .await;
    assert_eq!(result, json!({}));
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
    assert_eq!(read(&mut client, &file).await, bytes);
    client
        .ok(
            "fs/writeFile",
            json!({"path": s(&file), "dataBase64": b64(b"second")}),
        )
        .await;
    assert_eq!(read(&mut client, &file).await, b"second");
    refused(
        &mut client,
        "fs/writeFile",
        json!({"path": s(&file), "dataBase64": "not base64!"}),
        "not valid base64",
    )
    .await;
    // Missing file: an I/O error (-32603), as Codex.
    let (code, message) = error_of(
        &client
            .call("fs/readFile", json!({"path": s(&ws.join("missing.txt"))}))
            .await,
    );
    assert_eq!(code, -32603);
    assert!(message.contains("missing.txt"), "{message}");
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&ws.join("a"))}),
        "not a regular file",
    )
    .await;

    // getMetadata: file, directory, symlink.
    symlink(&file, ws.join("link.bin")).unwrap();
    let meta = client.ok("fs/getMetadata", json!({"path": s(&file)})).await;
    assert_eq!(meta["isFile"], true);
    assert_eq!(meta["isDirectory"], false);
    assert_eq!(meta["isSymlink"], false);
    assert!(meta["modifiedAtMs"].as_i64().unwrap() > 0);
    assert!(meta["createdAtMs"].as_i64().is_some());
    let meta = client
        .ok("fs/getMetadata", json!({"path": s(&ws.join("a"))}))
        .await;
    assert_eq!(
        (meta["isFile"].clone(), meta["isDirectory"].clone()),
        (json!(false), json!(true))
    );
    let meta = client
        .ok("fs/getMetadata", json!({"path": s(&ws.join("link.bin"))}))
        .await;
    assert_eq!(
        (meta["isFile"].clone(), meta["isSymlink"].clone()),
        (json!(true), json!(true))
    );

    // readDirectory: direct children, names only.
    let listing = client
        .ok("fs/readDirectory", json!({"path": s(&ws.join("a"))}))
        .await;
    assert_eq!(
        listing,
        json!({"entries": [
            {"fileName": "b", "isDirectory": true, "isFile": false},
            {"fileName": "data.bin", "isDirectory": false, "isFile": true},
        ]})
    );

    // copy: a file; a directory needs `recursive`.
    let copied = ws.join("copy.bin");
    client
        .ok(
            "fs/copy",
            json!({"sourcePath": s(&file), "destinationPath": s(&copied)}),
        )
        .await;
    assert_eq!(std::fs::read(&copied).unwrap(), b"second");
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("a")), "destinationPath": s(&ws.join("a2"))}),
        "recursive: true",
    )
    .await;
    client
        .ok(
            "fs/copy",
            json!({"sourcePath": s(&ws.join("a")), "destinationPath": s(&ws.join("a2")), "recursive": true}),
        )
        .await;
    assert_eq!(std::fs::read(ws.join("a2/data.bin")).unwrap(), b"second");
    assert!(ws.join("a2/b/c").is_dir());
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("a")), "destinationPath": s(&ws.join("a/b/inner")), "recursive": true}),
        "cannot be copied into itself",
    )
    .await;

    // remove: a symlink goes, not its target; trees recursively by default; a missing
    // path is fine unless `force: false`.
    client
        .ok("fs/remove", json!({"path": s(&ws.join("link.bin"))}))
        .await;
    assert!(std::fs::symlink_metadata(ws.join("link.bin")).is_err());
    assert!(file.is_file());
    let (code, _) = error_of(
        &client
            .call(
                "fs/remove",
                json!({"path": s(&ws.join("a2")), "recursive": false}),
            )
            .await,
    );
    assert_eq!(code, -32603);
    client
        .ok("fs/remove", json!({"path": s(&ws.join("a2"))}))
        .await;
    assert!(!ws.join("a2").exists());
    client
        .ok("fs/remove", json!({"path": s(&ws.join("never-there"))}))
        .await;
    let (code, _) = error_of(
        &client
            .call(
                "fs/remove",
                json!({"path": s(&ws.join("never-there")), "force": false}),
            )
            .await,
    );
    assert_eq!(code, -32603);

    // Params that do not decode.
    let (code, _) = error_of(&client.call("fs/readFile", json!({})).await);
    assert_eq!(code, -32602);
}

/// The number of inotify instances the process `pid` holds open.
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|target| target.to_string_lossy().contains("inotify"))
                })
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_report_changes_until_unwatched() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    std::fs::create_dir(ws.join("watched")).unwrap();
    let (_outside, outside) = outside_dir();

    let result = client
        .ok(
            "fs/watch",
            json!({"watchId": "w1", "path": s(&ws.join("watched"))}),
        )
        .await;
    assert_eq!(result, json!({"path": s(&ws.join("watched"))}));
    refused(
        &mut client,
        "fs/watch",
        json!({"watchId": "w1", "path": s(&ws)}),
        "watchId already exists: w1",
    )
    .await;
    refused(
        &mut client,
        "fs/watch",
        json!({"watchId": "w2", "path": s(&outside)}),
        "outside the workspace",
    )
    .await;

    let changed = ws.join("watched/new.txt");
    client
        .ok(
            "fs/writeFile",
            json!({"path": s(&changed), "dataBase64": b64(b"hi")}),
        )
        .await;
    let notification = client.notification("fs/changed").await;
    assert_eq!(notification["params"]["watchId"], "w1");
    let paths: Vec<String> = notification["params"]["changedPaths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert!(paths.contains(&s(&changed)), "{paths:?}");
    assert!(
        paths.iter().all(|p| p.starts_with(&s(&ws.join("watched")))),
        "{paths:?}"
    );

    // Unwatched (and an unknown id is fine): nothing more arrives.
    assert_eq!(
        client.ok("fs/unwatch", json!({"watchId": "w1"})).await,
        json!({})
    );
    client.ok("fs/unwatch", json!({"watchId": "unknown"})).await;
    client.seen.retain(|m| m["method"] != "fs/changed");
    std::fs::write(ws.join("watched/after.txt"), "x").unwrap();
    let id = client.request("config/read", json!({})).await;
    // Let the debounce window pass before the probe's response is awaited.
    tokio::time::sleep(Duration::from_millis(800)).await;
    client.response(id).await;
    let again = client.request("config/read", json!({})).await;
    client.response(again).await;
    assert!(
        !client.seen.iter().any(|m| m["method"] == "fs/changed"),
        "fs/changed after fs/unwatch: {:?}",
        client.seen
    );

    // A watched file is followed across replacements (fs/writeFile renames over it);
    // its siblings are not reported.
    let file = ws.join("watched/file.txt");
    std::fs::write(&file, "one").unwrap();
    client
        .ok("fs/watch", json!({"watchId": "file", "path": s(&file)}))
        .await;
    for contents in [b"two".as_slice(), b"three".as_slice()] {
        std::fs::write(ws.join("watched/sibling.txt"), "x").unwrap();
        client
            .ok(
                "fs/writeFile",
                json!({"path": s(&file), "dataBase64": b64(contents)}),
            )
            .await;
        let notification = client.notification("fs/changed").await;
        assert_eq!(notification["params"]["watchId"], "file");
        assert_eq!(
            notification["params"]["changedPaths"],
            json!([s(&file)]),
            "{notification}"
        );
    }
    client.ok("fs/unwatch", json!({"watchId": "file"})).await;

    // At most 64 watches per connection.
    for n in 0..64 {
        client
            .ok(
                "fs/watch",
                json!({"watchId": format!("many-{n}"), "path": s(&ws)}),
            )
            .await;
    }
    refused(
        &mut client,
        "fs/watch",
        json!({"watchId": "one-too-many", "path": s(&ws)}),
        "at most 64 watches",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_end_when_their_connection_closes() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let socket = env.home.path().join("fs.sock");
    let server = JsonLinesProcess::spawn(
        env.command(&["--listen", &format!("unix://{}", socket.display())]),
    )
    .expect("spawn");
    wait_for_stderr(&server, "listening on unix://").await;
    let pid = server.pid().expect("pid");
    let before = inotify_instances(pid);

    let mut first = AppClient::connect_unix(server, &socket).await;
    first.initialize().await;
    first
        .ok("fs/watch", json!({"watchId": "w", "path": s(&ws)}))
        .await;
    assert_eq!(inotify_instances(pid), before + 1);
    let server = first.server.take().expect("server");
    drop(first);

    let deadline = tokio::time::Instant::now() + READ_DEADLINE;
    while inotify_instances(pid) > before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed connection's watcher is still open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Watch ids are per connection: a new client may reuse the id.
    let mut second = AppClient::connect_unix(server, &socket).await;
    second.initialize().await;
    second
        .ok("fs/watch", json!({"watchId": "w", "path": s(&ws)}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_symlinks_out_of_the_workspace_are_refused() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let (_outside, outside) = outside_dir();
    symlink(outside.join("secret.txt"), ws.join("link.txt")).unwrap();
    symlink(&outside, ws.join("dir-link")).unwrap();
    symlink(outside.join("planted.txt"), ws.join("dangling")).unwrap();

    for path in [ws.join("link.txt"), ws.join("dir-link/secret.txt")] {
        refused(
            &mut client,
            "fs/readFile",
            json!({"path": s(&path)}),
            "outside the workspace",
        )
        .await;
        refused(
            &mut client,
            "fs/getMetadata",
            json!({"path": s(&path)}),
            "outside the workspace",
        )
        .await;
        refused(
            &mut client,
            "fs/writeFile",
            json!({"path": s(&path), "dataBase64": b64(b"pwned")}),
            "outside the workspace",
        )
        .await;
        refused(
            &mut client,
            "fs/copy",
            json!({"sourcePath": s(&path), "destinationPath": s(&ws.join("stolen.txt"))}),
            "outside the workspace",
        )
        .await;
    }
    // Writing through a dangling link would create the outside file; through a linked
    // directory, a new outside file.
    for path in [ws.join("dangling"), ws.join("dir-link/new.txt")] {
        refused(
            &mut client,
            "fs/writeFile",
            json!({"path": s(&path), "dataBase64": b64(b"pwned")}),
            "outside the workspace",
        )
        .await;
    }
    refused(
        &mut client,
        "fs/createDirectory",
        json!({"path": s(&ws.join("dir-link/made"))}),
        "outside the workspace",
    )
    .await;
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws.join("dir-link/secret.txt"))}),
        "outside the workspace",
    )
    .await;
    refused(
        &mut client,
        "fs/readDirectory",
        json!({"path": s(&ws.join("dir-link"))}),
        "outside the workspace",
    )
    .await;
    refused(
        &mut client,
        "fs/watch",
        json!({"watchId": "w", "path": s(&ws.join("dir-link"))}),
        "outside the workspace",
    )
    .await;
    // The listing of the workspace does not reveal what the links lead to.
    let listing = client.ok("fs/readDirectory", json!({"path": s(&ws)})).await;
    for entry in listing["entries"].as_array().unwrap() {
        if entry["fileName"] == "link.txt" || entry["fileName"] == "dir-link" {
            assert_eq!(entry["isFile"], false, "{entry}");
            assert_eq!(entry["isDirectory"], false, "{entry}");
        }
    }

    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "outside secret"
    );
    assert!(!outside.join("planted.txt").exists());
    assert!(!outside.join("new.txt").exists());
    assert!(!outside.join("made").exists());
    assert!(!ws.join("stolen.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_dotdot_and_relative_paths_are_refused() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let (_outside, outside) = outside_dir();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("inside.txt"), "inside").unwrap();

    // `..` out of the workspace, however deep it starts.
    let mut escape = ws.join("sub");
    for _ in 0..outside.components().count() + 3 {
        escape.push("..");
    }
    let escape = escape
        .join(outside.strip_prefix("/").unwrap())
        .join("secret.txt");
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&escape)}),
        "contains `..`",
    )
    .await;
    refused(
        &mut client,
        "fs/writeFile",
        json!({"path": s(&ws.join("sub/../../escaped.txt")), "dataBase64": b64(b"x")}),
        "contains `..`",
    )
    .await;
    // Even a `..` that would stay inside.
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&ws.join("sub/../inside.txt"))}),
        "contains `..`",
    )
    .await;
    // Relative paths, resolved against nothing.
    for path in ["inside.txt", "./inside.txt", "sub", ""] {
        refused(
            &mut client,
            "fs/readFile",
            json!({"path": path}),
            "not an absolute path",
        )
        .await;
    }
    refused(
        &mut client,
        "fs/writeFile",
        json!({"path": "relative.txt", "dataBase64": b64(b"x")}),
        "not an absolute path",
    )
    .await;
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&outside.join("secret.txt"))}),
        "outside the workspace",
    )
    .await;
    assert!(!ws.parent().unwrap().join("escaped.txt").exists());
    assert!(!ws.join("relative.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_writes_under_a_read_only_sandbox_are_refused() {
    // The default sandbox is read-only.
    let (env, mut client) = started("").await;
    let ws = env.work_path();
    std::fs::write(ws.join("kept.txt"), "original").unwrap();
    std::fs::create_dir(ws.join("dir")).unwrap();

    assert_eq!(read(&mut client, &ws.join("kept.txt")).await, b"original");
    client.ok("fs/readDirectory", json!({"path": s(&ws)})).await;
    for (method, params) in [
        (
            "fs/writeFile",
            json!({"path": s(&ws.join("kept.txt")), "dataBase64": b64(b"changed")}),
        ),
        (
            "fs/writeFile",
            json!({"path": s(&ws.join("new.txt")), "dataBase64": b64(b"new")}),
        ),
        ("fs/createDirectory", json!({"path": s(&ws.join("made"))})),
        ("fs/remove", json!({"path": s(&ws.join("kept.txt"))})),
        ("fs/remove", json!({"path": s(&ws.join("dir"))})),
        (
            "fs/copy",
            json!({"sourcePath": s(&ws.join("kept.txt")), "destinationPath": s(&ws.join("copy.txt"))}),
        ),
    ] {
        refused(&mut client, method, params, "the sandbox is read-only").await;
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("kept.txt")).unwrap(),
        "original"
    );
    assert!(ws.join("dir").is_dir());
    for name in ["new.txt", "made", "copy.txt"] {
        assert!(!ws.join(name).exists(), "{name} was created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_the_agent_home_and_git_internals_are_refused() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let home = env.home.path().canonicalize().unwrap();
    std::fs::write(home.join("credentials.json"), "{\"key\":\"secret\"}").unwrap();
    let config_before = std::fs::read_to_string(home.join("config.toml")).unwrap();
    // A link into the home from inside the workspace.
    symlink(&home, ws.join("home-link")).unwrap();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();

    for dir in [home.clone(), ws.join("home-link")] {
        for name in ["config.toml", "credentials.json"] {
            refused(
                &mut client,
                "fs/readFile",
                json!({"path": s(&dir.join(name))}),
                "",
            )
            .await;
            refused(
                &mut client,
                "fs/writeFile",
                json!({"path": s(&dir.join(name)), "dataBase64": b64(b"sandbox_mode = \"danger-full-access\"\n")}),
                "",
            )
            .await;
        }
    }
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&ws.join("home-link/credentials.json"))}),
        "is protected",
    )
    .await;
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("home-link/credentials.json")), "destinationPath": s(&ws.join("stolen.json"))}),
        "is protected",
    )
    .await;
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws.join("home-link"))}),
        "is protected",
    )
    .await;

    // `.git` is readable but stays read-only, as for sandboxed commands.
    assert_eq!(
        read(&mut client, &ws.join(".git/HEAD")).await,
        b"ref: refs/heads/main\n"
    );
    for path in [ws.join(".git/hooks/pre-commit"), ws.join(".git/config")] {
        refused(
            &mut client,
            "fs/writeFile",
            json!({"path": s(&path), "dataBase64": b64(b"#!/bin/sh\ntouch /tmp/pwned\n")}),
            "read-only",
        )
        .await;
    }
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws.join(".git"))}),
        "read-only",
    )
    .await;
    // Copying a repository in would plant its hooks.
    std::fs::create_dir_all(ws.join("vendor-src/.git/hooks")).unwrap();
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("vendor-src")), "destinationPath": s(&ws.join("vendored")), "recursive": true}),
        "does not copy repositories",
    )
    .await;

    assert_eq!(
        std::fs::read_to_string(home.join("config.toml")).unwrap(),
        config_before
    );
    assert_eq!(
        std::fs::read_to_string(home.join("credentials.json")).unwrap(),
        "{\"key\":\"secret\"}"
    );
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(!ws.join(".git/config").exists());
    assert!(!ws.join("stolen.json").exists());
    assert!(!ws.join("vendored").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_removing_a_root_or_slash_is_refused() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    std::fs::write(ws.join("keep.txt"), "keep").unwrap();
    std::fs::create_dir_all(ws.join("nested/.git")).unwrap();

    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws)}),
        "workspace or writable root",
    )
    .await;
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws.join("."))}),
        "workspace or writable root",
    )
    .await;
    refused(&mut client, "fs/remove", json!({"path": "/"}), "").await;
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(ws.parent().unwrap())}),
        "",
    )
    .await;
    // A directory holding a nested repository's `.git` takes it along: refused.
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws.join("nested"))}),
        "which is protected",
    )
    .await;
    // Replacing the workspace by a copy is removal too.
    std::fs::create_dir(ws.join("tree")).unwrap();
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("tree")), "destinationPath": s(&ws), "recursive": true}),
        "",
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "keep"
    );
    assert!(ws.join("nested/.git").is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_copies_from_outside_the_roots_are_refused() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let (_outside, outside) = outside_dir();
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&outside.join("secret.txt")), "destinationPath": s(&ws.join("stolen.txt"))}),
        "outside the workspace",
    )
    .await;
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&outside), "destinationPath": s(&ws.join("stolen-dir")), "recursive": true}),
        "outside the workspace",
    )
    .await;
    // Nor out of it.
    std::fs::write(ws.join("mine.txt"), "mine").unwrap();
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("mine.txt")), "destinationPath": s(&outside.join("dropped.txt"))}),
        "outside the workspace",
    )
    .await;
    // A link to outside inside a copied tree is copied as a link, never followed.
    std::fs::create_dir(ws.join("tree")).unwrap();
    symlink(outside.join("secret.txt"), ws.join("tree/link")).unwrap();
    client
        .ok(
            "fs/copy",
            json!({"sourcePath": s(&ws.join("tree")), "destinationPath": s(&ws.join("tree2")), "recursive": true}),
        )
        .await;
    assert!(
        std::fs::symlink_metadata(ws.join("tree2/link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&ws.join("tree2/link"))}),
        "outside the workspace",
    )
    .await;
    assert!(!ws.join("stolen.txt").exists());
    assert!(!ws.join("stolen-dir").exists());
    assert!(!outside.join("dropped.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_huge_files_and_fifos_are_refused_without_reading_them() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    // Sparse: 1 GiB on paper, nothing on disk.
    let huge = ws.join("huge.bin");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1024 * 1024 * 1024)
        .unwrap();
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&huge)}),
        "over the 64 MiB limit",
    )
    .await;
    let just_over = ws.join("just-over.bin");
    std::fs::File::create(&just_over)
        .unwrap()
        .set_len(MAX_FILE_BYTES + 1)
        .unwrap();
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&just_over)}),
        "65 MiB, over the 64 MiB limit",
    )
    .await;
    // A FIFO would block a plain open forever; a link to a device never ends.
    let fifo = ws.join("fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&fifo)}),
        "FIFO",
    )
    .await;
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&fifo), "destinationPath": s(&ws.join("fifo-copy"))}),
        "FIFO",
    )
    .await;
    refused(
        &mut client,
        "fs/writeFile",
        json!({"path": s(&fifo), "dataBase64": b64(b"x")}),
        "FIFO",
    )
    .await;
    symlink("/dev/zero", ws.join("zero")).unwrap();
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&ws.join("zero"))}),
        "outside the workspace",
    )
    .await;
    // The server still answers.
    client.ok("fs/readDirectory", json!({"path": s(&ws)})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_full_access_still_confines_files_to_the_workspace() {
    let (env, mut client) = started("sandbox_mode = \"danger-full-access\"\n").await;
    let ws = env.work_path();
    let (_outside, outside) = outside_dir();
    client
        .ok(
            "fs/writeFile",
            json!({"path": s(&ws.join("ok.txt")), "dataBase64": b64(b"ok")}),
        )
        .await;
    refused(
        &mut client,
        "fs/writeFile",
        json!({"path": s(&outside.join("dropped.txt")), "dataBase64": b64(b"x")}),
        "outside the workspace",
    )
    .await;
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&outside.join("secret.txt"))}),
        "outside the workspace",
    )
    .await;
    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&env.home.path().join("config.toml"))}),
        "",
    )
    .await;
    assert!(!outside.join("dropped.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_an_agent_home_inside_the_workspace_stays_out_of_reach() {
    let env = AppEnv::with_config(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let home = ws.join("state/agent-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::copy(
        env.home.path().join("config.toml"),
        home.join("config.toml"),
    )
    .unwrap();
    std::fs::write(home.join("credentials.json"), "{\"key\":\"secret\"}").unwrap();
    std::fs::write(ws.join("state/notes.txt"), "notes").unwrap();
    let mut command = env.command(&[]);
    command.env("INTERPRETER_HOME", &home);
    let mut client = env.spawn_command(command);
    client.initialize().await;

    refused(
        &mut client,
        "fs/readFile",
        json!({"path": s(&home.join("credentials.json"))}),
        "is protected",
    )
    .await;
    refused(
        &mut client,
        "fs/writeFile",
        json!({"path": s(&home.join("config.toml")), "dataBase64": b64(b"sandbox_mode = \"danger-full-access\"\n")}),
        "is protected",
    )
    .await;
    refused(
        &mut client,
        "fs/copy",
        json!({"sourcePath": s(&ws.join("state")), "destinationPath": s(&ws.join("state-copy")), "recursive": true}),
        "which is protected",
    )
    .await;
    refused(
        &mut client,
        "fs/remove",
        json!({"path": s(&ws.join("state"))}),
        "which is protected",
    )
    .await;
    // The rest of the directory is the client's as usual.
    assert_eq!(
        read(&mut client, &ws.join("state/notes.txt")).await,
        b"notes"
    );
    assert!(!ws.join("state-copy").exists());
    assert!(home.join("credentials.json").is_file());
    assert!(
        std::fs::read_to_string(home.join("config.toml"))
            .unwrap()
            .contains("mock-model")
    );
}

/// Attack 2 of the fourth adversarial pass, on `fs/*`: while a client writes, creates and
/// removes files in a directory, another process swaps that directory with a symlink to
/// a directory outside in a tight loop. Each request is checked, then done beneath the
/// workspace's descriptor without following any symlink: nothing outside is written or
/// removed, whatever the timing (a request that loses the race fails and says so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adversarial_a_concurrent_rename_loop_never_lands_a_request_outside() {
    let (env, mut client) = started(WORKSPACE_WRITE).await;
    let ws = env.work_path();
    let outside = tempfile::tempdir().expect("outside");
    let outside = std::fs::canonicalize(outside.path()).expect("canonical");
    std::fs::create_dir(ws.join("dir")).expect("dir");
    for index in 0..40 {
        std::fs::write(outside.join(format!("keep{index}")), "outside\n").expect("decoy");
        std::fs::write(ws.join(format!("dir/keep{index}")), "inside\n").expect("file");
    }
    symlink(&outside, ws.join("dir-link")).expect("link");

    let racer = RenameLoop::start(ws.join("dir"), ws.join("dir-link"));
    for index in 0..40 {
        let _ = client
            .call(
                "fs/writeFile",
                json!({"path": s(&ws.join(format!("dir/new{index}"))), "dataBase64": b64(b"x")}),
            )
            .await;
        let _ = client
            .call(
                "fs/createDirectory",
                json!({"path": s(&ws.join(format!("dir/sub{index}/deeper")))}),
            )
            .await;
        let _ = client
            .call(
                "fs/remove",
                json!({"path": s(&ws.join(format!("dir/keep{index}")))}),
            )
            .await;
    }
    let swaps = racer.stop();
    assert!(swaps > 0, "the racer never ran");

    let mut names: Vec<String> = std::fs::read_dir(&outside)
        .expect("outside")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = (0..40).map(|index| format!("keep{index}")).collect();
    expected.sort();
    assert_eq!(names, expected, "requests landed outside the workspace");
    for index in 0..40 {
        assert_eq!(
            std::fs::read_to_string(outside.join(format!("keep{index}"))).expect("decoy"),
            "outside\n"
        );
    }
}

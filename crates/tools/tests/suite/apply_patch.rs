//! apply_patch against a real directory tree.

use std::fs;
use std::path::Path;

use std::collections::HashMap;

use interpreter_protocol::{FileChange, SandboxPolicy};
use interpreter_tools::apply_patch::{PatchError, apply_patch, parse_patch};
use interpreter_tools::sandbox::{RootAnchors, WriteScope};
use pretty_assertions::assert_eq;

fn full_access(cwd: &Path) -> WriteScope {
    WriteScope::new(
        &RootAnchors::new(),
        &SandboxPolicy::DangerFullAccess,
        cwd,
        &HashMap::new(),
        &[],
    )
}

fn apply(text: &str, cwd: &Path) -> Result<String, PatchError> {
    let patch = parse_patch(text)?;
    Ok(apply_patch(&patch, cwd, &full_access(cwd))?.summary())
}

#[test]
fn add_update_delete_in_one_patch() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::write(dir.path().join("keep.txt"), "one\ntwo\nthree\n")?;
    fs::write(dir.path().join("gone.txt"), "bye\n")?;
    let summary = apply(
        "*** Begin Patch\n\
         *** Add File: nested/new.txt\n\
         +hello\n\
         *** Update File: keep.txt\n\
         @@\n one\n-two\n+TWO\n three\n\
         *** Delete File: gone.txt\n\
         *** End Patch\n",
        dir.path(),
    )?;
    assert_eq!(
        summary,
        "Success. Updated the following files:\nA nested/new.txt\nM keep.txt\nD gone.txt"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("nested/new.txt"))?,
        "hello\n"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("keep.txt"))?,
        "one\nTWO\nthree\n"
    );
    assert!(!dir.path().join("gone.txt").exists());
    Ok(())
}

#[test]
fn move_renames_and_edits() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::write(dir.path().join("old.rs"), "fn a() {}\n")?;
    let summary = apply(
        "*** Begin Patch\n*** Update File: old.rs\n*** Move to: src/new.rs\n@@\n-fn a() {}\n+fn b() {}\n*** End Patch",
        dir.path(),
    )?;
    assert_eq!(
        summary,
        "Success. Updated the following files:\nM src/new.rs"
    );
    assert!(!dir.path().join("old.rs").exists());
    assert_eq!(
        fs::read_to_string(dir.path().join("src/new.rs"))?,
        "fn b() {}\n"
    );
    Ok(())
}

#[test]
fn end_of_file_anchor_edits_the_last_occurrence() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::write(dir.path().join("f.txt"), "}\nmiddle\n}\n")?;
    apply(
        "*** Begin Patch\n*** Update File: f.txt\n@@\n-}\n+}\n+// end\n*** End of File\n*** End Patch",
        dir.path(),
    )?;
    assert_eq!(
        fs::read_to_string(dir.path().join("f.txt"))?,
        "}\nmiddle\n}\n// end\n"
    );
    Ok(())
}

#[test]
fn fuzzy_whitespace_and_punctuation_match() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::write(
        dir.path().join("f.py"),
        "def f():\n    x = 1   \n    s = \u{201C}quoted\u{201D} \u{2014} done\n",
    )?;
    apply(
        "*** Begin Patch\n*** Update File: f.py\n@@ def f():\n-x = 1\n-    s = \"quoted\" - done\n+    x = 2\n+    s = 'plain'\n*** End Patch",
        dir.path(),
    )?;
    assert_eq!(
        fs::read_to_string(dir.path().join("f.py"))?,
        "def f():\n    x = 2\n    s = 'plain'\n"
    );
    Ok(())
}

#[test]
fn a_bad_hunk_leaves_the_disk_untouched() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::write(dir.path().join("a.txt"), "alpha\n")?;
    fs::write(dir.path().join("b.txt"), "beta\n")?;
    let result = apply(
        "*** Begin Patch\n\
         *** Add File: c.txt\n+new\n\
         *** Update File: a.txt\n@@\n-alpha\n+ALPHA\n\
         *** Delete File: b.txt\n\
         *** Update File: b.txt\n@@\n-not there\n+x\n\
         *** End Patch",
        dir.path(),
    );
    let Err(error) = result else {
        panic!("patch should fail");
    };
    let message = error.to_string();
    assert!(message.contains("b.txt"), "{message}");

    let result = apply(
        "*** Begin Patch\n\
         *** Add File: c.txt\n+new\n\
         *** Update File: a.txt\n@@\n-alpha\n+ALPHA\n\
         *** Update File: b.txt\n@@\n-gamma\n+x\n\
         *** End Patch",
        dir.path(),
    );
    let Err(error) = result else {
        panic!("patch should fail");
    };
    assert_eq!(
        error.to_string().lines().take(2).collect::<Vec<_>>(),
        vec!["Failed to find expected lines in b.txt:", "gamma"]
    );
    assert!(!dir.path().join("c.txt").exists());
    assert_eq!(fs::read_to_string(dir.path().join("a.txt"))?, "alpha\n");
    assert_eq!(fs::read_to_string(dir.path().join("b.txt"))?, "beta\n");
    Ok(())
}

#[test]
fn updating_a_missing_file_names_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let Err(error) = apply(
        "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch",
        dir.path(),
    ) else {
        panic!("should fail");
    };
    assert!(error.to_string().contains("nope.txt"), "{error}");
    Ok(())
}

#[test]
fn heredoc_wrapped_patch_applies() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    apply(
        "<<'EOF'\n*** Begin Patch\n*** Add File: h.txt\n+heredoc\n*** End Patch\nEOF\n",
        dir.path(),
    )?;
    assert_eq!(fs::read_to_string(dir.path().join("h.txt"))?, "heredoc\n");
    Ok(())
}

#[test]
fn changes_preview_without_writing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::write(dir.path().join("u.txt"), "a\nb\n")?;
    fs::write(dir.path().join("d.txt"), "doomed\n")?;
    let patch = parse_patch(
        "*** Begin Patch\n\
         *** Add File: n.txt\n+fresh\n\
         *** Delete File: d.txt\n\
         *** Update File: u.txt\n*** Move to: m.txt\n@@\n a\n-b\n+c\n\
         *** End Patch",
    )?;
    let cwd = dir.path();
    assert_eq!(
        patch.affected_paths(cwd),
        vec![
            cwd.join("n.txt"),
            cwd.join("d.txt"),
            cwd.join("u.txt"),
            cwd.join("m.txt")
        ]
    );
    let changes = patch.changes(cwd, &full_access(cwd))?;
    assert_eq!(
        changes.get(&cwd.join("n.txt")),
        Some(&FileChange::Add {
            content: "fresh\n".into()
        })
    );
    assert_eq!(
        changes.get(&cwd.join("d.txt")),
        Some(&FileChange::Delete {
            content: "doomed\n".into()
        })
    );
    let Some(FileChange::Update {
        unified_diff,
        move_path,
    }) = changes.get(&cwd.join("u.txt"))
    else {
        panic!("missing update in {changes:?}");
    };
    assert_eq!(move_path.as_deref(), Some(cwd.join("m.txt").as_path()));
    assert!(unified_diff.contains("-b\n+c\n"), "{unified_diff}");
    assert!(!cwd.join("n.txt").exists());
    assert!(cwd.join("d.txt").exists());
    assert_eq!(fs::read_to_string(cwd.join("u.txt"))?, "a\nb\n");
    Ok(())
}

#[test]
fn absolute_paths_are_allowed() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let target = dir.path().join("abs.txt");
    let text = format!(
        "*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch",
        target.display()
    );
    apply(&text, Path::new("/"))?;
    assert_eq!(fs::read_to_string(target)?, "x\n");
    Ok(())
}

#[cfg(unix)]
fn update_patch(path: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {path}\n@@\n-a\n+b\n*** End Patch\n")
}

#[cfg(unix)]
#[test]
fn a_symlink_to_a_device_is_refused_without_reading_it() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.txt"))?;
    let Err(err) = apply(&update_patch("zero.txt"), dir.path()) else {
        panic!("a patch on /dev/zero applied");
    };
    assert_eq!(
        err.to_string(),
        "Failed to read file to update zero.txt: it is a character device, not a regular file; apply_patch only edits regular files"
    );
    // Writing through it (an added file over the link) is refused as well.
    let Err(err) = apply(
        "*** Begin Patch\n*** Add File: zero.txt\n+x\n*** End Patch\n",
        dir.path(),
    ) else {
        panic!("an added file over /dev/zero was written");
    };
    assert!(err.to_string().contains("a character device"), "{err}");
    Ok(())
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fifo = dir.path().join("pipe.txt");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )?;
    // Without the checks, opening it would wait for a writer forever; a hang fails the
    // test run's own timeout.
    for patch in [
        update_patch("pipe.txt"),
        "*** Begin Patch\n*** Delete File: pipe.txt\n*** End Patch\n".to_string(),
        "*** Begin Patch\n*** Add File: pipe.txt\n+x\n*** End Patch\n".to_string(),
    ] {
        let Err(err) = apply(&patch, dir.path()) else {
            panic!("a patch on a FIFO applied: {patch}");
        };
        assert!(
            err.to_string()
                .contains("it is a FIFO (named pipe), not a regular file"),
            "{err}"
        );
    }
    Ok(())
}

#[test]
fn a_file_over_the_size_cap_is_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let big = fs::File::create(dir.path().join("big.txt"))?;
    // Sparse: no 64 MiB actually written.
    big.set_len(interpreter_tools::apply_patch::MAX_FILE_BYTES + 1)?;
    let Err(err) = apply(
        "*** Begin Patch\n*** Update File: big.txt\n@@\n-a\n+b\n*** End Patch\n",
        dir.path(),
    ) else {
        panic!("a patch on an oversized file applied");
    };
    assert_eq!(
        err.to_string(),
        "Failed to read file to update big.txt: it is 65 MiB, over the 64 MiB limit for a file apply_patch edits; edit it with a command instead"
    );
    Ok(())
}

#[test]
fn a_directory_is_refused() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    fs::create_dir(dir.path().join("sub"))?;
    let Err(err) = apply(
        "*** Begin Patch\n*** Update File: sub\n@@\n-a\n+b\n*** End Patch\n",
        dir.path(),
    ) else {
        panic!("a patch on a directory applied");
    };
    assert!(err.to_string().contains("it is a directory"), "{err}");
    Ok(())
}

/// A second agent on the same workspace swaps a directory with a symlink to the outside
/// in a tight loop (`renameat2(RENAME_EXCHANGE)`) while patches add files in it: every
/// file lands in the workspace or the patch fails; nothing is ever created outside.
#[cfg(target_os = "linux")]
#[test]
fn adversarial_a_directory_swapped_with_a_symlink_while_patching_writes_nothing_outside()
-> anyhow::Result<()> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let tmp = tempfile::tempdir()?;
    let ws = tmp.path().canonicalize()?.join("ws");
    let outside = tmp.path().canonicalize()?.join("outside");
    fs::create_dir_all(ws.join("dir"))?;
    fs::create_dir_all(&outside)?;
    std::os::unix::fs::symlink(&outside, ws.join("swap"))?;
    let policy = SandboxPolicy::WorkspaceWrite {
        writable_roots: vec![],
        network_access: false,
        exclude_tmpdir_env_var: true,
        exclude_slash_tmp: true,
    };
    let scope = WriteScope::new(&RootAnchors::new(), &policy, &ws, &HashMap::new(), &[]);

    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let ws = ws.clone();
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _ = rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    ws.join("dir"),
                    rustix::fs::CWD,
                    ws.join("swap"),
                    rustix::fs::RenameFlags::EXCHANGE,
                );
                swaps += 1;
            }
            swaps
        })
    };
    let mut landed = 0;
    for index in 0..300 {
        let text = format!("*** Begin Patch\n*** Add File: dir/f{index}\n+x\n*** End Patch\n");
        let patch = parse_patch(&text)?;
        if apply_patch(&patch, &ws, &scope).is_ok() {
            landed += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer
        .join()
        .map_err(|_| anyhow::anyhow!("racer panicked"))?;
    let escaped: Vec<_> = fs::read_dir(&outside)?.collect();
    assert!(
        escaped.is_empty(),
        "{} of 300 files were created outside the workspace ({swaps} swaps, {landed} landed)",
        escaped.len()
    );
    assert!(swaps > 0);
    eprintln!("{landed} of 300 patches landed in the workspace, {swaps} swaps");
    Ok(())
}

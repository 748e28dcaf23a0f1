//! `interpreter --version`: the crate version, and the git commit when built from a
//! checkout, so a bug report names exactly what ran.

#[test]
fn version_names_the_release_and_the_commit() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("interpreter {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    let in_checkout = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .is_ok_and(|o| o.status.success());
    if in_checkout {
        assert!(
            text.contains(" ("),
            "a checkout build names its commit: {text}"
        );
    }
}

#[test]
fn completions_and_man_page_are_generated_from_the_command_line_definition() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
            .args(["completion", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("mcp-server") && text.contains("exec"),
            "{shell}: {text}"
        );
    }
    let man = std::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .arg("man")
        .output()
        .unwrap();
    assert!(man.status.success());
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(text.contains(".TH interpreter 1"), "{text}");
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_interpreter"))
        .args(["completion", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

//! Classification tables for command safety and parsing.

use std::path::PathBuf;

use interpreter_protocol::ParsedCommand;
use interpreter_tools::safety::{
    is_dangerous_command, is_known_safe_command, parse_command, shell_argv,
};
use pretty_assertions::assert_eq;

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

#[test]
fn known_safe_table() {
    let safe = [
        "ls -la",
        "cat README.md",
        "pwd",
        "grep -rn foo src",
        "head -n 5 x",
        "wc -l x",
        "which cargo",
        "numfmt 1000",
        "tac f",
        "base64 file",
        "base64 -d file",
        "find . -name *.rs -type f",
        "rg -n foo",
        "rg --files",
        "git status",
        "git log --oneline -5",
        "git diff HEAD~1",
        "git show abc",
        "git branch",
        "git branch -a -v",
        "git branch --list feat*",
        "sed -n 10p f",
        "sed -n 1,20p f",
        "sed -n 3,4p",
        "echo hi",
        "true",
    ];
    for command in safe {
        assert!(
            is_known_safe_command(&words(command)),
            "{command} should be safe"
        );
    }
    let unsafe_commands = [
        "rm -rf /",
        "base64 -o out f",
        "base64 --output=out f",
        "find . -delete",
        "find . -exec rm {} ;",
        "find . -fprint out",
        "rg --pre cat foo",
        "rg -z foo",
        "rg --search-zip foo",
        "git push",
        "git -c core.pager=x log",
        "git branch new-branch",
        "git branch -D main",
        "git diff --output=x",
        "sed -i s/a/b/ f",
        "sed -n 1p f g",
        "sed -n p f",
        "python3 x.py",
        "cargo build",
        "/bin/ls",
        "",
    ];
    for command in unsafe_commands {
        assert!(
            !is_known_safe_command(&words(command)),
            "{command} should not be known-safe"
        );
    }
}

#[test]
fn known_safe_shell_scripts() {
    let safe = [
        "ls && pwd",
        "cat a | wc -l",
        "grep foo x || true; echo done",
        "git status\ngit diff",
        "sed -n '1,5p' 'a file'",
        "echo 'a > b' && echo \"|\"",
    ];
    for script in safe {
        for shell in [
            argv(&["bash", "-lc", script]),
            argv(&["sh", "-c", script]),
            argv(&["zsh", "-lc", script]),
        ] {
            assert!(is_known_safe_command(&shell), "{shell:?} should be safe");
        }
    }
    let unsafe_scripts = [
        "ls > out",
        "cat < in",
        "echo $(rm -rf x)",
        "echo `id`",
        "ls; rm f",
        "(ls)",
        "ls &",
        "echo $HOME",
        "find . '|' cat -delete",
        "cat x | sh",
        "ls *.rs",
        "cd /tmp && python3 x",
    ];
    for script in unsafe_scripts {
        assert!(
            !is_known_safe_command(&argv(&["bash", "-lc", script])),
            "{script} should not be known-safe"
        );
    }
    assert!(!is_known_safe_command(&argv(&[
        "python3", "-c", "print(1)"
    ])));
}

#[test]
fn dangerous_table() {
    let dangerous = [
        argv(&["rm", "-rf", "build"]),
        argv(&["rm", "-f", "x"]),
        argv(&["rm", "--force", "x"]),
        argv(&["rm", "-Rf", "x"]),
        argv(&["sudo", "rm", "-rf", "/"]),
        argv(&["sudo", "-u", "root", "rm", "-fr", "/"]),
        argv(&["env", "FOO=1", "rm", "-f", "x"]),
        argv(&["/bin/rm", "-rf", "x"]),
        argv(&["bash", "-lc", "cd x && rm -rf y"]),
        argv(&["bash", "-lc", "rm -rf $(pwd)/build"]),
        argv(&["sudo", "bash", "-c", "rm -rf /tmp/x"]),
    ];
    for command in dangerous {
        assert!(
            is_dangerous_command(&command),
            "{command:?} should be dangerous"
        );
    }
    let benign = [
        argv(&["rm", "x"]),
        argv(&["rm", "-r", "dir"]),
        argv(&["rm", "--", "-f"]),
        argv(&["ls", "-f"]),
        argv(&["bash", "-lc", "echo rm -rf"]),
        argv(&["git", "rm", "-f", "x"]),
    ];
    for command in benign {
        assert!(
            !is_dangerous_command(&command),
            "{command:?} should not be dangerous"
        );
    }
}

#[test]
fn parse_command_table() {
    let read = |cmd: &str, name: &str, path: &str| ParsedCommand::Read {
        cmd: cmd.into(),
        name: name.into(),
        path: PathBuf::from(path),
    };
    assert_eq!(
        parse_command(&words("cat src/main.rs")),
        vec![read("cat src/main.rs", "main.rs", "src/main.rs")]
    );
    assert_eq!(
        parse_command(&words("head -n 50 a.txt")),
        vec![read("head -n 50 a.txt", "a.txt", "a.txt")]
    );
    assert_eq!(
        parse_command(&words("sed -n 1,20p lib.rs")),
        vec![read("sed -n '1,20p' lib.rs", "lib.rs", "lib.rs")]
    );
    assert_eq!(
        parse_command(&words("ls -la src")),
        vec![ParsedCommand::ListFiles {
            cmd: "ls -la src".into(),
            path: Some("src".into())
        }]
    );
    assert_eq!(
        parse_command(&words("rg --files crates")),
        vec![ParsedCommand::ListFiles {
            cmd: "rg --files crates".into(),
            path: Some("crates".into())
        }]
    );
    assert_eq!(
        parse_command(&words("find . -name x")),
        vec![ParsedCommand::ListFiles {
            cmd: "find . -name x".into(),
            path: Some(".".into())
        }]
    );
    assert_eq!(
        parse_command(&words("rg -n -g *.rs TODO src")),
        vec![ParsedCommand::Search {
            cmd: "rg -n -g '*.rs' TODO src".into(),
            query: Some("TODO".into()),
            path: Some("src".into()),
        }]
    );
    assert_eq!(
        parse_command(&words("grep -rn -e needle .")),
        vec![ParsedCommand::Search {
            cmd: "grep -rn -e needle .".into(),
            query: Some("needle".into()),
            path: Some(".".into()),
        }]
    );
    assert_eq!(
        parse_command(&words("cargo test")),
        vec![ParsedCommand::Unknown {
            cmd: "cargo test".into()
        }]
    );
}

#[test]
fn parse_command_splits_scripts_and_drops_pipe_formatters() {
    let parsed = parse_command(&shell_argv("rg foo src | head -n 20 && cat 'my file.txt'"));
    assert_eq!(
        parsed,
        vec![
            ParsedCommand::Search {
                cmd: "rg foo src".into(),
                query: Some("foo".into()),
                path: Some("src".into())
            },
            ParsedCommand::Read {
                cmd: "cat 'my file.txt'".into(),
                name: "my file.txt".into(),
                path: "my file.txt".into()
            },
        ]
    );
    assert_eq!(
        parse_command(&shell_argv("echo hi > out")),
        vec![ParsedCommand::Unknown {
            cmd: "echo hi > out".into()
        }]
    );
}

#[test]
fn shell_argv_wraps_in_login_bash() {
    assert_eq!(shell_argv("ls -la"), argv(&["bash", "-lc", "ls -la"]));
}

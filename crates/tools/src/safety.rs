//! Reading shell commands before they run: which are known to be read-only, which are
//! obviously destructive, and what they do (for display).
//!
//! Scripts passed as `bash -lc "<script>"` are only understood when they consist of plain
//! words joined by `&&`, `||`, `;` and `|`. Anything else — redirections, substitutions,
//! subshells, globs, variables — makes the script opaque, and an opaque script is never
//! known-safe. The tokenizer here is our own rather than a generic splitter because it
//! must tell a quoted `'|'` (an argument) from a real pipe.

use std::path::{Path, PathBuf};

use interpreter_protocol::ParsedCommand;

/// Commands that only read, whatever their arguments.
const ALWAYS_SAFE: &[&str] = &[
    "cat", "cd", "cut", "echo", "expr", "false", "grep", "head", "id", "ls", "nl", "paste", "pwd",
    "rev", "seq", "stat", "tail", "tr", "true", "uname", "uniq", "wc", "which", "whoami", "numfmt",
    "tac",
];

/// `find` actions that execute programs or write files.
const UNSAFE_FIND_ARGS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf",
];

/// `rg` options that run external programs.
const UNSAFE_RG_ARGS: &[&str] = &["--pre", "--hostname-bin", "--search-zip", "-z"];

/// `git branch` options that change branches rather than list them.
const GIT_BRANCH_MUTATING: &[&str] = &[
    "-d",
    "-D",
    "--delete",
    "-m",
    "-M",
    "--move",
    "-c",
    "-C",
    "--copy",
    "-f",
    "--force",
    "-u",
    "--set-upstream-to",
    "--unset-upstream",
    "--edit-description",
    "-t",
    "--track",
    "--no-track",
    "--create-reflog",
];

/// A separator between commands in a plain script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptOperator {
    And,
    Or,
    Sequence,
    Pipe,
}

/// One command of a plain script and the operator that joined it to the previous one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScriptCommand {
    pub(crate) argv: Vec<String>,
    pub(crate) joined_by: Option<ScriptOperator>,
}

/// The argv the engine runs for a shell command string.
pub fn shell_argv(command: &str) -> Vec<String> {
    vec!["bash".to_string(), "-lc".to_string(), command.to_string()]
}

/// Whether `program` is a POSIX-ish shell whose `-c` script we know how to read (zsh is
/// read as bash).
pub fn is_shell_program(program: &str) -> bool {
    matches!(basename(program), "bash" | "sh" | "zsh")
}

/// True only for commands that cannot modify anything, so they may run without asking
/// even under the `untrusted` approval policy.
pub fn is_known_safe_command(argv: &[String]) -> bool {
    if let Some(script) = shell_script(argv) {
        return match split_plain_script(script) {
            Some(commands) => commands
                .iter()
                .all(|command| is_known_safe_single(&command.argv)),
            None => false,
        };
    }
    is_known_safe_single(argv)
}

/// True for commands that force-delete files (`rm -f`, `rm -rf`, `rm --force`), also
/// behind `sudo`/`env` wrappers and inside shell scripts. These always need approval.
pub fn is_dangerous_command(argv: &[String]) -> bool {
    if let Some(script) = shell_script(argv) {
        let commands = split_plain_script(script).unwrap_or_else(|| loosely_split_script(script));
        return commands
            .iter()
            .any(|command| is_dangerous_command(&command.argv));
    }
    let program_and_args = strip_wrappers(argv);
    if shell_script(program_and_args).is_some() && program_and_args.len() != argv.len() {
        return is_dangerous_command(program_and_args);
    }
    let Some((program, args)) = program_and_args.split_first() else {
        return false;
    };
    if basename(program) != "rm" {
        return false;
    }
    args.iter()
        .take_while(|arg| arg.as_str() != "--")
        .any(|arg| arg == "--force" || is_short_flag_cluster_with(arg, 'f'))
}

/// A best-effort description of what a command does, one entry per sub-command.
pub fn parse_command(argv: &[String]) -> Vec<ParsedCommand> {
    let Some(script) = shell_script(argv) else {
        return vec![parse_single(argv)];
    };
    let Some(commands) = split_plain_script(script) else {
        return vec![ParsedCommand::Unknown {
            cmd: script.to_string(),
        }];
    };
    let parsed: Vec<ParsedCommand> = commands
        .iter()
        // `rg foo | head -n 20` is a search; the pipe tail only trims its output.
        .filter(|command| {
            !(command.joined_by == Some(ScriptOperator::Pipe) && is_output_formatter(&command.argv))
        })
        .map(|command| parse_single(&command.argv))
        .collect();
    if parsed.is_empty() {
        vec![ParsedCommand::Unknown {
            cmd: script.to_string(),
        }]
    } else {
        parsed
    }
}

/// The script of `bash -lc <script>`, `sh -c <script>`, `zsh -lc <script>`.
fn shell_script(argv: &[String]) -> Option<&str> {
    match argv {
        [shell, flag, script] if is_shell_program(shell) && (flag == "-lc" || flag == "-c") => {
            Some(script)
        }
        _ => None,
    }
}

fn basename(program: &str) -> &str {
    Path::new(program)
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or(program)
}

/// `-rf`, `-f`, `-Rf`: a single-dash flag cluster containing `flag`.
fn is_short_flag_cluster_with(arg: &str, flag: char) -> bool {
    arg.len() > 1 && arg.starts_with('-') && !arg.starts_with("--") && arg[1..].contains(flag)
}

fn is_known_safe_single(argv: &[String]) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    let program = program.as_str();
    if ALWAYS_SAFE.contains(&program) {
        return true;
    }
    match program {
        "base64" => !args.iter().any(|arg| {
            arg == "-o" || arg.starts_with("--output") || is_short_flag_cluster_with(arg, 'o')
        }),
        "find" => !args
            .iter()
            .any(|arg| UNSAFE_FIND_ARGS.contains(&arg.as_str())),
        "rg" => !args.iter().any(|arg| {
            UNSAFE_RG_ARGS.contains(&arg.as_str())
                || arg.starts_with("--pre=")
                || arg.starts_with("--hostname-bin=")
                || is_short_flag_cluster_with(arg, 'z')
        }),
        "git" => is_read_only_git(args),
        "sed" => is_sed_print(args),
        _ => false,
    }
}

fn is_read_only_git(args: &[String]) -> bool {
    // Global options (`-c`, `-C`, `--git-dir`, `--exec-path`, ...) can run arbitrary
    // programs or point at other repositories, so the subcommand must come first.
    let Some((subcommand, rest)) = args.split_first() else {
        return false;
    };
    let writes_output_file = |arg: &String| {
        arg.starts_with("--output") || arg.starts_with("--ext-diff") || arg.starts_with("--exec")
    };
    match subcommand.as_str() {
        "status" | "log" | "diff" | "show" => !rest.iter().any(writes_output_file),
        "branch" => {
            if rest.iter().any(|arg| {
                GIT_BRANCH_MUTATING.contains(&arg.as_str())
                    || GIT_BRANCH_MUTATING
                        .iter()
                        .any(|flag| flag.starts_with("--") && arg.starts_with(&format!("{flag}=")))
            }) {
                return false;
            }
            // A bare name creates a branch; names are patterns only with `--list`.
            let listing = rest.iter().any(|arg| arg == "--list" || arg == "-l");
            listing || rest.iter().all(|arg| arg.starts_with('-'))
        }
        _ => false,
    }
}

/// `sed -n 5p [file]` or `sed -n 1,20p [file]`.
fn is_sed_print(args: &[String]) -> bool {
    let (flag, script, file) = match args {
        [flag, script] => (flag, script, None),
        [flag, script, file] => (flag, script, Some(file)),
        _ => return false,
    };
    flag == "-n" && is_line_range_print(script) && file.is_none_or(|file| !file.starts_with('-'))
}

fn is_line_range_print(script: &str) -> bool {
    let Some(range) = script.strip_suffix('p') else {
        return false;
    };
    let is_number = |part: &str| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit());
    match range.split_once(',') {
        Some((start, end)) => is_number(start) && is_number(end),
        None => is_number(range),
    }
}

/// Removes `sudo [opts]`, `env [opts] [NAME=value...]`, `nohup`, `time` prefixes.
fn strip_wrappers(mut argv: &[String]) -> &[String] {
    loop {
        let Some((program, rest)) = argv.split_first() else {
            return argv;
        };
        let (value_options, allow_assignments): (&[&str], bool) = match basename(program) {
            "sudo" => (
                &["-u", "-g", "-h", "-p", "-U", "-C", "-D", "-r", "-t", "-T"],
                false,
            ),
            "env" => (&["-u", "-C", "-S", "--unset", "--chdir"], true),
            "nohup" | "time" | "command" | "exec" => (&[], false),
            _ => return argv,
        };
        let mut index = 0;
        while let Some(arg) = rest.get(index) {
            if arg == "--" {
                index += 1;
                break;
            }
            if value_options.contains(&arg.as_str()) {
                index += 2;
            } else if arg.starts_with('-') || (allow_assignments && arg.contains('=')) {
                index += 1;
            } else {
                break;
            }
        }
        argv = rest.get(index..).unwrap_or(&[]);
    }
}

/// Commands that, at the end of a pipe, only reshape the output for reading.
fn is_output_formatter(argv: &[String]) -> bool {
    let Some((program, args)) = argv.split_first() else {
        return false;
    };
    let reshapes = matches!(
        program.as_str(),
        "head" | "tail" | "wc" | "sort" | "uniq" | "cut" | "tr" | "nl" | "column"
    );
    // With a file operand the command reads that file instead of the pipe.
    reshapes
        && operands(args, &["-n", "-c", "-d", "-f", "-k", "-t"])
            .0
            .is_empty()
}

/// A command line as a person would type it: POSIX-shell quoting of each word, the one
/// rendering every front end shows (approval prompts, events, progress messages).
pub fn display_command(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

fn parse_single(argv: &[String]) -> ParsedCommand {
    let cmd = display_command(argv);
    let Some((program, args)) = argv.split_first() else {
        return ParsedCommand::Unknown { cmd };
    };
    let read = |cmd: String, file: &str| ParsedCommand::Read {
        cmd,
        name: Path::new(file)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.to_string()),
        path: PathBuf::from(file),
    };
    match basename(program) {
        "cat" | "nl" | "tac" => match operands(args, &[]).0.as_slice() {
            [file] => read(cmd, file),
            _ => ParsedCommand::Unknown { cmd },
        },
        "head" | "tail" => match operands(args, &["-n", "-c", "--lines", "--bytes"])
            .0
            .as_slice()
        {
            [file] => read(cmd, file),
            _ => ParsedCommand::Unknown { cmd },
        },
        "sed" => match args {
            [flag, script, file] if flag == "-n" && is_line_range_print(script) => read(cmd, file),
            _ => ParsedCommand::Unknown { cmd },
        },
        "ls" => ParsedCommand::ListFiles {
            path: operands(args, &["-I", "--ignore", "-T", "-w"])
                .0
                .into_iter()
                .next(),
            cmd,
        },
        "find" => ParsedCommand::ListFiles {
            path: args
                .first()
                .filter(|arg| !arg.starts_with('-') && arg.as_str() != "(" && arg.as_str() != "!")
                .cloned(),
            cmd,
        },
        "rg" | "rga" => {
            let (positional, pattern) = operands(args, RG_VALUE_OPTIONS);
            if args.iter().any(|arg| arg == "--files") {
                return ParsedCommand::ListFiles {
                    path: positional.into_iter().next(),
                    cmd,
                };
            }
            search(cmd, positional, pattern)
        }
        "grep" | "egrep" | "fgrep" => {
            let (positional, pattern) = operands(args, GREP_VALUE_OPTIONS);
            search(cmd, positional, pattern)
        }
        _ => ParsedCommand::Unknown { cmd },
    }
}

const RG_VALUE_OPTIONS: &[&str] = &[
    "-e",
    "--regexp",
    "-f",
    "--file",
    "-g",
    "--glob",
    "--iglob",
    "-t",
    "--type",
    "-T",
    "--type-not",
    "-m",
    "--max-count",
    "-A",
    "--after-context",
    "-B",
    "--before-context",
    "-C",
    "--context",
    "-M",
    "--max-columns",
    "-d",
    "--max-depth",
    "-j",
    "--threads",
    "--sort",
    "--sortr",
    "-E",
    "--encoding",
    "-r",
    "--replace",
    "--color",
    "--colors",
    "--type-add",
    "--ignore-file",
    "--max-filesize",
];

const GREP_VALUE_OPTIONS: &[&str] = &[
    "-e",
    "--regexp",
    "-f",
    "--file",
    "-m",
    "--max-count",
    "-A",
    "--after-context",
    "-B",
    "--before-context",
    "-C",
    "--context",
    "-d",
    "--directories",
    "-D",
    "--devices",
    "--include",
    "--exclude",
    "--exclude-dir",
    "--color",
    "--colour",
];

fn search(cmd: String, positional: Vec<String>, pattern: Option<String>) -> ParsedCommand {
    let mut positional = positional.into_iter();
    let query = pattern.or_else(|| positional.next());
    ParsedCommand::Search {
        cmd,
        query,
        path: positional.next(),
    }
}

/// Splits arguments into operands and the value of `-e`/`--regexp` (a search pattern),
/// skipping options and the values of `value_options`.
fn operands(args: &[String], value_options: &[&str]) -> (Vec<String>, Option<String>) {
    let mut positional = Vec::new();
    let mut pattern = None;
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        index += 1;
        if arg == "--" {
            positional.extend(args[index..].iter().cloned());
            break;
        }
        if value_options.contains(&arg.as_str()) {
            let value = args.get(index).cloned();
            index += 1;
            if matches!(arg.as_str(), "-e" | "--regexp") {
                pattern = pattern.or(value);
            }
            continue;
        }
        if let Some(value) = arg.strip_prefix("--regexp=") {
            pattern = pattern.or_else(|| Some(value.to_string()));
            continue;
        }
        if arg.starts_with('-') && arg.len() > 1 {
            continue;
        }
        positional.push(arg.clone());
    }
    (positional, pattern)
}

/// Splits a script made only of plain words and `&&`, `||`, `;`, `|`, newlines into
/// commands. Returns `None` for anything else (redirections, `$`, backticks, subshells,
/// globs, background `&`, unbalanced quotes, empty commands).
pub(crate) fn split_plain_script(script: &str) -> Option<Vec<ScriptCommand>> {
    let mut commands = Vec::new();
    let mut argv: Vec<String> = Vec::new();
    let mut word: Option<String> = None;
    let mut joined_by: Option<ScriptOperator> = None;
    let mut chars = script.chars().peekable();

    fn end_word(word: &mut Option<String>, argv: &mut Vec<String>) {
        if let Some(finished) = word.take() {
            argv.push(finished);
        }
    }

    /// Closes the current command; an operator with no command before it is a syntax
    /// error.
    fn close(
        argv: &mut Vec<String>,
        operator: ScriptOperator,
        joined_by: &mut Option<ScriptOperator>,
        commands: &mut Vec<ScriptCommand>,
    ) -> Option<()> {
        if argv.is_empty() {
            return None;
        }
        commands.push(ScriptCommand {
            argv: std::mem::take(argv),
            joined_by: joined_by.take(),
        });
        *joined_by = Some(operator);
        Some(())
    }

    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => end_word(&mut word, &mut argv),
            '\n' | ';' => {
                end_word(&mut word, &mut argv);
                if c == ';' && chars.peek() == Some(&';') {
                    return None;
                }
                if argv.is_empty() {
                    // Blank lines (also after `&&`) are fine; an empty `;` command is not.
                    if c == ';' {
                        return None;
                    }
                    continue;
                }
                close(
                    &mut argv,
                    ScriptOperator::Sequence,
                    &mut joined_by,
                    &mut commands,
                )?;
            }
            '&' | '|' => {
                end_word(&mut word, &mut argv);
                let operator = match (c, chars.peek()) {
                    ('&', Some('&')) => ScriptOperator::And,
                    ('|', Some('|')) => ScriptOperator::Or,
                    ('|', Some('&')) => return None,
                    ('|', _) => ScriptOperator::Pipe,
                    _ => return None,
                };
                if operator != ScriptOperator::Pipe {
                    chars.next();
                }
                close(&mut argv, operator, &mut joined_by, &mut commands)?;
            }
            '\'' => {
                let text = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => text.push(other),
                    }
                }
            }
            '"' => {
                let text = word.get_or_insert_with(String::new);
                loop {
                    match chars.next()? {
                        '"' => break,
                        '$' | '`' => return None,
                        '\\' => match chars.next()? {
                            '\n' => {}
                            escaped @ ('$' | '`' | '"' | '\\') => text.push(escaped),
                            other => {
                                text.push('\\');
                                text.push(other);
                            }
                        },
                        other => text.push(other),
                    }
                }
            }
            '\\' => match chars.next()? {
                '\n' => end_word(&mut word, &mut argv),
                escaped => word.get_or_insert_with(String::new).push(escaped),
            },
            '#' if word.is_none() => return None,
            '<' | '>' | '(' | ')' | '{' | '}' | '$' | '`' | '*' | '?' | '[' | '!' => return None,
            other => word.get_or_insert_with(String::new).push(other),
        }
    }
    end_word(&mut word, &mut argv);
    if argv.is_empty() {
        // Trailing `;`/newline is fine; a trailing `&&`, `||` or `|` is not.
        let dangling = matches!(
            joined_by,
            Some(ScriptOperator::And | ScriptOperator::Or | ScriptOperator::Pipe)
        );
        if dangling || commands.is_empty() {
            return None;
        }
    } else {
        commands.push(ScriptCommand { argv, joined_by });
    }
    Some(commands)
}

/// A permissive split used only to look for danger in scripts we cannot fully read:
/// errs towards finding more commands, never fewer.
fn loosely_split_script(script: &str) -> Vec<ScriptCommand> {
    let words = shlex::split(script)
        .unwrap_or_else(|| script.split_whitespace().map(str::to_string).collect());
    let mut commands = Vec::new();
    let mut argv = Vec::new();
    for word in words {
        let is_separator = matches!(word.as_str(), "&&" | "||" | ";" | "|" | "&")
            || word.chars().all(|c| "&|;()".contains(c));
        if is_separator {
            if !argv.is_empty() {
                commands.push(ScriptCommand {
                    argv: std::mem::take(&mut argv),
                    joined_by: None,
                });
            }
            continue;
        }
        let trimmed = word.trim_matches(|c| "();&|`".contains(c));
        if !trimmed.is_empty() {
            argv.push(trimmed.trim_start_matches("$(").to_string());
        }
        if word.ends_with(';') && !argv.is_empty() {
            commands.push(ScriptCommand {
                argv: std::mem::take(&mut argv),
                joined_by: None,
            });
        }
    }
    if !argv.is_empty() {
        commands.push(ScriptCommand {
            argv,
            joined_by: None,
        });
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn words(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    fn split(script: &str) -> Option<Vec<Vec<String>>> {
        split_plain_script(script)
            .map(|commands| commands.into_iter().map(|command| command.argv).collect())
    }

    #[test]
    fn splits_plain_scripts_on_operators() {
        assert_eq!(
            split("ls -la && cat 'a b' | wc -l; echo \"x|y\" || true\npwd"),
            Some(vec![
                words(&["ls", "-la"]),
                words(&["cat", "a b"]),
                words(&["wc", "-l"]),
                words(&["echo", "x|y"]),
                words(&["true"]),
                words(&["pwd"]),
            ])
        );
        assert_eq!(split("ls;"), Some(vec![words(&["ls"])]));
        assert_eq!(split("echo ''"), Some(vec![words(&["echo", ""])]));
        assert_eq!(split("echo a\\ b"), Some(vec![words(&["echo", "a b"])]));
    }

    #[test]
    fn joined_by_records_the_operator() {
        let Some(commands) = split_plain_script("a | b && c") else {
            panic!("should split");
        };
        let operators: Vec<_> = commands.iter().map(|c| c.joined_by).collect();
        assert_eq!(
            operators,
            vec![None, Some(ScriptOperator::Pipe), Some(ScriptOperator::And)]
        );
    }

    #[test]
    fn rejects_anything_but_plain_words() {
        for script in [
            "",
            "ls > out",
            "cat < in",
            "echo $(rm -rf /)",
            "echo `id`",
            "echo $HOME",
            "echo \"$HOME\"",
            "(ls)",
            "{ ls; }",
            "ls &",
            "ls *.rs",
            "ls && ",
            "&& ls",
            "ls || || pwd",
            "echo 'unterminated",
            "ls |& cat",
            "case x in a) ;; esac",
            "# comment",
            "! ls",
            "ls ;; pwd",
            "; ls",
        ] {
            assert_eq!(split(script), None, "{script:?}");
        }
    }
}

//! Parsing the `*** Begin Patch` … `*** End Patch` format into [`Patch`] hunks.
//!
//! The parser is deliberately lenient about the envelope (surrounding whitespace,
//! whitespace around markers, a heredoc wrapper, blank context lines that lost their
//! leading space) because models produce all of these; it is strict about anything that
//! would make the edit ambiguous.

use std::path::PathBuf;

use super::{Hunk, Patch, PatchError, UpdateChunk};

const BEGIN_PATCH: &str = "*** Begin Patch";
const END_PATCH: &str = "*** End Patch";
const ADD_FILE: &str = "*** Add File: ";
const DELETE_FILE: &str = "*** Delete File: ";
const UPDATE_FILE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";
const CONTEXT_MARKER: &str = "@@";

/// Parses patch text. Line numbers in errors are 1-based within the patch (after any
/// heredoc wrapper was removed).
pub fn parse_patch(text: &str) -> Result<Patch, PatchError> {
    let lines: Vec<&str> = strip_heredoc(text.trim()).lines().collect();
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return Err(parse_error(1, "the patch is empty"));
    };
    if first.trim() != BEGIN_PATCH {
        return Err(parse_error(
            1,
            format!("the first line of the patch must be '{BEGIN_PATCH}', found '{first}'"),
        ));
    }
    if lines.len() < 2 || last.trim() != END_PATCH {
        return Err(parse_error(
            lines.len(),
            format!("the last line of the patch must be '{END_PATCH}', found '{last}'"),
        ));
    }

    let body = &lines[1..lines.len() - 1];
    let mut parser = Parser {
        lines: body,
        next: 0,
    };
    let mut hunks = Vec::new();
    while parser.next < body.len() {
        if body[parser.next].trim().is_empty() {
            parser.next += 1;
            continue;
        }
        hunks.push(parser.hunk()?);
    }
    if hunks.is_empty() {
        return Err(parse_error(1, "the patch contains no file operations"));
    }
    Ok(Patch { hunks })
}

/// Removes a `<<EOF` / `<<'EOF'` / `<<"EOF"` … `EOF` wrapper (possibly preceded by a
/// command word such as `apply_patch`), if present.
pub(crate) fn strip_heredoc(text: &str) -> &str {
    let Some((first_line, rest)) = text.split_once('\n') else {
        return text;
    };
    let Some(delimiter) = heredoc_delimiter(first_line) else {
        return text;
    };
    let rest = rest.trim_end();
    match rest.rsplit_once('\n') {
        Some((body, last)) if last.trim() == delimiter => body,
        None if rest.trim() == delimiter => "",
        _ => text,
    }
}

/// The delimiter word of a heredoc opener like `apply_patch <<'EOF'` or `<<-"END"`.
pub(crate) fn heredoc_delimiter(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.starts_with("***") {
        return None;
    }
    let (_, after) = line.split_once("<<")?;
    let after = after.strip_prefix('-').unwrap_or(after).trim();
    let word = ['\'', '"']
        .iter()
        .find_map(|quote| {
            after
                .strip_prefix(*quote)
                .and_then(|inner| inner.strip_suffix(*quote))
        })
        .unwrap_or(after);
    let valid = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then_some(word)
}

fn parse_error(line: usize, message: impl Into<String>) -> PatchError {
    PatchError::Parse {
        line,
        message: message.into(),
    }
}

struct Parser<'a> {
    lines: &'a [&'a str],
    next: usize,
}

impl Parser<'_> {
    /// 1-based line number in the full patch (the `*** Begin Patch` line is line 1).
    fn line_number(&self, index: usize) -> usize {
        index + 2
    }

    fn hunk(&mut self) -> Result<Hunk, PatchError> {
        let index = self.next;
        let header = self.lines[index].trim();
        self.next += 1;
        if let Some(path) = header.strip_prefix(ADD_FILE.trim_end()) {
            let path = self.path(index, path)?;
            return Ok(self.add_hunk(path));
        }
        if let Some(path) = header.strip_prefix(DELETE_FILE.trim_end()) {
            let path = self.path(index, path)?;
            return Ok(Hunk::Delete { path });
        }
        if let Some(path) = header.strip_prefix(UPDATE_FILE.trim_end()) {
            let path = self.path(index, path)?;
            return self.update_hunk(index, path);
        }
        Err(parse_error(
            self.line_number(index),
            format!(
                "'{header}' is not a valid hunk header; expected '{ADD_FILE}<path>', \
                 '{DELETE_FILE}<path>' or '{UPDATE_FILE}<path>'"
            ),
        ))
    }

    fn path(&self, index: usize, raw: &str) -> Result<PathBuf, PatchError> {
        let path = raw.trim();
        if path.is_empty() {
            return Err(parse_error(
                self.line_number(index),
                "the hunk header names no file",
            ));
        }
        Ok(PathBuf::from(path))
    }

    fn at_hunk_header(&self) -> bool {
        self.lines.get(self.next).is_some_and(|line| {
            let line = line.trim();
            [ADD_FILE, DELETE_FILE, UPDATE_FILE]
                .iter()
                .any(|marker| line.starts_with(marker.trim_end()))
        })
    }

    fn add_hunk(&mut self, path: PathBuf) -> Hunk {
        let mut contents = String::new();
        while self.next < self.lines.len() && !self.at_hunk_header() {
            let line = self.lines[self.next];
            if let Some(content) = line.strip_prefix('+') {
                contents.push_str(content);
                contents.push('\n');
            } else if !line.trim().is_empty() {
                // Not part of this hunk; let the caller report it as a bad header.
                break;
            }
            self.next += 1;
        }
        Hunk::Add { path, contents }
    }

    fn update_hunk(&mut self, header_index: usize, path: PathBuf) -> Result<Hunk, PatchError> {
        let mut move_path = None;
        if let Some(line) = self.lines.get(self.next)
            && let Some(dest) = line.trim().strip_prefix(MOVE_TO.trim_end())
        {
            move_path = Some(self.path(self.next, dest)?);
            self.next += 1;
        }

        let mut chunks: Vec<UpdateChunk> = Vec::new();
        let mut current = UpdateChunk::default();
        while self.next < self.lines.len() && !self.at_hunk_header() {
            let index = self.next;
            let line = self.lines[index];
            self.next += 1;
            let trimmed = line.trim();
            if trimmed == END_OF_FILE {
                current.is_end_of_file = true;
                chunks.push(std::mem::take(&mut current));
                continue;
            }
            if let Some(context) = trimmed.strip_prefix(CONTEXT_MARKER) {
                if current.has_changes() {
                    chunks.push(std::mem::take(&mut current));
                }
                let context = context.trim();
                if !context.is_empty() {
                    current.context.push(context.to_string());
                }
                continue;
            }
            match line.chars().next() {
                Some(' ') => {
                    current.old_lines.push(line[1..].to_string());
                    current.new_lines.push(line[1..].to_string());
                }
                Some('-') => current.old_lines.push(line[1..].to_string()),
                Some('+') => current.new_lines.push(line[1..].to_string()),
                // Editors and models often strip the lone space of a blank context line.
                None => {
                    current.old_lines.push(String::new());
                    current.new_lines.push(String::new());
                }
                Some(_) if trimmed.is_empty() => {
                    current.old_lines.push(String::new());
                    current.new_lines.push(String::new());
                }
                Some(_) => {
                    return Err(parse_error(
                        self.line_number(index),
                        format!(
                            "unexpected line '{line}' in the update of {}: every line of \
                             a change must start with ' ' (context), '-' (remove) or '+' (add), \
                             or be an '@@' context marker",
                            path.display()
                        ),
                    ));
                }
            }
        }
        if current.has_changes() || !current.context.is_empty() {
            chunks.push(current);
        }
        // Trailing blank lines before the next hunk are separators, not context.
        if let Some(last) = chunks.last_mut() {
            while !last.is_end_of_file
                && last.old_lines.last().is_some_and(String::is_empty)
                && last.new_lines.last().is_some_and(String::is_empty)
                && last.old_lines.len() > 1
            {
                last.old_lines.pop();
                last.new_lines.pop();
            }
        }
        chunks.retain(|chunk| chunk.has_changes());
        if chunks.is_empty() && move_path.is_none() {
            return Err(parse_error(
                self.line_number(header_index),
                format!("the update of {} contains no changes", path.display()),
            ));
        }
        Ok(Hunk::Update {
            path,
            move_path,
            chunks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn parses_every_hunk_kind() {
        let patch = parse_patch(
            "*** Begin Patch\n\
             *** Add File: a.txt\n\
             +hello\n\
             +world\n\
             *** Delete File: b.txt\n\
             *** Update File: c.txt\n\
             *** Move to: d.txt\n\
             @@ fn main()\n \
             keep\n\
             -old\n\
             +new\n\
             *** End of File\n\
             *** End Patch\n",
        );
        let Ok(patch) = patch else {
            panic!("parse failed: {patch:?}");
        };
        assert_eq!(
            patch.hunks,
            vec![
                Hunk::Add {
                    path: "a.txt".into(),
                    contents: "hello\nworld\n".into()
                },
                Hunk::Delete {
                    path: "b.txt".into()
                },
                Hunk::Update {
                    path: "c.txt".into(),
                    move_path: Some("d.txt".into()),
                    chunks: vec![UpdateChunk {
                        context: vec!["fn main()".into()],
                        old_lines: vec!["keep".into(), "old".into()],
                        new_lines: vec!["keep".into(), "new".into()],
                        is_end_of_file: true,
                    }],
                },
            ]
        );
    }

    #[test]
    fn tolerates_heredoc_and_whitespace() {
        for text in [
            "<<'EOF'\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n",
            "<<EOF\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF",
            "apply_patch <<\"PATCH\"\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nPATCH\n",
            "\n\n  *** Begin Patch  \n  *** Delete File: x\n*** End Patch  \n\n",
        ] {
            let parsed = parse_patch(text);
            assert!(
                matches!(&parsed, Ok(p) if p.hunks == vec![Hunk::Delete { path: "x".into() }]),
                "{text:?} -> {parsed:?}"
            );
        }
    }

    #[test]
    fn several_chunks_split_on_context_markers() {
        let Ok(patch) = parse_patch(
            "*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n@@ two\n-c\n+d\n*** End Patch",
        ) else {
            panic!("parse failed");
        };
        let Hunk::Update { chunks, .. } = &patch.hunks[0] else {
            panic!("not an update");
        };
        assert_eq!(chunks.len(), 2);
        assert!(chunks[0].context.is_empty());
        assert_eq!(chunks[1].context, vec!["two".to_string()]);
    }

    #[test]
    fn rejects_malformed_patches() {
        let cases = [
            ("", "empty"),
            ("*** Update File: f\n*** End Patch", "first line"),
            ("*** Begin Patch\n*** Delete File: f", "last line"),
            ("*** Begin Patch\n*** End Patch", "no file operations"),
            (
                "*** Begin Patch\n*** Frobnicate File: f\n*** End Patch",
                "not a valid hunk header",
            ),
            (
                "*** Begin Patch\n*** Update File: f\n*** End Patch",
                "no changes",
            ),
            (
                "*** Begin Patch\n*** Update File: f\n@@\nbad\n*** End Patch",
                "unexpected line 'bad'",
            ),
            (
                "*** Begin Patch\n*** Add File: \n+x\n*** End Patch",
                "names no file",
            ),
        ];
        for (text, expected) in cases {
            match parse_patch(text) {
                Err(error) => assert!(
                    error.to_string().contains(expected),
                    "{text:?}: {error} does not mention {expected}"
                ),
                Ok(patch) => panic!("{text:?} parsed as {patch:?}"),
            }
        }
    }

    #[test]
    fn heredoc_delimiters() {
        assert_eq!(heredoc_delimiter("<<'EOF'"), Some("EOF"));
        assert_eq!(
            heredoc_delimiter("apply_patch <<-\"END_PATCH\""),
            Some("END_PATCH")
        );
        assert_eq!(heredoc_delimiter("cat << EOF"), Some("EOF"));
        assert_eq!(heredoc_delimiter("*** Begin Patch"), None);
        assert_eq!(heredoc_delimiter("<<'EO F'"), None);
    }
}

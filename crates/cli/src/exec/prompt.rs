//! Where the exec prompt comes from: the positional argument, stdin, or both.
//!
//! The rules follow the SDK's contract: the SDK writes the prompt to stdin and passes no
//! positional, people usually pass a positional. Decoding accepts UTF-8 (with or without
//! BOM) and UTF-16 with a BOM, because shells on some systems pipe UTF-16.

use std::io::{IsTerminal, Read};

/// Why no prompt could be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(super) enum PromptError {
    #[error("No prompt provided. Either specify one as an argument or pipe the prompt into stdin.")]
    NoPromptOnTerminal,
    #[error("No prompt provided via stdin.")]
    EmptyStdin,
    #[error("failed to read stdin: {0}")]
    Read(String),
    #[error("stdin is not valid UTF-8 or UTF-16 text")]
    Decode,
}

/// Resolve the prompt from the positional argument and the process's stdin.
pub(super) fn resolve_prompt(positional: Option<&str>) -> Result<String, PromptError> {
    let stdin = std::io::stdin();
    let stdin_is_terminal = stdin.is_terminal();
    let force_stdin = positional == Some("-");
    match positional {
        Some(prompt) if !force_stdin => {
            if stdin_is_terminal {
                return Ok(prompt.to_string());
            }
            let piped = read_all(stdin)?;
            Ok(combine(prompt, &piped))
        }
        _ => {
            if stdin_is_terminal && !force_stdin {
                return Err(PromptError::NoPromptOnTerminal);
            }
            let text = read_all(stdin)?;
            if text.trim().is_empty() {
                return Err(PromptError::EmptyStdin);
            }
            Ok(text)
        }
    }
}

fn read_all(stdin: std::io::Stdin) -> Result<String, PromptError> {
    let mut bytes = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| PromptError::Read(e.to_string()))?;
    decode(&bytes)
}

/// Append piped stdin to a positional prompt, the way the SDK and scripts expect.
pub(super) fn combine(prompt: &str, piped: &str) -> String {
    if piped.is_empty() {
        return prompt.to_string();
    }
    let newline = if piped.ends_with('\n') { "" } else { "\n" };
    format!("{prompt}\n\n<stdin>\n{piped}{newline}</stdin>")
}

/// Decode stdin bytes: UTF-8 (optional BOM) or UTF-16 LE/BE with a BOM.
pub(super) fn decode(bytes: &[u8]) -> Result<String, PromptError> {
    if let Some(rest) = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
        return String::from_utf8(rest.to_vec()).map_err(|_| PromptError::Decode);
    }
    let utf16 = |rest: &[u8], little_endian: bool| {
        if !rest.len().is_multiple_of(2) {
            return Err(PromptError::Decode);
        }
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|pair| {
                if little_endian {
                    u16::from_le_bytes([pair[0], pair[1]])
                } else {
                    u16::from_be_bytes([pair[0], pair[1]])
                }
            })
            .collect();
        String::from_utf16(&units).map_err(|_| PromptError::Decode)
    };
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        return utf16(rest, true);
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        return utf16(rest, false);
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| PromptError::Decode)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn combine_wraps_stdin() {
        assert_eq!(
            combine("fix it", "log line"),
            "fix it\n\n<stdin>\nlog line\n</stdin>"
        );
        assert_eq!(combine("fix it", "a\n"), "fix it\n\n<stdin>\na\n</stdin>");
        assert_eq!(combine("fix it", ""), "fix it");
    }

    #[test]
    fn decode_handles_boms() {
        assert_eq!(decode(b"\xEF\xBB\xBFhi").unwrap(), "hi");
        assert_eq!(decode(&[0xFF, 0xFE, b'h', 0, b'i', 0]).unwrap(), "hi");
        assert_eq!(decode(&[0xFE, 0xFF, 0, b'h', 0, b'i']).unwrap(), "hi");
        assert_eq!(decode(b"plain").unwrap(), "plain");
        assert_eq!(decode(&[0xC3]), Err(PromptError::Decode));
    }
}

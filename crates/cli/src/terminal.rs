//! The terminal stdin is attached to: its settings saved and put back, and reading a
//! secret without echoing it.

use std::io::BufRead as _;

use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};

/// The terminal settings of stdin when saved, put back when dropped (also on an error
/// or a panic on the way out). Nothing is saved when stdin is not a terminal.
pub(crate) struct TerminalGuard {
    saved: Option<rustix::termios::Termios>,
}

impl TerminalGuard {
    pub(crate) fn save() -> Self {
        Self {
            saved: tcgetattr(std::io::stdin()).ok(),
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // Drain, not flush: keys typed ahead stay for whatever reads the terminal next.
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Drain, saved);
        }
    }
}

/// One line from stdin. On a terminal, `prompt` goes to stderr and the typed characters
/// are not echoed (the Enter still is), so a pasted key never shows on the screen or in a
/// terminal recording. The prompt comes after echo is off: a key typed as soon as it
/// shows cannot be echoed by the terminal before the switch.
pub(crate) fn read_secret_line(prompt: &str) -> std::io::Result<String> {
    let _restore = TerminalGuard::save();
    if let Ok(mut quiet) = tcgetattr(std::io::stdin()) {
        quiet.local_modes.remove(LocalModes::ECHO);
        quiet.local_modes.insert(LocalModes::ECHONL);
        tcsetattr(std::io::stdin(), OptionalActions::Now, &quiet)?;
        eprintln!("{prompt}");
    }
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(line)
}

/// Untrusted text (anything the model, a command, an MCP server or a provider wrote) made
/// safe to show on a terminal: every control character that a terminal would interpret
/// is shown instead as `\x` and two hex digits of its code point (`\x1b`, `\x07`, `\x9b`).
/// That covers ESC and the other C0 controls, DEL and the C1 controls U+0080–U+009F, so
/// no escape sequence from the text can set the clipboard (OSC 52), retitle the window,
/// clear the screen or move the cursor. `\n` and `\t` stay as they are; a `\r` stays
/// visible too (it would let later text overwrite the line), except right before a `\n`,
/// where it is dropped so CRLF output reads as ordinary lines.
///
/// The renderer's own colours are added after this, so they keep working: call it on
/// the untrusted part, never on an already styled line.
pub(crate) fn neutralize_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(needs_neutralizing) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if needs_neutralizing(c) {
            out.push_str(&format!("\\x{:02x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

fn needs_neutralizing(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::neutralize_controls;

    #[test]
    fn escape_sequences_become_visible_text() {
        assert_eq!(
            neutralize_controls("a\x1b]52;c;aGk=\x07b\x1b[2J"),
            "a\\x1b]52;c;aGk=\\x07b\\x1b[2J"
        );
        assert_eq!(neutralize_controls("\u{9b}31m\u{7f}"), "\\x9b31m\\x7f");
    }

    #[test]
    fn newlines_tabs_and_crlf_stay_readable() {
        assert_eq!(neutralize_controls("a\tb\nc\r\nd"), "a\tb\nc\nd");
        assert_eq!(neutralize_controls("50%\r100%"), "50%\\x0d100%");
        assert!(matches!(
            neutralize_controls("plain é ✓"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}

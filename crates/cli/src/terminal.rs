//! The terminal stdin is attached to: its settings saved and put back, and reading a
//! secret without echoing it.

use std::io::BufRead as _;

use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};

/// The terminal settings of stdin when saved, put back when dropped (also on an error
/// or a panic on the way out). Nothing is saved when stdin is not a terminal.
pub struct TerminalGuard {
    saved: Option<rustix::termios::Termios>,
}

impl TerminalGuard {
    pub fn save() -> Self {
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
pub fn read_secret_line(prompt: &str) -> std::io::Result<String> {
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

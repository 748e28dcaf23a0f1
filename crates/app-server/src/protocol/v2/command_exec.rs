//! command/exec*

use super::*;

/// Run a standalone command (argv vector) in the server sandbox without creating a thread
/// or turn. The response is deferred until the process exits and follows every
/// `command/exec/outputDelta` notification of the process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecParams {
    /// Command argv vector. Empty arrays are rejected.
    pub command: Vec<String>,
    /// Client-supplied, connection-scoped process id. Required for `tty`, `streamStdin`,
    /// `streamStdoutStderr` and the follow-up `command/exec/*` calls.
    #[serde(default)]
    pub process_id: Option<String>,
    /// PTY mode; implies `streamStdin` and `streamStdoutStderr`.
    #[serde(default)]
    pub tty: bool,
    /// Allow `command/exec/write` to write stdin bytes.
    #[serde(default)]
    pub stream_stdin: bool,
    /// Stream stdout/stderr as `command/exec/outputDelta` notifications (not repeated in
    /// the response).
    #[serde(default)]
    pub stream_stdout_stderr: bool,
    /// Per-stream capture cap in bytes; the server default when omitted. The server's
    /// maximum applies whatever is asked.
    #[serde(default)]
    pub output_bytes_cap: Option<usize>,
    /// No client cap (the server's maximum still applies). Not with `outputBytesCap`.
    #[serde(default)]
    pub disable_output_cap: bool,
    /// No timeout. Not with `timeoutMs`.
    #[serde(default)]
    pub disable_timeout: bool,
    /// Timeout in milliseconds; the server default when omitted.
    #[serde(default)]
    pub timeout_ms: Option<i64>,
    /// Working directory; the server's cwd when omitted (relative paths are resolved
    /// against it).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Overrides merged into the server-computed (scrubbed) environment; `null` unsets.
    #[serde(default)]
    pub env: Option<std::collections::HashMap<String, Option<String>>>,
    /// Initial PTY size; only with `tty`.
    #[serde(default)]
    pub size: Option<CommandExecTerminalSize>,
    /// Sandbox policy for this command; the configured one when omitted. A policy looser
    /// than the configured one is refused.
    #[serde(default)]
    pub sandbox_policy: Option<SandboxPolicy>,
    /// Codex's experimental alternative to `sandboxPolicy`. Read only to refuse it: running
    /// under the configured policy instead of the named profile could be looser than the
    /// client asked. Not in our schema (see tests/codex-schema/allowlist.json).
    #[serde(default)]
    #[schemars(skip)]
    pub permission_profile: Option<Value>,
}

/// PTY size in character cells for `command/exec` PTY sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecTerminalSize {
    /// Terminal height in character cells.
    pub rows: u16,
    /// Terminal width in character cells.
    pub cols: u16,
}

/// Final buffered result for `command/exec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecResponse {
    /// Process exit code (128 + signal when killed by one; 124 on timeout).
    pub exit_code: i32,
    /// Buffered stdout capture; empty when stdout was streamed.
    pub stdout: String,
    /// Buffered stderr capture; empty when stderr was streamed.
    pub stderr: String,
}

/// Write stdin bytes to a running `command/exec` session, close stdin, or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecWriteParams {
    pub process_id: String,
    /// Base64-encoded stdin bytes to write.
    #[serde(default)]
    pub delta_base64: Option<String>,
    /// Close stdin after writing `deltaBase64`, if present.
    #[serde(default)]
    pub close_stdin: bool,
}

/// Terminate a running `command/exec` session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecTerminateParams {
    pub process_id: String,
}

/// Resize a running PTY-backed `command/exec` session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecResizeParams {
    pub process_id: String,
    /// New PTY size in character cells.
    pub size: CommandExecTerminalSize,
}

/// Stream label for `command/exec/outputDelta` notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandExecOutputStream {
    /// stdout stream. PTY mode multiplexes terminal output here.
    Stdout,
    /// stderr stream.
    Stderr,
}

/// Base64-encoded output chunk of a streaming `command/exec` (connection-scoped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecOutputDeltaNotification {
    pub process_id: String,
    pub stream: CommandExecOutputStream,
    pub delta_base64: String,
    /// `true` on the last chunk of a stream that `outputBytesCap` cut short.
    pub cap_reached: bool,
}

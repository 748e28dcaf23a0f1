//! Bounds on what one model response may make the client hold: one SSE line or event,
//! one answer (its text, reasoning and tool calls together), one tool call's arguments.
//! A server that goes past one is broken or hostile; the response ends in
//! [`ProviderError::ResponseTooLarge`], which is never retried (the same request would
//! only be answered the same way), instead of the process buffering until memory runs
//! out. The bounds are per provider (`stream_max_*_bytes`, see [`crate::provider`]).

use crate::error::ProviderError;

const MIB: u64 = 1024 * 1024;

/// Default cap on one SSE line and on the data of one SSE event.
pub const DEFAULT_STREAM_MAX_EVENT_BYTES: u64 = 8 * MIB;
/// Default cap on one answer: text, reasoning and tool calls of one response together.
pub const DEFAULT_STREAM_MAX_ANSWER_BYTES: u64 = 32 * MIB;
/// Default cap on the arguments of one tool call.
pub const DEFAULT_STREAM_MAX_ARGUMENTS_BYTES: u64 = 8 * MIB;

/// What each tool call, finished item or reasoning summary part costs besides its bytes:
/// roughly what an entry takes in memory on its way to the history. Without it a stream
/// of empty tool-call fragments, each opening a new call, would grow the answer by
/// entries while adding no bytes.
pub(crate) const ITEM_OVERHEAD_BYTES: usize = 256;

/// The bounds one response is read under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamLimits {
    /// One SSE line, and the data of one SSE event (all its `data:` lines together).
    pub event_bytes: usize,
    /// Text, reasoning and tool calls of one response together.
    pub answer_bytes: usize,
    /// The arguments of one tool call.
    pub arguments_bytes: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            event_bytes: to_usize(DEFAULT_STREAM_MAX_EVENT_BYTES),
            answer_bytes: to_usize(DEFAULT_STREAM_MAX_ANSWER_BYTES),
            arguments_bytes: to_usize(DEFAULT_STREAM_MAX_ARGUMENTS_BYTES),
        }
    }
}

impl StreamLimits {
    /// The cap that `bound` stands for.
    pub fn limit_of(&self, bound: Oversize) -> usize {
        match bound {
            Oversize::SseLine | Oversize::SseEvent => self.event_bytes,
            Oversize::Answer => self.answer_bytes,
            Oversize::Arguments => self.arguments_bytes,
        }
    }

    /// The error for a response that went past `bound`.
    pub(crate) fn exceeded(&self, bound: Oversize, provider: &str) -> ProviderError {
        bound.error(provider, self.limit_of(bound))
    }
}

/// A configured byte count as a size in memory (saturating on 32-bit targets).
pub(crate) fn to_usize(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Which bound a response went past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oversize {
    /// One SSE line (a `data:` line, a comment, any field) without its end.
    SseLine,
    /// The data of one SSE event: its `data:` lines together.
    SseEvent,
    /// Text, reasoning and tool calls of one response together.
    Answer,
    /// The arguments of one tool call.
    Arguments,
}

impl Oversize {
    /// The `[model_providers.ID]` key that sets this bound.
    pub fn key(self) -> &'static str {
        match self {
            Self::SseLine | Self::SseEvent => "stream_max_event_bytes",
            Self::Answer => "stream_max_answer_bytes",
            Self::Arguments => "stream_max_arguments_bytes",
        }
    }

    /// What went past the bound, in words.
    pub fn what(self) -> &'static str {
        match self {
            Self::SseLine => "one SSE line",
            Self::SseEvent => "one SSE event",
            Self::Answer => "an answer (text, reasoning and tool calls)",
            Self::Arguments => "the arguments of one tool call",
        }
    }

    pub(crate) fn error(self, provider: &str, limit: usize) -> ProviderError {
        ProviderError::ResponseTooLarge {
            provider: provider.to_string(),
            what: self,
            limit: u64::try_from(limit).unwrap_or(u64::MAX),
        }
    }
}

/// `8 MiB`, `64 KiB`, `1000 bytes`: a bound as the user configured it, in the unit it
/// divides evenly.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const KIB: u64 = 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else if bytes == 1 {
        "1 byte".to_string()
    } else {
        format!("{bytes} bytes")
    }
}

/// The running size of one answer, held by the wire parser that accumulates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AnswerBudget {
    limits: StreamLimits,
    used: usize,
}

impl AnswerBudget {
    pub(crate) fn new(limits: StreamLimits) -> Self {
        Self { limits, used: 0 }
    }

    /// Counts `bytes` more of this answer; past the cap, the bound it broke.
    pub(crate) fn spend(&mut self, bytes: usize) -> Result<(), Oversize> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limits.answer_bytes {
            return Err(Oversize::Answer);
        }
        Ok(())
    }

    /// Whether one tool call's arguments of this size are allowed.
    pub(crate) fn check_arguments(&self, bytes: usize) -> Result<(), Oversize> {
        if bytes > self.limits.arguments_bytes {
            return Err(Oversize::Arguments);
        }
        Ok(())
    }

    pub(crate) fn limits(&self) -> StreamLimits {
        self.limits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_named_in_the_unit_they_divide() {
        assert_eq!(human_bytes(8 * MIB), "8 MiB");
        assert_eq!(human_bytes(64 * 1024), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
        assert_eq!(human_bytes(1), "1 byte");
    }

    #[test]
    fn the_budget_counts_every_spend_and_checks_arguments_alone() {
        let mut budget = AnswerBudget::new(StreamLimits {
            event_bytes: 10,
            answer_bytes: 10,
            arguments_bytes: 4,
        });
        assert_eq!(budget.spend(6), Ok(()));
        assert_eq!(budget.spend(4), Ok(()));
        assert_eq!(budget.spend(1), Err(Oversize::Answer));
        assert_eq!(budget.check_arguments(4), Ok(()));
        assert_eq!(budget.check_arguments(5), Err(Oversize::Arguments));
    }
}

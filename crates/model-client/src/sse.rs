//! Server-sent events framing of a model response body, within a size bound.
//!
//! The framer is where a server's bytes wait before anything can judge them, so it is
//! written here rather than taken from `eventsource-stream`, which keeps an unfinished
//! line in memory however long it grows (a server once had 2.7 GiB buffered in four
//! seconds), parses the whole unfinished line again on every read (quadratic in its
//! length), and after one byte that is not UTF-8 holds everything that follows waiting
//! for a character that never completes. This one holds at most
//! [`StreamLimits::event_bytes`] of a line and of an event's data, looks at each byte
//! once, and decodes UTF-8 per event.
//!
//! It follows the HTML event-stream rules the client needs: lines end in CRLF, CR or LF;
//! a UTF-8 byte order mark at the start is skipped; `:` lines are comments; `data:`
//! lines append to the event's data (joined by LF); `event:` names it; `id:`, `retry:`
//! and unknown fields are ignored; a blank line dispatches the event if it has data; an
//! unfinished event at the end of the body is discarded.

use std::collections::VecDeque;

use crate::limits::Oversize;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// The `event:` field, `message` when there was none.
    pub event: String,
    pub data: String,
}

/// Why the body cannot be read as events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// A line or an event's data went past the bound.
    TooLarge(Oversize),
    /// An event's name or data is not UTF-8.
    NotUtf8,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Turns body bytes, as they arrive, into events.
#[derive(Debug)]
pub(crate) struct SseFramer {
    max_bytes: usize,
    /// The current line so far, without its end.
    line: Vec<u8>,
    /// The previous byte ended a line with CR: an LF now belongs to that line end.
    after_cr: bool,
    /// No line has ended yet (the byte order mark can only start the first).
    first_line: bool,
    event: Vec<u8>,
    data: Vec<u8>,
    /// At least one `data:` line since the last dispatch (an empty one counts).
    has_data: bool,
    ready: VecDeque<Result<SseEvent, FrameError>>,
    /// An error was queued; nothing after it is read.
    failed: bool,
}

impl SseFramer {
    /// A framer that refuses a line or an event's data over `max_bytes`.
    pub(crate) fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            event: Vec::new(),
            data: Vec::new(),
            has_data: false,
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// The next event (or the error that ends the body) read so far.
    pub(crate) fn next_event(&mut self) -> Option<Result<SseEvent, FrameError>> {
        self.ready.pop_front()
    }

    /// Takes in the next bytes of the body.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.failed {
            if self.after_cr {
                self.after_cr = false;
                if bytes[0] == b'\n' {
                    bytes = &bytes[1..];
                    continue;
                }
            }
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    if !self.extend_line(&bytes[..end]) {
                        return;
                    }
                    self.after_cr = bytes[end] == b'\r';
                    bytes = &bytes[end + 1..];
                    self.end_line();
                }
                None => {
                    self.extend_line(bytes);
                    return;
                }
            }
        }
    }

    /// Appends to the current line; `false` (with the error queued) past the bound.
    fn extend_line(&mut self, bytes: &[u8]) -> bool {
        if self.line.len().saturating_add(bytes.len()) > self.max_bytes {
            self.fail(FrameError::TooLarge(Oversize::SseLine));
            return false;
        }
        self.line.extend_from_slice(bytes);
        true
    }

    fn fail(&mut self, error: FrameError) {
        self.failed = true;
        self.line = Vec::new();
        self.data = Vec::new();
        self.ready.push_back(Err(error));
    }

    fn end_line(&mut self) {
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.first_line) && line.starts_with(BOM) {
            line.drain(..BOM.len());
        }
        if line.is_empty() {
            self.dispatch();
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &b""[..]),
        };
        match name {
            b"data" => {
                // The joining LF counts too: an event of many empty `data:` lines grows.
                if self
                    .data
                    .len()
                    .saturating_add(value.len())
                    .saturating_add(usize::from(self.has_data))
                    > self.max_bytes
                {
                    self.fail(FrameError::TooLarge(Oversize::SseEvent));
                    return;
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            _ => {}
        }
    }

    fn dispatch(&mut self) {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        let decoded = String::from_utf8(event).and_then(|event| {
            String::from_utf8(data).map(|data| SseEvent {
                event: if event.is_empty() {
                    "message".to_string()
                } else {
                    event
                },
                data,
            })
        });
        match decoded {
            Ok(event) => self.ready.push_back(Ok(event)),
            Err(_) => self.fail(FrameError::NotUtf8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn frame(max: usize, reads: &[&[u8]]) -> Vec<Result<SseEvent, FrameError>> {
        let mut framer = SseFramer::new(max);
        let mut out = Vec::new();
        for read in reads {
            framer.push(read);
            while let Some(item) = framer.next_event() {
                out.push(item);
            }
        }
        out
    }

    fn event(name: &str, data: &str) -> Result<SseEvent, FrameError> {
        Ok(SseEvent {
            event: name.to_string(),
            data: data.to_string(),
        })
    }

    #[test]
    fn events_follow_the_event_stream_rules_whatever_the_reads() {
        let body: &[u8] = b"\xEF\xBB\xBFdata: a\r\n\r\n: comment\nevent: response.done\ndata:{\"x\":1}\ndata:  two\rid: 7\rretry: 5\r\rdata\n\nevent: lonely\n\ndata: tail without blank line\n";
        let expected = vec![
            event("message", "a"),
            event("response.done", "{\"x\":1}\n two"),
            event("message", ""),
        ];
        assert_eq!(frame(1024, &[body]), expected);
        for size in 1..8 {
            let reads: Vec<&[u8]> = body.chunks(size).collect();
            assert_eq!(frame(1024, &reads), expected, "reads of {size} bytes");
        }
    }

    #[test]
    fn utf8_split_across_reads_is_kept_and_invalid_utf8_is_an_error() {
        let body = "data: héllo\n\n".as_bytes();
        let reads: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frame(64, &reads), vec![event("message", "héllo")]);
        assert_eq!(
            frame(64, &[b"data: \xFF\n\ndata: later\n\n"]),
            vec![Err(FrameError::NotUtf8)]
        );
    }

    #[test]
    fn a_line_over_the_bound_is_refused_without_being_held() {
        let mut framer = SseFramer::new(16);
        framer.push(b"data: 0123456789");
        assert_eq!(framer.next_event(), None);
        framer.push(b"x");
        assert_eq!(
            framer.next_event(),
            Some(Err(FrameError::TooLarge(Oversize::SseLine)))
        );
        assert!(framer.line.capacity() <= 16, "{}", framer.line.capacity());
        framer.push(b"\n\ndata: ok\n\n");
        assert_eq!(framer.next_event(), None, "nothing is read after the error");
    }

    #[test]
    fn an_event_over_the_bound_is_refused_even_in_short_lines() {
        let many_lines = b"data: 12345\n".repeat(4);
        assert_eq!(
            frame(20, &[&many_lines]),
            vec![Err(FrameError::TooLarge(Oversize::SseEvent))]
        );
        let empty_lines = b"data:\n".repeat(30);
        assert_eq!(
            frame(20, &[&empty_lines]),
            vec![Err(FrameError::TooLarge(Oversize::SseEvent))]
        );
        // Exactly at the bound is fine: "12345\n12345\n12345" is 17 bytes.
        assert_eq!(
            frame(17, &[b"data: 12345\ndata: 12345\ndata: 12345\n\n"]),
            vec![event("message", "12345\n12345\n12345")]
        );
    }
}

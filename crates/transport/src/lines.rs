//! JSON lines on a byte stream: what the three stdio servers (app-server, ACP, MCP) read.
//!
//! One message per `\n`-terminated line. A line is never held past [`MAX_LINE_BYTES`]:
//! the rest of a longer one is read and dropped as it arrives, so a peer sending a line of
//! any size costs at most that much memory, and the next line is served as usual. A UTF-8
//! byte-order mark at the start of a line and surrounding whitespace (a `\r` before the
//! `\n` among it) are ignored; blank lines are skipped.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line read: the bound of the MCP SDK's own reader, and far above any
/// request a client sends (a prompt is capped well below it; a whole file written with
/// `fs/writeFile` travels base64 and may not exceed it).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What one read of the stream gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// One non-blank line, its terminator, byte-order mark and surrounding whitespace
    /// taken off.
    Message(Vec<u8>),
    /// A line longer than the bound, dropped: answer it with
    /// [`crate::jsonrpc::line_too_long`] and go on.
    TooLong,
}

/// Reads [`Line`]s from `reader`.
#[derive(Debug)]
pub struct BoundedLines<R> {
    reader: R,
    /// The line being read. Kept across calls: a read may be dropped inside a `select!`
    /// mid-line, and the next call resumes where it stopped.
    line: Vec<u8>,
    /// Dropping the rest of a line already refused for its length.
    discarding: bool,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> BoundedLines<R> {
    pub fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE_BYTES)
    }

    /// With another bound (tests).
    pub fn with_limit(reader: R, max: usize) -> Self {
        Self {
            reader,
            line: Vec::new(),
            discarding: false,
            max,
        }
    }

    /// The next line; `Ok(None)` at the end of the input. A last line with no `\n` is a
    /// line. Cancel safe: bytes move from the reader's buffer to the line with no await
    /// in between.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                let rest = std::mem::take(&mut self.line);
                self.discarding = false;
                return Ok(message(&rest).map(Line::Message));
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let mut outcome = None;
            if self.discarding {
                self.discarding = newline.is_none();
            } else if self
                .line
                .len()
                .saturating_add(take - usize::from(newline.is_some()))
                > self.max
            {
                // Counted without the `\n`: a line of exactly `max` bytes is a line.
                self.line = Vec::new();
                self.discarding = newline.is_none();
                outcome = Some(Line::TooLong);
            } else {
                self.line.extend_from_slice(&available[..take]);
                if newline.is_some() {
                    let line = std::mem::take(&mut self.line);
                    outcome = message(&line).map(Line::Message);
                }
            }
            self.reader.consume(take);
            if let Some(outcome) = outcome {
                return Ok(Some(outcome));
            }
        }
    }
}

/// The line without its byte-order mark and surrounding whitespace; `None` when blank.
fn message(line: &[u8]) -> Option<Vec<u8>> {
    let line = line.trim_ascii();
    let line = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line);
    let line = line.trim_ascii();
    (!line.is_empty()).then(|| line.to_vec())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    async fn all(input: &[u8], max: usize, chunk: usize) -> Vec<Line> {
        let reader = tokio::io::BufReader::with_capacity(chunk, input);
        let mut lines = BoundedLines::with_limit(reader, max);
        let mut out = Vec::new();
        while let Some(line) = lines.next().await.expect("read") {
            out.push(line);
        }
        out
    }

    fn msg(text: &str) -> Line {
        Line::Message(text.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_are_trimmed_and_blank_ones_skipped() {
        let input = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \r\n {\"b\":2} \n{\"c\":3}";
        for chunk in [1, 3, 64] {
            assert_eq!(
                all(input, 1024, chunk).await,
                vec![msg("{\"a\":1}"), msg("{\"b\":2}"), msg("{\"c\":3}")]
            );
        }
    }

    #[tokio::test]
    async fn a_long_line_is_refused_once_and_the_next_is_read() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\n{\"ok\":1}\n");
        input.extend_from_slice(&[b'y'; 11]);
        for chunk in [1, 7, 512] {
            assert_eq!(
                all(&input, 10, chunk).await,
                vec![Line::TooLong, msg("{\"ok\":1}"), Line::TooLong]
            );
        }
        // Exactly at the bound is a line.
        assert_eq!(all(b"0123456789\n", 10, 4).await, vec![msg("0123456789")]);
    }

    #[tokio::test]
    async fn a_huge_line_never_grows_the_buffer_past_the_bound() {
        let (mut write, read) = tokio::io::duplex(64 * 1024);
        let reader = tokio::spawn(async move {
            let mut lines = BoundedLines::with_limit(tokio::io::BufReader::new(read), 1024);
            let mut seen = Vec::new();
            while let Some(line) = lines.next().await.expect("read") {
                assert!(lines.line.capacity() <= 64 * 1024 + 1024);
                seen.push(line);
            }
            seen
        });
        use tokio::io::AsyncWriteExt as _;
        let block = vec![b'z'; 64 * 1024];
        for _ in 0..256 {
            write.write_all(&block).await.expect("write");
        }
        write.write_all(b"\n{}\n").await.expect("write");
        drop(write);
        assert_eq!(reader.await.expect("join"), vec![Line::TooLong, msg("{}")]);
    }
}

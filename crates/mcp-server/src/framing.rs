//! Newline-delimited JSON framing of stdin, with a hard bound on line length.
//!
//! Owns the byte-level reading: a line longer than the bound is skipped as it streams
//! past (never buffered whole), so a client that sends hundreds of megabytes without a
//! newline cannot exhaust memory. Classifying the JSON is left to the dispatcher.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Longest accepted line, in bytes (excluding the newline).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One frame read from the input.
#[derive(Debug, PartialEq)]
pub enum Frame {
    /// A complete line (without its newline; may be blank).
    Line(Vec<u8>),
    /// A line that exceeded the bound; its bytes were discarded.
    TooLong,
    /// End of input (or a read error, which ends the session the same way).
    Eof,
}

/// Reads frames from a buffered reader.
pub struct LineReader<R> {
    reader: R,
    max_len: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(reader: R, max_len: usize) -> Self {
        Self { reader, max_len }
    }

    /// The next frame. Cancel-safe only between frames; the caller reads it in one task.
    pub async fn next_frame(&mut self) -> Frame {
        let mut line = Vec::new();
        let mut overflowed = false;
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(buf) => buf,
                Err(err) => {
                    tracing::warn!("stdin read failed, treating as end of input: {err}");
                    return Frame::Eof;
                }
            };
            if available.is_empty() {
                // A final unterminated line still counts as a message.
                return if overflowed {
                    Frame::TooLong
                } else if line.is_empty() {
                    Frame::Eof
                } else {
                    Frame::Line(line)
                };
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let chunk_len = newline.unwrap_or(available.len());
            if !overflowed {
                if line.len() + chunk_len > self.max_len {
                    overflowed = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(&available[..chunk_len]);
                }
            }
            let consumed = newline.map_or(chunk_len, |i| i + 1);
            self.reader.consume(consumed);
            if newline.is_some() {
                if overflowed {
                    return Frame::TooLong;
                }
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Frame::Line(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_lines_and_bounds_length() {
        let input = b"{\"a\":1}\r\nxxxxxxxxxxxxxxxxxxxx\n\nlast".to_vec();
        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(4, &input[..]), 10);
        assert_eq!(
            reader.next_frame().await,
            Frame::Line(b"{\"a\":1}".to_vec())
        );
        assert_eq!(reader.next_frame().await, Frame::TooLong);
        assert_eq!(reader.next_frame().await, Frame::Line(Vec::new()));
        assert_eq!(reader.next_frame().await, Frame::Line(b"last".to_vec()));
        assert_eq!(reader.next_frame().await, Frame::Eof);
    }
}

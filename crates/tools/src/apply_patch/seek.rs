//! Finding a block of expected lines in a file, with progressively looser comparisons.
//!
//! Models reproduce old code imperfectly: trailing spaces vanish, indentation drifts,
//! and typographic quotes or dashes replace ASCII ones. Each pass accepts one more kind
//! of difference, and the first pass that finds the block wins, so an exact match is
//! always preferred over a fuzzy one elsewhere in the file.

use std::borrow::Cow;

/// Line comparisons from strictest to loosest.
const PASSES: [fn(&str) -> Cow<'_, str>; 4] = [exact, trailing_trimmed, trimmed, normalized];

fn exact(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line)
}

fn trailing_trimmed(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim_end())
}

fn trimmed(line: &str) -> Cow<'_, str> {
    Cow::Borrowed(line.trim())
}

fn normalized(line: &str) -> Cow<'_, str> {
    Cow::Owned(normalize_punctuation(line.trim()))
}

/// Index of the first occurrence of `pattern` in `lines` at or after `start`.
///
/// With `at_end_of_file`, the block is first looked for where it would end exactly at
/// the last line; only if it is not there is the file searched from `start`.
pub(crate) fn seek_sequence(
    lines: &[String],
    pattern: &[String],
    start: usize,
    at_end_of_file: bool,
) -> Option<usize> {
    if pattern.is_empty() {
        return Some(start.min(lines.len()));
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - pattern.len();
    if at_end_of_file {
        for normalize in PASSES {
            if block_matches(lines, pattern, last_start, normalize) {
                return Some(last_start);
            }
        }
    }
    for normalize in PASSES {
        for candidate in start..=last_start {
            if block_matches(lines, pattern, candidate, normalize) {
                return Some(candidate);
            }
        }
    }
    None
}

/// Whether `line` occurs anywhere in `lines` under the loosest comparison; used to point
/// at the first line of a failed block that the model got wrong.
pub(crate) fn line_exists(lines: &[String], line: &str) -> bool {
    let wanted = normalize_punctuation(line.trim());
    lines
        .iter()
        .any(|candidate| normalize_punctuation(candidate.trim()) == wanted)
}

fn block_matches(
    lines: &[String],
    pattern: &[String],
    at: usize,
    normalize: fn(&str) -> Cow<'_, str>,
) -> bool {
    pattern
        .iter()
        .zip(&lines[at..])
        .all(|(expected, actual)| normalize(expected) == normalize(actual))
}

/// Maps typographic punctuation and exotic spaces to their ASCII look-alikes.
pub(crate) fn normalize_punctuation(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
            | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}'
            | '\u{00BB}' => '"',
            '\u{00A0}' | '\u{2002}' | '\u{2003}' | '\u{2004}' | '\u{2005}' | '\u{2006}'
            | '\u{2007}' | '\u{2008}' | '\u{2009}' | '\u{200A}' | '\u{202F}' | '\u{205F}'
            | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|line| line.to_string()).collect()
    }

    #[test]
    fn exact_match_wins_over_earlier_fuzzy_match() {
        let lines = strings(&["foo  ", "bar", "foo", "bar"]);
        assert_eq!(
            seek_sequence(&lines, &strings(&["foo", "bar"]), 0, false),
            Some(2)
        );
    }

    #[test]
    fn each_fuzzy_pass_matches() {
        let lines = strings(&["a", "  let x = \u{201C}hi\u{201D} \u{2014} 1;  ", "b"]);
        for pattern in [
            "  let x = \u{201C}hi\u{201D} \u{2014} 1;",
            "let x = \u{201C}hi\u{201D} \u{2014} 1;",
            "let x = \"hi\" - 1;",
        ] {
            assert_eq!(
                seek_sequence(&lines, &strings(&[pattern]), 0, false),
                Some(1),
                "{pattern}"
            );
        }
        assert_eq!(seek_sequence(&lines, &strings(&["nope"]), 0, false), None);
    }

    #[test]
    fn respects_start_and_end_of_file() {
        let lines = strings(&["x", "y", "x", "y"]);
        let pattern = strings(&["x", "y"]);
        assert_eq!(seek_sequence(&lines, &pattern, 1, false), Some(2));
        assert_eq!(seek_sequence(&lines, &pattern, 0, true), Some(2));
        assert_eq!(seek_sequence(&lines, &strings(&["x"]), 0, true), Some(0));
        assert_eq!(seek_sequence(&lines, &strings(&["a"; 5]), 0, false), None);
    }
}

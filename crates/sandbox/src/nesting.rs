//! How deep a request body nests, found in one pass before a YAML parser sees it.
//!
//! Bodies are decoded by serde_json and, when that fails, as YAML (serde_yaml_ng), which decodes
//! nothing nested deeper than [`MAX_DEPTH`] (serde_json stops one level earlier). serde_json gives up as soon as it gets there, but
//! serde_yaml_ng first parses the whole document into events with libyaml, whose scanner walks
//! its stack of open flow collections (`[`, `{`) on every token: a body of `d` nested `[` cost
//! O(d²) before the depth was ever checked — more than 30 s of a core at 100,000 deep, for a
//! refusal. [`too_deep`] finds the same answer in O(length), so the YAML parser only ever sees
//! bodies it can decode.
//!
//! Pure: no I/O.

/// How deep serde_yaml_ng nests before refusing (its recursion limit; serde_json's is one less).
pub(crate) const MAX_DEPTH: usize = 128;

/// Whether `body` opens more than [`MAX_DEPTH`] flow collections (`[`, `{`) at once, read as
/// YAML's flow syntax (JSON is a part of it): brackets inside a quoted scalar that ends on its
/// line (`"…"` with backslash escapes, `'…'` with `''`) and in comments (`#` after whitespace or
/// at a line's start) do not count. A quote without its end on the same line counts as a plain
/// character: JSON strings never span lines, and counting a multi-line YAML string's brackets
/// can only refuse such a body (needing more than [`MAX_DEPTH`] unclosed brackets in strings),
/// never let a deep one through.
pub(crate) fn too_deep(body: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut i = 0;
    // Whether the byte before `i` was whitespace or a line start: where a comment may begin.
    let mut after_space = true;
    while i < body.len() {
        let b = body[i];
        match b {
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'#' if after_space => {
                i = line_end(body, i);
                after_space = true;
                continue;
            }
            b'"' | b'\'' => {
                if let Some(end) = quoted_end(body, i) {
                    i = end + 1;
                    after_space = false;
                    continue;
                }
            }
            _ => {}
        }
        after_space = matches!(b, b' ' | b'\t' | b'\r' | b'\n');
        i += 1;
    }
    false
}

/// The index of the `\n` ending the line at `i`, or the body's length.
fn line_end(body: &[u8], i: usize) -> usize {
    body[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(body.len(), |p| i + p)
}

/// Where the quoted scalar opening at `start` closes on the same line, if it does.
fn quoted_end(body: &[u8], start: usize) -> Option<usize> {
    let quote = body[start];
    let mut i = start + 1;
    while i < body.len() {
        match body[i] {
            b'\n' => return None,
            b'\\' if quote == b'"' => i += 2,
            b'\'' if quote == b'\'' && body.get(i + 1) == Some(&b'\'') => i += 2,
            c if c == quote => return Some(i),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> Vec<u8> {
        let mut body = vec![b'['; depth];
        body.extend(std::iter::repeat_n(b']', depth));
        body
    }

    /// The YAML decoder, the later and more lenient of the two, decodes 128 levels and not 129
    /// (serde_json stops at 127, and a body it refuses is read as YAML): exactly what
    /// `too_deep` lets through.
    #[test]
    fn the_limit_is_the_decoders() {
        assert!(!too_deep(&nested(MAX_DEPTH)));
        assert!(too_deep(&nested(MAX_DEPTH + 1)));
        let yaml = |d| serde_yaml_ng::from_slice::<serde_json::Value>(&nested(d));
        assert!(yaml(MAX_DEPTH).is_ok());
        assert!(yaml(MAX_DEPTH + 1).is_err());
        let json = |d| serde_json::from_slice::<serde_json::Value>(&nested(d));
        assert!(json(MAX_DEPTH - 1).is_ok());
        assert!(json(MAX_DEPTH).is_err());
    }

    #[test]
    fn brackets_in_strings_and_comments_do_not_count_and_siblings_do_not_add_up() {
        let deep_string = format!(
            r#"{{"a": "{}", "b": '{}'}}"#,
            "[".repeat(500),
            "{".repeat(500)
        );
        assert!(!too_deep(deep_string.as_bytes()));
        let escaped = format!(r#"{{"a": "\"{}"}}"#, "[".repeat(500));
        assert!(!too_deep(escaped.as_bytes()));
        let doubled = format!("a: 'it''s {}'", "[".repeat(500));
        assert!(!too_deep(doubled.as_bytes()));
        let comment = format!("a: 1 # {}\nb: [1]", "[".repeat(500));
        assert!(!too_deep(comment.as_bytes()));
        let siblings = "[1], ".repeat(10_000);
        assert!(!too_deep(format!("[{siblings}]").as_bytes()));
    }

    #[test]
    fn a_quote_that_does_not_close_on_its_line_hides_nothing() {
        // YAML reads `a"` as a plain scalar, then a deep flow sequence on the next line.
        let body = format!("x: a\"\ny: {}\"", "[".repeat(1_000));
        assert!(too_deep(body.as_bytes()));
        // `#` right after a character is not a comment.
        let body = format!("x: a#{}", "[".repeat(1_000));
        assert!(too_deep(body.as_bytes()));
    }

    /// Linear: a million levels are refused in one pass (the YAML parser took more than 30 s
    /// of a core at a tenth of that).
    #[test]
    fn a_million_levels_are_refused_at_once() {
        let started = std::time::Instant::now();
        assert!(too_deep(&nested(1_000_000)));
        assert!(!too_deep(&b"[1],".repeat(1_000_000)));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}

//! A structural JSON scanner: walks the members of an object and steps over values without
//! decoding them.
//!
//! # Why by hand
//!
//! An `AdmissionReview` for a DELETE carries the whole object being deleted, and most of it —
//! `managedFields`, `spec`, `status` — is of no interest to Lien. serde_json's `IgnoredAny`
//! still tokenises every one of those bytes (about 1.2 GB/s here), which made the parse of a
//! 20 KB review cost 20 µs. Skipping only needs to find where a value ends, and that is a
//! bracket count outside strings, which is what SIMD does well (simdjson's stage 1): per
//! 64-byte block, four byte-class masks, string regions from a prefix-XOR of the unescaped
//! quotes, and a popcount of the brackets that are left. No JSON crate offers that as a safe
//! API (sonic-rs has it only behind `unsafe` `get_many_unchecked`; its checked path was slower
//! than serde_json here), so this module does it in safe Rust, with `wide` for the compares.
//!
//! # Contract
//!
//! The scanner checks structure, not content: strings are terminated, brackets balance, members
//! are `"key": value` separated by commas. A skipped value is not otherwise validated (a bad
//! number inside `managedFields` goes unnoticed); every value Lien *reads* is handed to
//! serde_json and fully validated. Malformed input gives a [`ScanError`] or a value that fails
//! to decode, never a panic and never an out-of-bounds read.
//!
//! Only the bracket kind that opened a container is counted to find its end. In valid JSON
//! brackets nest, so `{ [ } ]` cannot occur and the count of one kind is exact.

use std::ops::Range;

/// Why a byte sequence is not the JSON the scanner expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// The input ended inside a value.
    #[error("JSON ends early (at byte {0})")]
    Eof(usize),
    /// A byte that cannot start or continue what was expected.
    #[error("unexpected {found:?} at byte {at}, expected {expected}")]
    Unexpected {
        /// Where.
        at: usize,
        /// The byte found.
        found: char,
        /// What would have been valid.
        expected: &'static str,
    },
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// The index of the first non-whitespace byte at or after `i`.
fn skip_space(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_space(b[i]) {
        i += 1;
    }
    i
}

fn unexpected(b: &[u8], at: usize, expected: &'static str) -> ScanError {
    match b.get(at) {
        Some(&c) => ScanError::Unexpected {
            at,
            found: char::from(c),
            expected,
        },
        None => ScanError::Eof(at),
    }
}

/// The end (exclusive) of the string whose opening quote is at `start`.
fn string_end(b: &[u8], start: usize) -> Result<usize, ScanError> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    Err(ScanError::Eof(b.len()))
}

/// The span of the value that starts at or after `i` (leading whitespace skipped).
pub fn value(b: &[u8], i: usize) -> Result<Range<usize>, ScanError> {
    let start = skip_space(b, i);
    let end = match b.get(start) {
        None => return Err(ScanError::Eof(start)),
        Some(b'"') => string_end(b, start)?,
        Some(b'{') => container_end(b, start, b'{', b'}')?,
        Some(b'[') => container_end(b, start, b'[', b']')?,
        // Numbers, true, false, null: up to the next delimiter; serde_json judges the token
        // if it is ever read.
        Some(c) if c.is_ascii_alphanumeric() || *c == b'-' => {
            let mut j = start + 1;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !is_space(b[j]) {
                j += 1;
            }
            j
        }
        Some(_) => return Err(unexpected(b, start, "a JSON value")),
    };
    Ok(start..end)
}

/// Walks the members of the object whose `{` is at or after `i`, calling `visit(key, start)`
/// for each, where `key` is the raw (still escaped; see [`name`]) member name and `start` the
/// index where its value begins. `visit` returns `Some(end)` when it has read the value itself
/// (descending into it, so nothing is scanned twice), or `None` to have it skipped. Returns the
/// index just past the object's closing `}`.
pub fn object<'a, E: From<ScanError>>(
    b: &'a [u8],
    i: usize,
    mut visit: impl FnMut(&'a [u8], usize) -> Result<Option<usize>, E>,
) -> Result<usize, E> {
    let open = skip_space(b, i);
    if b.get(open) != Some(&b'{') {
        return Err(unexpected(b, open, "'{'").into());
    }
    let mut i = skip_space(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Ok(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(unexpected(b, i, "a member name").into());
        }
        let key_end = string_end(b, i)?;
        let key = &b[i + 1..key_end - 1];
        let colon = skip_space(b, key_end);
        if b.get(colon) != Some(&b':') {
            return Err(unexpected(b, colon, "':'").into());
        }
        let start = skip_space(b, colon + 1);
        let end = match visit(key, start)? {
            Some(end) => end,
            None => value(b, start)?.end,
        };
        i = skip_space(b, end);
        match b.get(i) {
            Some(b',') => i = skip_space(b, i + 1),
            Some(b'}') => return Ok(i + 1),
            _ => return Err(unexpected(b, i, "',' or '}'").into()),
        }
    }
}

/// A raw (still escaped) member name as plain bytes: borrowed unless it holds an escape
/// (rare: `"\u0075id"` is `uid`). A name that does not decode matches nothing Lien reads.
pub fn name(raw: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !raw.contains(&b'\\') {
        return std::borrow::Cow::Borrowed(raw);
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    let decoded = serde_json::from_slice::<String>(&quoted).unwrap_or_default();
    std::borrow::Cow::Owned(decoded.into_bytes())
}

/// The end (exclusive) of the object or array whose opening bracket is at `start`.
fn container_end(b: &[u8], start: usize, open: u8, close: u8) -> Result<usize, ScanError> {
    let mut depth: u64 = 0;
    let mut carry = Carry::default();
    let mut at = start;
    let mut tail = [b' '; 64];
    while at < b.len() {
        // Full blocks are read in place; the last one is padded with spaces.
        let block: &[u8; 64] = match b.get(at..at + 64).and_then(|s| s.try_into().ok()) {
            Some(block) => block,
            None => {
                tail[..b.len() - at].copy_from_slice(&b[at..]);
                &tail
            }
        };
        let masks = classify(block, open, close);
        let outside = !carry.strings(&masks);
        let opens = masks.open & outside;
        let closes = masks.close & outside;
        // Depth can only reach zero inside this block if it holds at least `depth` closes.
        if u64::from(closes.count_ones()) < depth {
            depth += u64::from(opens.count_ones());
            depth -= u64::from(closes.count_ones());
        } else {
            let mut brackets = opens | closes;
            while brackets != 0 {
                let bit = brackets & brackets.wrapping_neg();
                if opens & bit != 0 {
                    depth += 1;
                } else {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(at + bit.trailing_zeros() as usize + 1);
                    }
                }
                brackets &= brackets - 1;
            }
        }
        at += 64;
    }
    Err(ScanError::Eof(b.len()))
}

/// What one block leaves to the next: whether it ended inside a string, and whether its last
/// byte was an unescaped backslash.
#[derive(Debug, Default)]
struct Carry {
    in_string: bool,
    escape: bool,
}

impl Carry {
    /// The mask of bytes inside strings (from an opening quote up to, not including, its
    /// closing quote), updating the carry for the next block.
    fn strings(&mut self, m: &Masks) -> u64 {
        let escaped = self.escaped(m.backslash);
        let quotes = m.quote & !escaped;
        let mut inside = prefix_xor(quotes);
        if self.in_string {
            inside = !inside;
        }
        self.in_string = inside >> 63 == 1;
        inside
    }

    /// The bytes escaped by a backslash. Backslashes are rare outside annotations that hold
    /// JSON, so they are walked one by one: a backslash that is itself escaped escapes nothing.
    fn escaped(&mut self, backslashes: u64) -> u64 {
        let mut escaped = u64::from(self.escape);
        self.escape = false;
        let mut rest = backslashes;
        while rest != 0 {
            let bit = rest & rest.wrapping_neg();
            if escaped & bit == 0 {
                match bit.checked_shl(1).filter(|b| *b != 0) {
                    Some(next) => escaped |= next,
                    None => self.escape = true,
                }
            }
            rest &= rest - 1;
        }
        escaped
    }
}

/// Bit `k` set when bit `k` of the result is the XOR of bits `0..=k` of `x`: for quote
/// positions, the bytes from each opening quote up to its closing one.
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

/// Byte-class masks of one 64-byte block, bit `k` for byte `k`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

/// Four byte classes of a block, 16 bytes per SIMD compare (SSE2 on x86-64, NEON on aarch64,
/// through `wide`'s safe API; plain code elsewhere).
fn classify(block: &[u8; 64], open: u8, close: u8) -> Masks {
    use wide::u8x16;
    let (quote, backslash, open, close) = (
        u8x16::splat(b'"'),
        u8x16::splat(b'\\'),
        u8x16::splat(open),
        u8x16::splat(close),
    );
    let mut m = Masks::default();
    for (k, lane) in block.chunks_exact(16).enumerate() {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(lane);
        let v = u8x16::new(bytes);
        let bits = |c: u8x16| u64::from(v.simd_eq(c).to_bitmask()) << (16 * k);
        m.quote |= bits(quote);
        m.backslash |= bits(backslash);
        m.open |= bits(open);
        m.close |= bits(close);
    }
    m
}

/// The byte-at-a-time classifier the SIMD one is tested against.
#[cfg(test)]
fn classify_scalar(block: &[u8; 64], open: u8, close: u8) -> Masks {
    let mut m = Masks::default();
    for (k, &c) in block.iter().enumerate() {
        let bit = 1u64 << k;
        match c {
            b'"' => m.quote |= bit,
            b'\\' => m.backslash |= bit,
            c if c == open => m.open |= bit,
            c if c == close => m.close |= bit,
            _ => {}
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// Where serde_json says the first value of `text` ends.
    fn serde_end(text: &[u8]) -> usize {
        let mut s = serde_json::Deserializer::from_slice(text).into_iter::<Value>();
        s.next().expect("one value").expect("valid");
        s.byte_offset()
    }

    #[test]
    fn finds_the_end_of_every_kind_of_value() {
        for text in [
            r#""plain""#,
            r#""esc \" aped \\""#,
            r#"{"a":{"b":[1,{"c":"}"}]},"d":"{"}"#,
            r#"[[],[{}],"]",["\\"]]"#,
            "-12.5e3",
            "true",
            "null",
        ] {
            let padded = format!("  {text} ,");
            assert_eq!(
                value(padded.as_bytes(), 0).expect(text),
                2..2 + text.len(),
                "{text}"
            );
        }
    }

    #[test]
    fn strings_and_escapes_across_block_boundaries() {
        // A backslash as the last byte of a block escapes the first byte of the next one, and
        // a string may run over several blocks.
        for pad in 0..130 {
            let text = format!(
                r#"{{"k":"{}\"}}{}","n":{{"x":"\\"}},"z":1}}"#,
                "a".repeat(pad),
                "{".repeat(pad % 7)
            );
            let b = text.as_bytes();
            assert_eq!(value(b, 0).expect("value").end, serde_end(b), "pad {pad}");
        }
    }

    /// The members of the object at `i` as (raw key, value span), and where it ends.
    type Member = (Vec<u8>, Range<usize>);

    fn members(b: &[u8]) -> Result<(Vec<Member>, usize), ScanError> {
        let mut found = Vec::new();
        let end = object(b, 0, |key, start| {
            let span = value(b, start)?;
            found.push((key.to_vec(), span.clone()));
            Ok::<_, ScanError>(Some(span.end))
        })?;
        Ok((found, end))
    }

    #[test]
    fn walks_members_and_names() {
        let text = br#" { "uid" : "u", "\u006bind":{"k":"v"}, "n":[1,2] } tail"#;
        let (found, end) = members(text).expect("object");
        assert_eq!(found.len(), 3);
        assert_eq!(&*name(&found[1].0), b"kind");
        assert_eq!(&*name(&found[0].0), b"uid");
        assert_eq!(&text[found[1].1.clone()], br#"{"k":"v"}"#);
        assert_eq!(&text[end..], b" tail");
        // Skipped members end in the same place as read ones.
        assert_eq!(object(text, 0, |_, _| Ok::<_, ScanError>(None)), Ok(end));
        assert_eq!(object(b"{ }", 0, |_, _| Ok::<_, ScanError>(None)), Ok(3));
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for text in [
            &b""[..],
            b"{",
            b"{\"a\"",
            b"{\"a\":",
            b"{\"a\":1 \"b\":2}",
            b"{\"a\" 1}",
            b"{1:2}",
            b"{\"a\":1,}",
            b"[1,2",
            b"\"open",
            b"\"ends in escape\\",
        ] {
            assert!(
                members(text).is_err(),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn simd_and_scalar_classifiers_agree() {
        let mut block = [0u8; 64];
        for (i, b) in block.iter_mut().enumerate() {
            *b = b"\"\\{}[]a \xff"[i % 9];
        }
        for (open, close) in [(b'{', b'}'), (b'[', b']')] {
            assert_eq!(
                classify(&block, open, close),
                classify_scalar(&block, open, close)
            );
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            // Quotes, backslashes, brackets and non-ASCII inside strings.
            "[a-z\"\\\\{}\\[\\] é\u{1F600}]{0,80}".prop_map(Value::from),
        ];
        leaf.prop_recursive(6, 256, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map("[a-z\"{}\\\\]{0,12}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn agrees_with_serde_json_on_where_values_end(v in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_vec_pretty(&json!([v, 1]))
            } else {
                serde_json::to_vec(&json!({"v": v, "after": 1}))
            }.expect("serialise");
            prop_assert_eq!(value(&text, 0).expect("value").end, serde_end(&text));
            if !pretty {
                let (ms, end) = members(&text).expect("members");
                prop_assert_eq!(ms.len(), 2);
                prop_assert_eq!(end, text.len());
            }
        }

        #[test]
        fn never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            let _ = value(&bytes, 0);
            let _ = members(&bytes);
            let _ = object(&bytes, 0, |_, _| Ok::<_, ScanError>(None));
        }
    }
}

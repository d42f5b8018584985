//! The first words Go's `encoding/json` scanner says of a body that is not JSON, for the answers
//! kube-apiserver gives with them verbatim (a DELETE's undecodable body). Only the errors a
//! body's first value can have are worded as Go words them; past that, serde's own words.

/// `quoteChar` of Go's scanner: `'x'`, with `'` and `"` escaped as Go escapes them.
fn quote_char(c: char) -> String {
    match c {
        '\'' => r"'\''".to_string(),
        '"' => r#"'"'"#.to_string(),
        c if c.is_control() => format!("'\\x{:02x}'", c as u32),
        c => format!("'{c}'"),
    }
}

/// Go's `SyntaxError` message for `body`, the way `json.Unmarshal` reports it.
pub fn syntax_error(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut chars = text.trim_start_matches([' ', '\t', '\r', '\n']).chars();
    let Some(first) = chars.next() else {
        return "unexpected end of JSON input".to_string();
    };
    let literal = match first {
        't' => "true",
        'f' => "false",
        'n' => "null",
        '{' | '[' | '"' | '-' | '0'..='9' => {
            return match serde_json::from_slice::<serde_json::Value>(body) {
                Err(e) => e.to_string(),
                Ok(_) => "cannot unmarshal into Go value of type v1.DeleteOptions".to_string(),
            };
        }
        c => {
            return format!(
                "invalid character {} looking for beginning of value",
                quote_char(c)
            );
        }
    };
    for expected in literal.chars().skip(1) {
        match chars.next() {
            None => return "unexpected end of JSON input".to_string(),
            Some(c) if c != expected => {
                return format!(
                    "invalid character {} in literal {literal} (expecting {})",
                    quote_char(c),
                    quote_char(expected)
                );
            }
            Some(_) => {}
        }
    }
    match chars.find(|c| !matches!(c, ' ' | '\t' | '\r' | '\n')) {
        Some(c) => format!("invalid character {} after top-level value", quote_char(c)),
        None => format!("cannot unmarshal {literal} into Go value of type v1.DeleteOptions"),
    }
}

#[cfg(test)]
mod tests {
    use super::syntax_error;

    #[test]
    fn a_body_that_is_not_json_is_worded_as_go_words_it() {
        // The differential's `kubectl-delete/delete-body-not-json`: kube-apiserver 1.32 said
        // exactly this.
        assert_eq!(
            syntax_error(b"not json"),
            "invalid character 'o' in literal null (expecting 'u')"
        );
        assert_eq!(
            syntax_error(b"  hello"),
            "invalid character 'h' looking for beginning of value"
        );
        assert_eq!(syntax_error(b"tru"), "unexpected end of JSON input");
        assert_eq!(syntax_error(b""), "unexpected end of JSON input");
        assert_eq!(
            syntax_error(b"true x"),
            "invalid character 'x' after top-level value"
        );
    }
}

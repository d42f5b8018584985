//! apimachinery's `pkg/util/validation/validation.go` name checks, returning its messages
//! (`IsDNS1123Label`, `IsQualifiedName`, `IsValidLabelValue`), and metav1's `ValidateLabels`.

use serde_json::{Value, json};

use super::Path;
use crate::error::Cause;
use crate::schema::field::invalid;

pub const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn label_chars(s: &str) -> bool {
    s.bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_chars(s) {
        errs.push(DNS1123_LABEL.to_string());
    }
    errs
}

const DNS1035_LABEL: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

/// `IsDNS1035Label`: a DNS-1123 label that starts with a letter.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_chars(s) || !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        errs.push(DNS1035_LABEL.to_string());
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if s.is_empty() || !s.split('.').all(label_chars) {
        errs.push(DNS1123_SUBDOMAIN.to_string());
    }
    errs
}

/// `qualifiedNameRegexp`: `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn qualified_chars(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// `IsQualifiedName`: an optional DNS subdomain prefix and `/`, then a name part.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            errs.push(format!("a qualified name {QUALIFIED_NAME} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !qualified_chars(name) {
        errs.push(format!("name part {QUALIFIED_NAME}"));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !qualified_chars(value) {
        errs.push(LABEL_VALUE.to_string());
    }
    errs
}

/// metav1 `ValidateLabels`: each key a qualified name, each value a label value, both reported
/// at the map's path.
pub fn labels(labels: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (k, v) in labels.as_object().into_iter().flatten() {
        for m in qualified_name(k) {
            causes.push(invalid(at.as_str(), &json!(k), &m));
        }
        let Some(value) = v.as_str() else {
            // Go would not decode it into a `map[string]string` at all.
            causes.push(invalid(at.as_str(), v, "must be a string"));
            continue;
        };
        for m in label_value(value) {
            causes.push(invalid(at.as_str(), &json!(value), &m));
        }
    }
    causes
}

/// `ValidateAnnotations`' key check: qualified names, compared in lower case.
pub fn annotation_keys(annotations: &Value, at: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    for k in annotations
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        for m in qualified_name(&k.to_lowercase()) {
            causes.push(invalid(at.as_str(), &json!(k), &m));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_are_worded_as_apimachinery_words_them() {
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(qualified_name("Team_1").is_empty());
        assert_eq!(
            qualified_name("-x"),
            [format!("name part {QUALIFIED_NAME}")]
        );
        assert_eq!(
            qualified_name("Example.com/x"),
            [format!("prefix part {DNS1123_SUBDOMAIN}")]
        );
        assert_eq!(
            qualified_name("a/"),
            [
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_NAME}")
            ]
        );
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert!(label_value("").is_empty());
        assert_eq!(label_value("bad value"), [LABEL_VALUE]);
        assert_eq!(dns1123_label("Web_1"), [DNS1123_LABEL]);
    }
}

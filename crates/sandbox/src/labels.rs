//! Label and field selectors.
//!
//! Both the string form (`?labelSelector=app in (a,b),!legacy`) and the structured form
//! (`metav1.LabelSelector`, as in a webhook's `objectSelector`) compile to the same list of
//! [`Requirement`]s; a selector matches when every requirement does (an empty one matches all).

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => {
                !value.is_some_and(|v| self.values.contains(v))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(v), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|b| b.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    v > bound
                } else {
                    v < bound
                }
            }
        }
    }
}

/// A compiled selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub requirements: Vec<Requirement>,
    /// `metav1.LabelSelector` can be explicitly "match nothing" (a nil selector in some APIs);
    /// string selectors never are.
    pub matches_nothing: bool,
}

impl Selector {
    pub fn everything() -> Self {
        Selector::default()
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty() && !self.matches_nothing
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches the `metadata.labels` of a JSON object.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(&labels_of(object))
    }

    /// Parses the string form used in `?labelSelector=`.
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in split_top_level(input)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(Selector {
            requirements,
            matches_nothing: false,
        })
    }

    /// Compiles a structured `metav1.LabelSelector` (`matchLabels` + `matchExpressions`).
    /// An absent selector (`null`) matches everything, as for webhook selectors.
    pub fn from_label_selector(selector: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if selector.is_null() {
            return Ok(Selector::everything());
        }
        if let Some(map) = selector.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in map {
                let v = v
                    .as_str()
                    .ok_or_else(|| format!("matchLabels.{k}: value must be a string"))?;
                validate_key(k)?;
                requirements.push(Requirement {
                    key: k.clone(),
                    operator: Operator::Equals,
                    values: vec![v.to_string()],
                });
            }
        }
        if let Some(exprs) = selector.get("matchExpressions").and_then(Value::as_array) {
            for (i, e) in exprs.iter().enumerate() {
                let key = e["key"]
                    .as_str()
                    .ok_or_else(|| format!("matchExpressions[{i}].key: Required value"))?;
                validate_key(key)?;
                let values: Vec<String> = e["values"]
                    .as_array()
                    .map(|vs| {
                        vs.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let operator = match e["operator"].as_str().unwrap_or_default() {
                    "In" => Operator::In,
                    "NotIn" => Operator::NotIn,
                    "Exists" => Operator::Exists,
                    "DoesNotExist" => Operator::DoesNotExist,
                    other => {
                        return Err(format!(
                            "matchExpressions[{i}].operator: Invalid value: \"{other}\": not a valid selector operator"
                        ));
                    }
                };
                let needs_values = matches!(operator, Operator::In | Operator::NotIn);
                if needs_values && values.is_empty() {
                    return Err(format!(
                        "matchExpressions[{i}].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
                    ));
                }
                if !needs_values && !values.is_empty() {
                    return Err(format!(
                        "matchExpressions[{i}].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                    ));
                }
                requirements.push(Requirement {
                    key: key.to_string(),
                    operator,
                    values,
                });
            }
        }
        Ok(Selector {
            requirements,
            matches_nothing: false,
        })
    }
}

/// The `metadata.labels` of a JSON object as a sorted map (non-string values are ignored).
pub fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Splits on commas that are not inside `( … )`.
fn split_top_level(input: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!(
                        "unable to parse requirement: unexpected ')' in {input:?}"
                    ));
                }
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!(
            "unable to parse requirement: found '', expected: ')' in {input:?}"
        ));
    }
    parts.push(&input[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        let key = key.trim();
        validate_key(key)?;
        return Ok(Requirement {
            key: key.to_string(),
            operator: Operator::DoesNotExist,
            values: vec![],
        });
    }
    // Set-based: `key in (a,b)` / `key notin (a,b)`.
    for (word, operator) in [(" notin ", Operator::NotIn), (" in ", Operator::In)] {
        if let Some(idx) = part.find(word) {
            let key = part[..idx].trim();
            let rest = part[idx + word.len()..].trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(|| {
                    format!("unable to parse requirement: found '{rest}', expected: '('")
                })?;
            validate_key(key)?;
            let values: Vec<String> = inner
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            for v in &values {
                validate_value(key, v)?;
            }
            return Ok(Requirement {
                key: key.to_string(),
                operator,
                values,
            });
        }
    }
    for (token, operator) in [
        ("!=", Operator::NotEquals),
        ("==", Operator::Equals),
        ("=", Operator::Equals),
        (">", Operator::GreaterThan),
        ("<", Operator::LessThan),
    ] {
        if let Some(idx) = part.find(token) {
            let key = part[..idx].trim();
            let value = part[idx + token.len()..].trim();
            validate_key(key)?;
            validate_value(key, value)?;
            if matches!(operator, Operator::GreaterThan | Operator::LessThan)
                && value.parse::<i64>().is_err()
            {
                return Err(format!(
                    "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer: {value}"
                ));
            }
            return Ok(Requirement {
                key: key.to_string(),
                operator,
                values: vec![value.to_string()],
            });
        }
    }
    let key = part.trim();
    validate_key(key)?;
    Ok(Requirement {
        key: key.to_string(),
        operator: Operator::Exists,
        values: vec![],
    })
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Label keys: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
fn validate_key(key: &str) -> Result<(), String> {
    let name = key.rsplit_once('/').map_or(key, |(_, n)| n);
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(is_name_char)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "unable to parse requirement: <nil>: Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        ))
    }
}

fn validate_value(key: &str, value: &str) -> Result<(), String> {
    let ok = value.is_empty()
        || (value.len() <= 63
            && value.chars().all(is_name_char)
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "unable to parse requirement: values[0][{key}]: Invalid value: \"{value}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        ))
    }
}

/// A field selector (`?fieldSelector=metadata.name=x,metadata.namespace!=y`): only equality
/// and inequality, as kube-apiserver supports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    pub terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    pub fn parse(input: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for part in input.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{input}'; can't understand '{part}'"
                ));
            };
            terms.push((field.trim().to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    /// Matches on the raw JSON paths; the API server matches on each registry's selectable
    /// fields instead (`apiserver::fields`).
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let actual = field_value(object, field);
            (actual.as_deref().unwrap_or("") == value) == *equal
        })
    }
}

/// Reads a dotted field path (`metadata.name`, `spec.nodeName`, `type`) as a string.
pub(crate) fn field_value(object: &Value, path: &str) -> Option<String> {
    let mut cur = object;
    for seg in path.split('.') {
        cur = cur.get(seg)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn string_selectors_cover_every_operator() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        for (sel, want) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("app in (db, web)", true),
            ("app notin (db,web)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier in (front)", true),
            ("app=web,tier=back", false),
            ("n>4", true),
            ("n<5", false),
            ("lien.dev/in-use", false),
        ] {
            let s = Selector::parse(sel).expect(sel);
            assert_eq!(s.matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn bad_string_selectors_are_refused() {
        assert!(Selector::parse("app in (a").is_err());
        assert!(Selector::parse("-bad=1").is_err());
        assert!(Selector::parse("n>x").is_err());
        assert!(Selector::parse("app=a b").is_err());
    }

    #[test]
    fn structured_selectors() {
        let s = Selector::from_label_selector(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]
        }))
        .expect("valid");
        assert!(s.matches(&labels(&[("app", "web")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "back")])));
        assert!(
            Selector::from_label_selector(&json!({}))
                .expect("empty")
                .is_everything()
        );
        assert!(
            Selector::from_label_selector(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            )
            .is_err()
        );
    }

    #[test]
    fn field_selectors() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}, "type": "Opaque"});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .expect("ok")
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .expect("ok")
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("metadata.namespace==ns,type=Opaque")
                .expect("ok")
                .matches(&obj)
        );
    }
}

//! Kubernetes' syntax rules for names, label keys and values, kinds and API versions, as
//! apimachinery's `validation` package states them (`IsDNS1123Subdomain`, `IsDNS1123Label`,
//! `IsQualifiedName`, `IsValidLabelValue`, `IsValidPathSegmentName`). Pure functions over
//! `&str`; each returns why a value is not valid, in apimachinery's words, or `None`.
//!
//! They are small grammars over ASCII, written out rather than compiled from regexes so that
//! the webhook's Usage path allocates nothing and cannot fail to build a pattern.

const DNS1123_LABEL_MAX: usize = 63;
const DNS1123_SUBDOMAIN_MAX: usize = 253;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn dns1123_label(s: &str) -> Option<String> {
    if s.len() > DNS1123_LABEL_MAX {
        return Some(format!(
            "must be no more than {DNS1123_LABEL_MAX} characters"
        ));
    }
    if !label_shape(s) {
        return Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')".to_owned(),
        );
    }
    None
}

fn label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            is_lower_alnum(f)
                && is_lower_alnum(l)
                && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

/// One or more DNS labels joined by `.`, at most 253 characters.
pub fn dns1123_subdomain(s: &str) -> Option<String> {
    if s.len() > DNS1123_SUBDOMAIN_MAX {
        return Some(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX} characters"
        ));
    }
    if s.is_empty() || !s.split('.').all(label_shape) {
        return Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com')".to_owned(),
        );
    }
    None
}

/// The names RBAC accepts (`Role`, `ClusterRole` and their bindings, e.g.
/// `system:controller:job-controller`): any string that can be a URL path segment.
pub fn path_segment_name(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if s == "." || s == ".." {
        return Some(format!("may not be '{s}'"));
    }
    if s.contains('/') || s.contains('%') {
        return Some("may not contain '/' or '%'".to_owned());
    }
    None
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters: the name part of a
/// qualified name and a non-empty label value.
fn name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters.
pub fn qualified_name(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("prefix part must be non-empty".to_owned());
        }
        if let Some(why) = dns1123_subdomain(prefix) {
            return Some(format!("prefix part {why}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".to_owned());
    }
    if name.len() > QUALIFIED_NAME_MAX {
        return Some(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX} characters"
        ));
    }
    if !name_part(name) {
        return Some(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc'), with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned(),
        );
    }
    None
}

/// A label value: empty, or a name part of at most 63 characters.
pub fn label_value(s: &str) -> Option<String> {
    if s.len() > LABEL_VALUE_MAX {
        return Some(format!("must be no more than {LABEL_VALUE_MAX} characters"));
    }
    if !s.is_empty() && !name_part(s) {
        return Some(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345')".to_owned(),
        );
    }
    None
}

/// A kind: what a CRD may declare as `names.kind` (a letter first, its lower case a DNS-1035
/// label), e.g. `ConfigMap`.
pub fn kind(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = b.len() <= DNS1123_LABEL_MAX
        && b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-');
    (!ok).then(|| {
        "must be a kind as its CRD declares it: letters, digits and '-', starting with a letter, at most 63 characters (e.g. 'ConfigMap')".to_owned()
    })
}

/// An API version: `version` for the core group, else `group/version`, the group a DNS
/// subdomain and the version a DNS label (e.g. `v1`, `apps/v1`, `eks.example.io/v1beta1`).
pub fn api_version(s: &str) -> Option<String> {
    let (group, version) = match s.split_once('/') {
        Some((group, version)) => (Some(group), version),
        None => (None, s),
    };
    let group_ok = group.is_none_or(|g| dns1123_subdomain(g).is_none());
    let version_ok = version
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_lowercase)
        && dns1123_label(version).is_none();
    (!(group_ok && version_ok)).then(|| {
        "must be 'version' or 'group/version', the group a DNS subdomain and the version a lowercase name starting with a letter (e.g. 'v1', 'apps/v1', 'eks.example.io/v1beta1')".to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_apimachinery() {
        assert_eq!(dns1123_subdomain("settings.v2"), None);
        assert!(dns1123_subdomain("Settings").is_some());
        assert!(dns1123_subdomain("a..b").is_some());
        assert!(dns1123_subdomain(&"a".repeat(254)).is_some());
        assert_eq!(dns1123_label("team-a"), None);
        assert!(dns1123_label("team.a").is_some());
        assert_eq!(path_segment_name("system:controller:job-controller"), None);
        assert!(path_segment_name("a/b").is_some());
        assert!(path_segment_name("..").is_some());
    }

    #[test]
    fn label_keys_and_values() {
        assert_eq!(qualified_name("app"), None);
        assert_eq!(qualified_name("app.kubernetes.io/name"), None);
        assert!(qualified_name("bad key").is_some());
        assert!(qualified_name("/x").is_some());
        assert!(qualified_name("Example.com/x").is_some());
        assert!(qualified_name(&"a".repeat(64)).is_some());
        assert_eq!(label_value(""), None);
        assert_eq!(label_value("v1.2_3"), None);
        assert!(label_value("-x").is_some());
        assert!(label_value(&"a".repeat(64)).is_some());
    }

    #[test]
    fn kinds_and_api_versions() {
        assert_eq!(kind("ConfigMap"), None);
        assert!(kind("Config Map").is_some());
        assert!(kind("").is_some());
        assert_eq!(api_version("v1"), None);
        assert_eq!(api_version("eks.example.io/v1beta1"), None);
        assert!(api_version("apps/").is_some());
        assert!(api_version("Apps/v1").is_some());
        assert!(api_version("apps/v1/x").is_some());
    }
}

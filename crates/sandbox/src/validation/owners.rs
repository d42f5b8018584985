//! apimachinery's `ValidateOwnerReferences` and `ValidateFinalizers`
//! (`apimachinery/pkg/api/validation/objectmeta.go`), and core's extra finalizer-name check
//! (`pkg/apis/core/validation` `validateKubeFinalizerName`), worded as kube words them. Lien
//! reads both fields: a sandbox that stored what kube-apiserver refuses would let a test pass
//! that fails on a cluster.

use serde_json::{Value, json};

use super::names::qualified_name;
use crate::error::Cause;
use crate::schema::field::{go_quote, invalid};

const FINALIZERS: &str = "metadata.finalizers";
const OWNER_REFERENCES: &str = "metadata.ownerReferences";

/// The finalizers kube itself defines (`helper.IsStandardFinalizerName`).
const STANDARD_FINALIZERS: [&str; 3] = ["kubernetes", "orphan", "foregroundDeletion"];

/// `ValidateFinalizers`: each a qualified name (reported at the list's path, without index);
/// `orphan` and `foregroundDeletion` not both.
pub fn finalizers(finalizers: &Value) -> Vec<Cause> {
    let names: Vec<&str> = finalizers
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut causes = Vec::new();
    for name in &names {
        for message in qualified_name(name) {
            causes.push(invalid(FINALIZERS, &json!(name), &message));
        }
    }
    if names.contains(&"orphan") && names.contains(&"foregroundDeletion") {
        causes.push(Cause::new(
            crate::schema::field::INVALID,
            FINALIZERS,
            format!(
                "Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                names.iter().map(|n| go_quote(n)).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    causes
}

/// Core's `validateKubeFinalizerName`, per index: a finalizer without a `/` must be standard.
pub fn kube_finalizer_names(finalizers: &Value) -> Vec<Cause> {
    finalizers
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, f)| Some((i, f.as_str()?)))
        .filter(|(_, name)| !name.contains('/') && !STANDARD_FINALIZERS.contains(name))
        .map(|(i, name)| {
            invalid(
                &format!("{FINALIZERS}[{i}]"),
                &json!(name),
                "name is neither a standard finalizer name nor is it fully qualified",
            )
        })
        .collect()
}

/// `schema.FromAPIVersionAndKind`'s group and version: `v1` is the core group's, `g/v` a
/// group's; anything else does not parse, and the version is then empty.
fn group_version(api_version: &str) -> (&str, &str) {
    match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] => ("", version),
        [group, version] => (group, version),
        _ => ("", ""),
    }
}

/// A `*bool` as Go's `%#v` prints it: `(*bool)(nil)`, or an address (which differs run to run;
/// the differential's normalization replaces it).
fn go_bool_pointer(value: &Value) -> &'static str {
    if value.is_boolean() {
        "(*bool)(0xc000010000)"
    } else {
        "(*bool)(nil)"
    }
}

/// One owner reference as Go's `%#v` prints a `v1.OwnerReference`.
fn go_owner_reference(r: &Value) -> String {
    let text = |k: &str| go_quote(r[k].as_str().unwrap_or_default());
    format!(
        "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
        text("apiVersion"),
        text("kind"),
        text("name"),
        text("uid"),
        go_bool_pointer(&r["controller"]),
        go_bool_pointer(&r["blockOwnerDeletion"]),
    )
}

/// `ValidateOwnerReferences`: each reference complete and not to a banned owner kind, and at
/// most one with `controller: true`.
pub fn owner_references(references: &Value) -> Vec<Cause> {
    let Some(references) = references.as_array() else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    let mut first_controller: Option<String> = None;
    for r in references {
        let text = |k: &str| r[k].as_str().unwrap_or_default();
        let (group, version) = group_version(text("apiVersion"));
        let field = |name: &str| format!("{OWNER_REFERENCES}.{name}");
        if version.is_empty() {
            causes.push(invalid(
                &field("apiVersion"),
                &json!(text("apiVersion")),
                "version must not be empty",
            ));
        }
        for (key, what) in [("kind", "kind"), ("name", "name"), ("uid", "uid")] {
            if text(key).is_empty() {
                causes.push(invalid(
                    &field(key),
                    &json!(""),
                    &format!("{what} must not be empty"),
                ));
            }
        }
        // `BannedOwners`: a core Event may own nothing.
        if group.is_empty() && version == "v1" && text("kind") == "Event" {
            causes.push(Cause::new(
                crate::schema::field::INVALID,
                OWNER_REFERENCES,
                format!(
                    "Invalid value: {}: /v1, Kind=Event is disallowed from being an owner",
                    go_owner_reference(r)
                ),
            ));
        }
        if r["controller"].as_bool() == Some(true) {
            let this = format!("{}/{}", text("kind"), text("name"));
            match &first_controller {
                Some(first) => causes.push(Cause::new(
                    crate::schema::field::INVALID,
                    OWNER_REFERENCES,
                    format!(
                        "Invalid value: []v1.OwnerReference{{{}}}: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}",
                        references
                            .iter()
                            .map(go_owner_reference)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
                None => first_controller = Some(this),
            }
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    // The words are kube-apiserver 1.32's, as the differential recorded them
    // (`invalid/configmap-bad-finalizer`, `kubectl-delete/owner-reference-invalid`,
    // `kubectl-delete/owner-reference-two-controllers`).

    #[test]
    fn a_finalizer_is_a_qualified_name_and_without_a_slash_a_standard_one() {
        let list = json!(["no slash here!"]);
        let causes: Vec<String> = finalizers(&list)
            .into_iter()
            .chain(kube_finalizer_names(&list))
            .map(|c| c.message_with_field())
            .collect();
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert!(causes[0].starts_with(
            "metadata.finalizers: Invalid value: \"no slash here!\": name part must consist of alphanumeric characters"
        ));
        assert_eq!(
            causes[1],
            "metadata.finalizers[0]: Invalid value: \"no slash here!\": name is neither a standard finalizer name nor is it fully qualified"
        );
        let fine = json!(["kubernetes", "foregroundDeletion", "lien.dev/in-use"]);
        assert!(finalizers(&fine).is_empty());
        assert!(kube_finalizer_names(&fine).is_empty());
        assert_eq!(
            finalizers(&json!(["orphan", "foregroundDeletion"])).len(),
            1
        );
    }

    #[test]
    fn an_owner_reference_is_complete_and_names_one_controller() {
        let missing_uid = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "a"}]);
        let causes = owner_references(&missing_uid);
        assert_eq!(causes.len(), 1);
        assert_eq!(
            causes[0].message_with_field(),
            "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"
        );
        let two = json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "2", "controller": true},
        ]);
        let causes = owner_references(&two);
        assert_eq!(causes.len(), 1);
        assert!(causes[0].message.ends_with(
            "Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and ConfigMap/b"
        ));
        assert!(causes[0].message.starts_with(
            "Invalid value: []v1.OwnerReference{v1.OwnerReference{APIVersion:\"v1\", Kind:\"ConfigMap\", Name:\"a\", UID:\"1\", Controller:(*bool)(0x"
        ));
        let fine = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": true}]);
        assert!(owner_references(&fine).is_empty());
    }
}

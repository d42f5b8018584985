//! Validation of built-in kinds as kube-apiserver's registry strategies validate them
//! (`pkg/apis/*/validation/validation.go` of k/k 1.32), worded as `field.ErrorList` prints.
//!
//! Two sources, in this order of preference:
//! - **Derived from the generated OpenAPI definitions** (`builtins::definitions`, what
//!   `sandbox-gen` wrote from k8s-openapi, itself kube-apiserver's OpenAPI document). The object
//!   is walked alongside its kind's schema, `$ref`s followed, so that (0) JSON types are judged
//!   as Go's decoder judges them (integers by their `int32`/`int64` format, booleans, numbers,
//!   structs and slices of structs: kube-apiserver's 400 `json: cannot unmarshal …`), (1) every
//!   field whose type is `resource.Quantity` is parsed as Go's decoder parses it (kube-apiserver
//!   refuses the body with 400 before validating anything), and (2) the per-type rules below run
//!   wherever their
//!   type occurs — a `PodSpec` in a Pod, a PodTemplate, a Deployment's, Job's or CronJob's
//!   template — as kube's `ValidatePodSpec` is called from every kind that embeds one. The
//!   OpenAPI document has no enums, bounds or patterns for built-in kinds (kube's rules live in
//!   Go), and Kubernetes 1.32 has no declarative validation tags yet (they start in 1.33), so
//!   those cannot be derived.
//! - **Written per type and kind** (`rules`), each citing kube's function, for everything kube
//!   decides in Go: bounds, enums, names, cross-field checks.
//!
//! Pure decision logic: no I/O, nothing panics on user input.

pub(crate) mod kinds;
pub(crate) mod names;
mod owners;
mod quantity;
pub(crate) mod rules;

use serde_json::Value;

use crate::error::{ApiError, Cause};
use crate::registry::ResourceType;

/// `field.Path` as `String()` prints it: `spec.containers[0].name`, `data[key]`.
#[derive(Clone, Debug, Default)]
pub struct Path(String);

impl Path {
    pub fn root(name: &str) -> Path {
        Path(name.to_string())
    }

    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    pub fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }

    pub fn key(&self, k: &str) -> Path {
        Path(format!("{}[{k}]", self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `metadata.annotations` may hold at most this many bytes of keys and values
/// (`apimachinery/pkg/api/validation/objectmeta.go` `TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: i64 = 256 * 1024;

const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// Validates an object: `Err` with kube-apiserver's 400 when a built-in kind's body would not
/// decode (a malformed quantity), otherwise the field errors in kube's order: metadata, then
/// `kind_rules` (what the kind's strategy found, [`crate::strategy::Strategy::validate`]),
/// then the rules derived for the built-in types it embeds.
///
/// Every kind, custom ones included, gets the metadata checks kube's `ValidateObjectMeta`
/// makes; only built-in kinds get the derived rules.
pub fn validate(
    rt: &ResourceType,
    version: &str,
    object: &Value,
    kind_rules: Vec<Cause>,
) -> Result<Vec<Cause>, ApiError> {
    let mut causes = metadata(rt, object);
    let Some(walk) = Walk::of_builtin(rt, version, object) else {
        causes.extend(kind_rules);
        return Ok(causes);
    };
    if let Some(error) = walk.undecodable.first() {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {error}",
            kind = rt.kind
        )));
    }
    causes.extend(kind_rules);
    causes.extend(walk.causes);
    // `errors.NewAggregate` drops repeated messages; so does kube's `Invalid` message.
    let mut seen = std::collections::HashSet::new();
    causes.retain(|c| seen.insert((c.field.clone(), c.message.clone())));
    Ok(causes)
}

/// What apimachinery's `DefaultUnstructuredConverter` says of a built-in object it cannot
/// convert into its Go type (the first error), as a strategic merge patch meets it.
pub fn unconvertible(rt: &ResourceType, version: &str, object: &Value) -> Option<String> {
    Walk::of_builtin(rt, version, object)?
        .unconvertible
        .into_iter()
        .next()
}

/// `ValidateObjectMeta`'s checks not made by `meta::prepare_create` (name and labels), in its
/// order: `ValidateAnnotations` (keys, then total size), `ValidateOwnerReferences`,
/// `ValidateFinalizers`; then, for the kinds validated by core's `ValidateObjectMeta`, its
/// check that a finalizer without a `/` is a standard one.
fn metadata(rt: &ResourceType, object: &Value) -> Vec<Cause> {
    let at = Path::root("metadata").child("annotations");
    let mut causes = names::annotation_keys(&object["metadata"]["annotations"], &at);
    if let Some(annotations) = object["metadata"]["annotations"].as_object() {
        // `ValidateAnnotationsSize`: keys and values, in bytes.
        let total: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        if total as i64 > TOTAL_ANNOTATION_SIZE_LIMIT {
            causes.push(crate::schema::field::too_long(
                "metadata.annotations",
                TOTAL_ANNOTATION_SIZE_LIMIT,
            ));
        }
    }
    causes.extend(owners::owner_references(
        &object["metadata"]["ownerReferences"],
    ));
    let finalizers = &object["metadata"]["finalizers"];
    causes.extend(owners::finalizers(finalizers));
    // The kinds whose strategies call apimachinery's `ValidateObjectMeta` directly (custom
    // resources, CRDs, webhook configurations, APIServices) skip core's extra check.
    let core_meta = !rt.is_custom()
        && !matches!(
            rt.group.as_str(),
            "apiextensions.k8s.io" | "admissionregistration.k8s.io" | "apiregistration.k8s.io"
        );
    if core_meta {
        causes.extend(owners::kube_finalizer_names(finalizers));
    }
    causes
}

/// The walk of an object alongside its schema.
#[derive(Default)]
struct Walk {
    /// Decoding errors (the first one is reported, as Go's decoder stops at it).
    undecodable: Vec<String>,
    /// The same errors as apimachinery's unstructured converter words them (`cannot convert
    /// int64 to string`), for a strategic merge patch, which converts a map, not JSON.
    unconvertible: Vec<String>,
    causes: Vec<Cause>,
}

/// Deep enough for every built-in type; guards against a pathological schema cycle.
const MAX_DEPTH: usize = 64;

/// Where Go's decoder is, for its `UnmarshalTypeError`: the struct whose field is being decoded
/// and the JSON field names from the root (array indexes and map keys are not pushed).
#[derive(Clone, Default)]
struct GoField {
    owner: String,
    fields: String,
}

/// Definitions whose Go type unmarshals itself, with errors of its own: the walk does not
/// judge their JSON type.
fn unmarshals_itself(name: &str) -> bool {
    name.starts_with("io.k8s.apimachinery.pkg.api.resource.")
        || name.starts_with("io.k8s.apimachinery.pkg.util.intstr.")
        || name.starts_with("io.k8s.apimachinery.pkg.runtime.")
        || matches!(
            name,
            "io.k8s.apimachinery.pkg.apis.meta.v1.Time"
                | "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
                | "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"
        )
}

/// The Go type a definition names: `io.k8s.api.apps.v1.DeploymentSpec` is `v1.DeploymentSpec`.
fn go_struct(name: &str) -> String {
    let mut parts = name.rsplit('.');
    let short = parts.next().unwrap_or(name);
    match parts.next() {
        Some(package) => format!("{package}.{short}"),
        None => short.to_string(),
    }
}

impl Walk {
    /// A built-in object walked alongside its kind's schema; `None` for a custom resource.
    fn of_builtin(rt: &ResourceType, version: &str, object: &Value) -> Option<Walk> {
        if rt.is_custom() {
            return None;
        }
        let builtin = crate::builtins::find(&rt.group, version, &rt.plural)?;
        let mut walk = Walk::default();
        walk.value(
            &serde_json::json!({"$ref": format!("#/components/schemas/{}", builtin.schema)}),
            object,
            &Path::default(),
            &GoField::default(),
            0,
        );
        Some(walk)
    }

    fn value(&mut self, schema: &Value, value: &Value, path: &Path, go: &GoField, depth: usize) {
        if depth > MAX_DEPTH || value.is_null() {
            return;
        }
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let name = crate::builtins::ref_name(reference);
            if name == QUANTITY {
                self.quantity(value);
                return;
            }
            // apiextensions' JSONSchemaProps is recursive and validated by the CRD rules.
            if name.contains("JSONSchemaProps") || unmarshals_itself(name) {
                return;
            }
            let Some(def) = crate::builtins::definitions().get(name) else {
                return;
            };
            if def.get("properties").is_some() && !value.is_object() {
                self.type_error(value, go, &go_struct(name));
                return;
            }
            self.causes.extend(rules::of_type(name, value, path));
            let owner = name.rsplit('.').next().unwrap_or(name);
            let inner = GoField {
                owner: owner.to_string(),
                fields: go.fields.clone(),
            };
            self.value(def, value, path, &inner, depth + 1);
            return;
        }
        if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
            return;
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("integer") => return self.integer(schema, value, go),
            Some("boolean") if !value.is_boolean() => {
                return self.type_error(value, go, "bool");
            }
            Some("number") if !value.is_number() => return self.type_error(value, go, "float64"),
            // A `[]byte` is base64 in JSON, decoded as Go's `encoding/json` decodes it.
            Some("string") if schema.get("format").and_then(Value::as_str) == Some("byte") => {
                match value.as_str() {
                    None => return self.type_error(value, go, "[]uint8"),
                    Some(text) => {
                        if let Some(at) = base64_error(text) {
                            self.undecodable
                                .push(format!("illegal base64 data at input byte {at}"));
                        }
                        return;
                    }
                }
            }
            Some("string") if !value.is_string() => return self.type_error(value, go, "string"),
            _ => {}
        }
        // A slice of structs given something else (`[]v1.Container`); slices of named string
        // types (`[]v1.Capability`) cannot be named from the schema, so are not judged.
        if schema.get("type").and_then(Value::as_str) == Some("array") && !value.is_array() {
            if let Some(item) = schema["items"].get("$ref").and_then(Value::as_str) {
                let name = crate::builtins::ref_name(item);
                if !unmarshals_itself(name) && name != QUANTITY {
                    self.type_error(value, go, &format!("[]{}", go_struct(name)));
                }
            }
            return;
        }
        match value {
            Value::Object(map) => {
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (k, v) in map {
                        if let Some(s) = props.get(k) {
                            let field = GoField {
                                owner: go.owner.clone(),
                                fields: if go.fields.is_empty() {
                                    k.clone()
                                } else {
                                    format!("{}.{k}", go.fields)
                                },
                            };
                            self.value(s, v, &path.child(k), &field, depth + 1);
                        }
                    }
                } else if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object())
                {
                    for (k, v) in map {
                        self.value(s, v, &path.key(k), go, depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                    for (i, v) in items.iter().enumerate() {
                        self.value(s, v, &path.index(i), go, depth + 1);
                    }
                }
            }
            _ => {}
        }
    }

    /// An integer field (`int32` or `int64` by its format): anything else, a fraction or a
    /// number out of range is `UnmarshalTypeError`.
    fn integer(&mut self, schema: &Value, value: &Value, go: &GoField) {
        let ty = match schema.get("format").and_then(Value::as_str) {
            Some("int32") => "int32",
            _ => "int64",
        };
        let Value::Number(n) = value else {
            return self.type_error(value, go, ty);
        };
        let fits = match (n.as_i64(), ty) {
            (Some(i), "int32") => i32::try_from(i).is_ok(),
            (Some(_), _) => true,
            (None, _) => false,
        };
        if !fits {
            let what = format!("number {n}");
            self.undecodable.push(unmarshal_error(&what, go, ty));
        }
    }

    fn type_error(&mut self, value: &Value, go: &GoField, ty: &str) {
        let what = crate::patch::go_json_type(value);
        self.undecodable.push(unmarshal_error(what, go, ty));
        // The Go type the JSON decoder put the value in, which the converter names.
        let source = match value {
            Value::Number(n) if n.is_f64() => "float64",
            Value::Number(_) => "int64",
            Value::Bool(_) => "bool",
            Value::String(_) => "string",
            Value::Array(_) => "[]interface {}",
            Value::Object(_) => "map[string]interface {}",
            Value::Null => "<nil>",
        };
        self.unconvertible
            .push(format!("cannot convert {source} to {ty}"));
    }

    /// `Quantity.UnmarshalJSON`: a string (trimmed) or a number, parsed by `ParseQuantity`.
    fn quantity(&mut self, value: &Value) {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return,
        };
        if let Err(e) = quantity::parse(&text) {
            self.undecodable.push(e.to_string());
        }
    }
}

/// Where Go's `base64.StdEncoding` stops decoding `text` (`CorruptInputError`), or `None`
/// when it decodes: the first byte outside the alphabet (newlines are skipped), else a length
/// or padding that does not end a quantum.
fn base64_error(text: &str) -> Option<usize> {
    let alphabet = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let bytes = text.as_bytes();
    let mut data = 0;
    let mut padding = 0;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\r' | b'\n' => {}
            b'=' => padding += 1,
            b if alphabet(b) && padding == 0 => data += 1,
            _ => return Some(i),
        }
    }
    let quantum = data + padding;
    let ends = quantum % 4 == 0 && padding <= 2 && (padding == 0 || data % 4 >= 2);
    (!ends).then(|| bytes.len() - (quantum % 4).max(padding))
}

/// `UnmarshalTypeError.Error()` of Go's `encoding/json` (as sigs.k8s.io/json keeps it).
fn unmarshal_error(what: &str, go: &GoField, ty: &str) -> String {
    format!(
        "json: cannot unmarshal {what} into Go struct field {}.{} of type {ty}",
        go.owner, go.fields
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Walks `object` as an object of the built-in `group/v1 plural`.
    fn walk(group: &str, plural: &str, object: &Value) -> Walk {
        let builtin = crate::builtins::find(group, "v1", plural).expect("a built-in kind");
        let mut walk = Walk::default();
        let root = json!({"$ref": format!("#/components/schemas/{}", builtin.schema)});
        walk.value(&root, object, &Path::default(), &GoField::default(), 0);
        walk
    }

    #[test]
    fn the_schema_walk_finds_every_pod_spec_and_quantity() {
        let pod = json!({"containers": [], "restartPolicy": "Always"});
        let template = json!({"template": {"spec": pod}});
        for (group, plural, object, path) in [
            ("", "pods", json!({"spec": pod}), "spec.containers"),
            (
                "",
                "podtemplates",
                template.clone(),
                "template.spec.containers",
            ),
            (
                "",
                "replicationcontrollers",
                json!({"spec": template}),
                "spec.template.spec.containers",
            ),
            (
                "apps",
                "deployments",
                json!({"spec": template}),
                "spec.template.spec.containers",
            ),
            (
                "apps",
                "statefulsets",
                json!({"spec": template}),
                "spec.template.spec.containers",
            ),
            (
                "apps",
                "daemonsets",
                json!({"spec": template}),
                "spec.template.spec.containers",
            ),
            (
                "batch",
                "jobs",
                json!({"spec": template}),
                "spec.template.spec.containers",
            ),
            (
                "batch",
                "cronjobs",
                json!({"spec": {"jobTemplate": {"spec": template}}}),
                "spec.jobTemplate.spec.template.spec.containers",
            ),
        ] {
            let found = walk(group, plural, &object);
            let fields: Vec<&str> = found.causes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(fields, [path], "{group}/{plural}");
        }
        // Every field typed Quantity, wherever it is: a pod's resources, a PVC's request, a
        // ResourceQuota's hard limits.
        let bad = json!({"spec": {"resources": {"requests": {"storage": "lots"}}}});
        assert_eq!(
            walk("", "persistentvolumeclaims", &bad).undecodable.len(),
            1
        );
        let bad = json!({"spec": {"hard": {"pods": "1x"}}});
        assert_eq!(walk("", "resourcequotas", &bad).undecodable.len(), 1);
        let good = json!({"spec": {"hard": {"pods": "10", "requests.cpu": 2}}});
        assert!(walk("", "resourcequotas", &good).undecodable.is_empty());
    }

    #[test]
    fn json_types_are_judged_as_go_decodes_them() {
        let first = |group, plural, object: Value| {
            walk(group, plural, &object)
                .undecodable
                .first()
                .cloned()
                .unwrap_or_default()
        };
        assert_eq!(
            first("apps", "deployments", json!({"spec": {"replicas": "3"}})),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        assert_eq!(
            first(
                "apps",
                "deployments",
                json!({"spec": {"replicas": 3_000_000_000u64}})
            ),
            "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        assert_eq!(
            first("", "services", json!({"spec": "x"})),
            "json: cannot unmarshal string into Go struct field Service.spec of type v1.ServiceSpec"
        );
        assert_eq!(
            first("", "pods", json!({"spec": {"containers": {"name": "x"}}})),
            "json: cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"
        );
        assert_eq!(
            first(
                "",
                "pods",
                json!({"spec": {"containers": [{"name": "a", "stdin": 1}]}})
            ),
            "json: cannot unmarshal number into Go struct field Container.spec.containers.stdin of type bool"
        );
        // What Go accepts: int-or-string, null, a timestamp's own format, integers in range.
        let fine = json!({"metadata": {"creationTimestamp": null, "generation": 2},
            "spec": {"ports": [{"port": 80, "targetPort": "http"}], "sessionAffinityConfig": null}});
        assert!(walk("", "services", &fine).undecodable.is_empty());
    }

    #[test]
    fn bytes_are_base64_and_strings_strings_as_go_decodes_them() {
        // kube-apiserver 1.32's words for the differential's `invalid/secret-bad-type-data`
        // and `invalid/configmap-data-not-string`.
        let w = walk("", "secrets", &json!({"data": {"k": "not base64!"}}));
        assert_eq!(w.undecodable, ["illegal base64 data at input byte 3"]);
        assert!(
            walk(
                "",
                "secrets",
                &json!({"data": {"k": "aGk=", "l": "aGVsbG8h"}})
            )
            .undecodable
            .is_empty()
        );
        let w = walk("", "configmaps", &json!({"data": {"k": 1}}));
        assert_eq!(
            w.undecodable,
            ["json: cannot unmarshal number into Go struct field ConfigMap.data of type string"]
        );
        assert_eq!(base64_error("abc"), Some(0));
    }

    #[test]
    fn a_strategic_merge_patch_that_does_not_convert_is_worded_as_the_converter_words_it() {
        // kube-apiserver 1.32 on the differential's `kubectl patch configmap cm -p
        // '{"data":{"x":1}}'`: ` "" is invalid: patch: Invalid value: "map[data:map[x:1]]":
        // cannot convert int64 to string`.
        let registry = crate::registry::Registry::with_builtins();
        let cm = registry.get("", "configmaps").expect("built in");
        assert_eq!(
            unconvertible(cm, "v1", &json!({"data": {"x": 1}})).as_deref(),
            Some("cannot convert int64 to string")
        );
        assert_eq!(unconvertible(cm, "v1", &json!({"data": {"x": "1"}})), None);
        assert_eq!(
            crate::schema::field::go_plus_v(&json!({"data": {"x": 1}, "a": [true, null]})),
            "map[a:[true <nil>] data:map[x:1]]"
        );
    }

    #[test]
    fn annotations_may_hold_256_kib() {
        let at_limit = json!({"metadata": {"annotations": {"k": "x".repeat(256 * 1024 - 1)}}});
        let cm = crate::registry::Registry::with_builtins();
        let cm = cm.get("", "configmaps").expect("built in");
        assert!(metadata(cm, &at_limit).is_empty());
        let over = json!({"metadata": {"annotations": {"k": "x".repeat(256 * 1024)}}});
        assert_eq!(
            metadata(cm, &over)[0].message,
            "Too long: may not be more than 262144 bytes"
        );
    }
}

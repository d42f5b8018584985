//! The `scale` subresource: an `autoscaling/v1` `Scale` view of a workload's replicas
//! (k/k `pkg/registry/apps/deployment/storage/storage.go` `ScaleREST`, the ReplicaSet,
//! StatefulSet and ReplicationController registries, and for custom resources
//! `apiextensions-apiserver/pkg/registry/customresource/etcd.go` with the CRD's
//! `subresources.scale` paths).
//!
//! A read converts the object; a write (update or patch of the Scale) changes the object's
//! replicas only and goes through the object's own update path, with optimistic concurrency on
//! the Scale's `resourceVersion` and admission seeing `autoscaling/v1 Scale` with subresource
//! `scale`.

use serde_json::{Value, json};

use super::options::{WriteOptions, Written};
use super::server::{ApiServer, Target};
use crate::error::{ApiError, Cause};
use crate::patch::PatchKind;
use crate::registry::ResourceType;
use crate::strategy::BuiltinScale;

/// Where a kind keeps its replicas and selector.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalePaths {
    pub spec_replicas: Vec<String>,
    pub status_replicas: Vec<String>,
    pub selector: Selector,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Selector {
    /// A `LabelSelector` at `spec.selector` (apps/v1 workloads).
    LabelSelector,
    /// A label map at `spec.selector` (ReplicationController).
    Map,
    /// A custom resource's `labelSelectorPath`: a string in selector syntax, if declared.
    Path(Option<Vec<String>>),
}

/// `.spec.replicas` → `["spec", "replicas"]`.
fn path(json_path: &str) -> Vec<String> {
    json_path
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The scale paths of a resource at a version, if it has a scale subresource.
pub fn paths(rt: &ResourceType, version: &str) -> Option<ScalePaths> {
    let builtin = |selector| {
        Some(ScalePaths {
            spec_replicas: path(".spec.replicas"),
            status_replicas: path(".status.replicas"),
            selector,
        })
    };
    match crate::strategy::of(rt).scale() {
        Some(BuiltinScale::LabelSelector) => builtin(Selector::LabelSelector),
        Some(BuiltinScale::Map) => builtin(Selector::Map),
        None => {
            // A custom resource's, as its CRD declares it.
            let scale = rt.version(version)?.scale_subresource.as_ref()?;
            Some(ScalePaths {
                spec_replicas: path(scale["specReplicasPath"].as_str()?),
                status_replicas: path(scale["statusReplicasPath"].as_str()?),
                selector: Selector::Path(scale["labelSelectorPath"].as_str().map(path)),
            })
        }
    }
}

fn at<'a>(object: &'a Value, path: &[String]) -> &'a Value {
    path.iter().fold(object, |v, k| &v[k.as_str()])
}

/// `metav1.LabelSelectorAsSelector(s).String()`: requirements sorted by key.
pub fn selector_string(selector: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (k, v) in labels {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default().to_string();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let text = match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// The `Scale` of an object.
pub fn to_scale(paths: &ScalePaths, object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut scale_meta = json!({
        "name": meta["name"],
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
        "creationTimestamp": meta["creationTimestamp"],
    });
    if let Some(ns) = meta["namespace"].as_str() {
        scale_meta["namespace"] = json!(ns);
    }
    let replicas = |p: &[String]| at(object, p).as_i64().unwrap_or(0);
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    let selector = match &paths.selector {
        Selector::LabelSelector => Some(selector_string(&object["spec"]["selector"])),
        Selector::Map => Some(selector_string(
            &json!({"matchLabels": object["spec"]["selector"]}),
        )),
        Selector::Path(Some(p)) => at(object, p).as_str().map(str::to_string),
        Selector::Path(None) => None,
    };
    if let Some(s) = selector.filter(|s| !s.is_empty()) {
        status["selector"] = json!(s);
    }
    let mut spec = json!({});
    let spec_replicas = at(object, &paths.spec_replicas);
    if !spec_replicas.is_null() {
        spec["replicas"] = spec_replicas.clone();
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": spec,
        "status": status,
    })
}

/// The object with the Scale's replicas written at the spec path.
pub(super) fn with_replicas(paths: &ScalePaths, object: &Value, replicas: i64) -> Value {
    let mut new = object.clone();
    let Some((last, parents)) = paths.spec_replicas.split_last() else {
        return new;
    };
    let mut target = &mut new;
    for key in parents {
        if !target[key.as_str()].is_object() {
            target[key.as_str()] = json!({});
        }
        target = &mut target[key.as_str()];
    }
    target[last.as_str()] = json!(replicas);
    new
}

/// `ValidateScale`, and the checks the Scale's REST storage makes on what it is given.
pub(super) fn validate(name: &str, scale: &Value) -> Result<i64, ApiError> {
    if let Some(v) = scale["apiVersion"]
        .as_str()
        .filter(|v| *v != "autoscaling/v1")
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version (autoscaling/v1)"
        )));
    }
    if let Some(k) = scale["kind"].as_str().filter(|k| *k != "Scale") {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind (Scale)"
        )));
    }
    if let Some(n) = scale["metadata"]["name"].as_str().filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let replicas = &scale["spec"]["replicas"];
    let invalid = |message: String| {
        ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![Cause::new("FieldValueInvalid", "spec.replicas", message)],
        )
    };
    match replicas {
        Value::Null => Ok(0),
        v => match v.as_i64() {
            Some(n) if n < 0 => Err(invalid(format!(
                "Invalid value: {n}: must be greater than or equal to 0"
            ))),
            Some(n) if n > i64::from(i32::MAX) => Err(invalid(format!(
                "Invalid value: {n}: must be less than or equal to {}",
                i32::MAX
            ))),
            Some(n) => Ok(n),
            None => Err(ApiError::bad_request(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {} into Go struct field ScaleSpec.spec.replicas of type int32",
                crate::patch::go_json_type(v)
            ))),
        },
    }
}

/// How the new Scale is computed from the current one.
pub enum ScaleChange<'a> {
    Update(Value),
    Patch(PatchKind, &'a [u8]),
}

impl ApiServer {
    fn scale_paths(t: &Target) -> Result<ScalePaths, ApiError> {
        paths(&t.resource, &t.version).ok_or_else(ApiError::path_not_found)
    }

    /// GET …/scale.
    pub fn get_scale(&self, t: &Target) -> Result<Value, ApiError> {
        let paths = Self::scale_paths(t)?;
        Ok(to_scale(&paths, &*self.current(t)?))
    }

    /// PUT or PATCH …/scale: the object's replicas become the new Scale's.
    pub async fn write_scale(
        &self,
        t: &Target,
        change: ScaleChange<'_>,
        write: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let paths = Self::scale_paths(t)?;
        let rt = t.resource.clone();
        for _ in 0..super::options::MAX_RETRIES {
            let current = self.current(t)?;
            let old_scale = to_scale(&paths, &current);
            let (new_scale, explicit_rv) = match &change {
                ScaleChange::Update(body) => (body.clone(), true),
                ScaleChange::Patch(kind, body) => {
                    let patched = match kind {
                        PatchKind::Json => crate::patch::json_patch(&old_scale, body)?,
                        // A Scale has no lists: a strategic merge patch merges as a merge patch.
                        PatchKind::Merge | PatchKind::StrategicMerge => {
                            crate::patch::merge_patch(&old_scale, body)?
                        }
                        PatchKind::Apply => {
                            return Err(ApiError::unsupported_media_type(
                                "application/apply-patch+yaml",
                                &[
                                    "application/json-patch+json",
                                    "application/merge-patch+json",
                                    "application/strategic-merge-patch+json",
                                ],
                            ));
                        }
                    };
                    (patched, super::options::body_sets_resource_version(body))
                }
            };
            let replicas = validate(&t.name, &new_scale)?;
            let current_rv = current["metadata"]["resourceVersion"].clone();
            let wanted_rv = new_scale["metadata"]["resourceVersion"].clone();
            let conditional = wanted_rv.as_str().is_some_and(|s| !s.is_empty());
            if conditional && wanted_rv != current_rv {
                return Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name));
            }
            let new = with_replicas(&paths, &current, replicas);
            match self
                .commit_update(t, &current, new, write, "UpdateOptions", true)
                .await?
            {
                super::options::Commit::Done(mut w) => {
                    w.object = to_scale(&paths, &w.object);
                    return Ok(w);
                }
                super::options::Commit::Raced if conditional && explicit_rv => {
                    return Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name));
                }
                super::options::Commit::Raced => continue,
            }
        }
        Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_kube_apiserver_prints_them() {
        let s = json!({
            "matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [
                {"key": "c", "operator": "In", "values": ["y", "x"]},
                {"key": "d", "operator": "DoesNotExist"},
            ],
        });
        assert_eq!(selector_string(&s), "a=1,b=2,c in (x,y),!d");
        assert_eq!(selector_string(&json!({})), "");
    }

    #[test]
    fn replicas_are_written_at_the_declared_path() {
        let paths = ScalePaths {
            spec_replicas: path(".spec.size"),
            status_replicas: path(".status.size"),
            selector: Selector::Path(Some(path(".status.selector"))),
        };
        let obj = json!({"metadata": {"name": "w"}, "spec": {}, "status": {"size": 2, "selector": "app=w"}});
        let scale = to_scale(&paths, &obj);
        assert_eq!(scale["status"], json!({"replicas": 2, "selector": "app=w"}));
        assert_eq!(scale["spec"], json!({}));
        let new = with_replicas(&paths, &obj, 5);
        assert_eq!(new["spec"]["size"], 5);
    }
}

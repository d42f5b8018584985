//! Strategic merge patch (`application/strategic-merge-patch+json`) for the built-in kinds.
//!
//! Maps merge key by key (`null` deletes). Lists merge only when [`schema::list_kind`] gives
//! them a strategy: lists of objects by their merge key, lists of scalars as sets; every other
//! list is replaced. After a merge the list is ordered as kube-apiserver orders it: the items the
//! patch names in the patch's (or `$setElementOrder`'s) order, interleaved with the server-only
//! items in their old order.
//!
//! Directives: `$patch: replace|delete|merge` in a map or as a list item, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`.

use serde_json::{Map, Value};

use super::schema::{ListKind, list_kind};
use super::{go_json_type, parse_json, rejected_patch, unknown_error};
use crate::error::ApiError;

const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge patch to `target`, an object of the built-in `group`/`kind`.
pub fn strategic_merge_patch(
    target: &Value,
    body: &[u8],
    group: &str,
    kind: &str,
) -> Result<Value, ApiError> {
    let patch = match parse_json(body).map_err(ApiError::bad_request)? {
        Value::Object(m) => m,
        // Go decodes `null` into the empty patch map.
        Value::Null => Map::new(),
        other => {
            return Err(ApiError::bad_request(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_json_type(&other)
            )));
        }
    };
    let Some(original) = target.as_object() else {
        return Err(ApiError::bad_request("invalid JSON document"));
    };
    let ctx = Ctx { group, kind };
    let merged = ctx.merge_map(Some(original), &patch, &mut Vec::new())?;
    Ok(Value::Object(merged.unwrap_or_default()))
}

struct Ctx<'a> {
    group: &'a str,
    kind: &'a str,
}

/// Go's `%v` of a decoded JSON value, as it appears in strategic-merge-patch error messages.
fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_format(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

fn unknown_patch_type(directive: &Value, map: &Map<String, Value>) -> ApiError {
    unknown_error(format!(
        "unknown patch type: {} in map: {}",
        go_format(directive),
        go_format(&Value::Object(map.clone()))
    ))
}

impl Ctx<'_> {
    /// Merges `patch` into `original` (absent: a new map, so only directives and nulls are
    /// stripped). `None` means the map is deleted (`$patch: delete`).
    fn merge_map(
        &self,
        original: Option<&Map<String, Value>>,
        patch: &Map<String, Value>,
        names: &mut Vec<String>,
    ) -> Result<Option<Map<String, Value>>, ApiError> {
        let mut out = original.cloned().unwrap_or_default();
        if let Some(directive) = patch.get("$patch") {
            match directive.as_str() {
                Some("replace") => {
                    let mut rest = patch.clone();
                    rest.remove("$patch");
                    return self.merge_map(None, &rest, names);
                }
                Some("delete") => return Ok(None),
                Some("merge") => {}
                _ => return Err(unknown_patch_type(directive, patch)),
            }
        }
        if let Some(retain) = patch.get("$retainKeys") {
            let keys: Vec<&str> = retain
                .as_array()
                .and_then(|a| a.iter().map(Value::as_str).collect::<Option<Vec<_>>>())
                .ok_or_else(|| ApiError::bad_request("invalid patch format of retainKeys"))?;
            // Every field the patch sets must be one it retains.
            let stray = patch
                .iter()
                .any(|(k, v)| !k.starts_with('$') && !v.is_null() && !keys.contains(&k.as_str()));
            if stray {
                return Err(rejected_patch());
            }
            out.retain(|k, _| keys.contains(&k.as_str()));
        }
        for (k, v) in patch {
            let Some(field) = k.strip_prefix(DELETE_PRIMITIVE) else {
                continue;
            };
            let doomed = v
                .as_array()
                .ok_or_else(|| ApiError::bad_request("invalid patch format of primitive list"))?;
            if let Some(Value::Array(list)) = out.get_mut(field) {
                list.retain(|item| !doomed.contains(item));
            }
        }
        for (k, pv) in patch {
            if k.starts_with('$') {
                continue;
            }
            names.push(k.clone());
            let merged = match pv {
                Value::Null => None,
                Value::Object(pm) => self
                    .merge_map(out.get(k).and_then(Value::as_object), pm, names)?
                    .map(Value::Object),
                Value::Array(items) => {
                    let current = out.get(k).and_then(Value::as_array);
                    self.merge_list(current, items, names)?.map(Value::Array)
                }
                scalar => Some(scalar.clone()),
            };
            names.pop();
            match merged {
                Some(v) => {
                    out.insert(k.clone(), v);
                }
                None => {
                    out.remove(k);
                }
            }
        }
        for (k, order) in patch {
            let Some(field) = k.strip_prefix(SET_ORDER) else {
                continue;
            };
            let order = order.as_array().ok_or_else(|| {
                ApiError::bad_request("invalid patch format of setElementOrder list")
            })?;
            names.push(field.to_string());
            let key = self.merge_key(names);
            names.pop();
            let server: Vec<Value> = original
                .and_then(|o| o.get(field))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if let Some(Value::Array(list)) = out.get_mut(field) {
                let merged = std::mem::take(list);
                *list = normalize_order(merged, order, &server, key);
            }
        }
        Ok(Some(out))
    }

    /// The merge key of the list at `names`: `Some("")` for sets of scalars, `None` when the
    /// list has no strategy.
    fn merge_key(&self, names: &[String]) -> Option<&'static str> {
        match list_kind(self.group, self.kind, None, names) {
            ListKind::Atomic => None,
            ListKind::Set => Some(""),
            ListKind::Map { smp_key, .. } => Some(smp_key),
        }
    }

    fn strip(&self, items: &[Value], names: &mut Vec<String>) -> Result<Vec<Value>, ApiError> {
        let mut out = Vec::new();
        for item in items {
            match item {
                Value::Object(m) => {
                    if let Some(m) = self.merge_map(None, m, names)? {
                        out.push(Value::Object(m));
                    }
                }
                other => out.push(other.clone()),
            }
        }
        Ok(out)
    }

    /// `None` means the list is deleted (a `{"$patch": "delete"}` item).
    fn merge_list(
        &self,
        original: Option<&Vec<Value>>,
        patch: &[Value],
        names: &mut Vec<String>,
    ) -> Result<Option<Vec<Value>>, ApiError> {
        let Some(key) = self.merge_key(names) else {
            return self.strip(patch, names).map(Some);
        };
        // A bare `{"$patch": ...}` item directs the whole list.
        let mut items = Vec::new();
        for item in patch {
            match item.as_object() {
                Some(m) if m.len() == 1 && m.contains_key("$patch") => match m["$patch"].as_str() {
                    Some("replace") => {
                        let rest: Vec<Value> =
                            patch.iter().filter(|i| *i != item).cloned().collect();
                        return self.strip(&rest, names).map(Some);
                    }
                    Some("delete") => return Ok(None),
                    Some("merge") => {}
                    _ => return Err(unknown_patch_type(&m["$patch"], m)),
                },
                _ => items.push(item),
            }
        }
        let server: Vec<Value> = original.cloned().unwrap_or_default();
        let mut merged = server.clone();
        if key.is_empty() {
            for item in &items {
                if item.is_array() {
                    return Err(rejected_patch());
                }
                if !merged.contains(item) {
                    merged.push((*item).clone());
                }
            }
        } else {
            for item in &items {
                let Some(im) = item.as_object() else {
                    if item.is_array() {
                        // ErrNoListOfLists.
                        return Err(rejected_patch());
                    }
                    return Err(unknown_error(format!(
                        "expected a map, but got {}",
                        go_json_type(item)
                    )));
                };
                let Some(wanted) = im.get(key) else {
                    return Err(unknown_error(format!(
                        "map: {} does not contain declared merge key: {key}",
                        go_format(item)
                    )));
                };
                let at = merged.iter().position(|o| o.get(key) == Some(wanted));
                match im.get("$patch").map(|d| (d, d.as_str())) {
                    Some((_, Some("delete"))) => merged.retain(|o| o.get(key) != Some(wanted)),
                    Some((_, Some("replace"))) => {
                        let mut rest = im.clone();
                        rest.remove("$patch");
                        let fresh = self.merge_map(None, &rest, names)?.unwrap_or_default();
                        match at {
                            Some(i) => merged[i] = Value::Object(fresh),
                            None => merged.push(Value::Object(fresh)),
                        }
                    }
                    Some((_, Some("merge"))) | None => {
                        let base = at.and_then(|i| merged[i].as_object());
                        let result = self.merge_map(base, im, names)?;
                        match (at, result) {
                            (Some(i), Some(m)) => merged[i] = Value::Object(m),
                            (Some(i), None) => {
                                merged.remove(i);
                            }
                            (None, Some(m)) => merged.push(Value::Object(m)),
                            (None, None) => {}
                        }
                    }
                    Some((d, _)) => return Err(unknown_patch_type(d, im)),
                }
            }
        }
        let order: Vec<Value> = items.into_iter().cloned().collect();
        Ok(Some(normalize_order(merged, &order, &server, Some(key))))
    }
}

/// The identity of a list item: its merge-key value, or the item itself in a list of scalars.
fn identity<'v>(item: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(k) if !k.is_empty() => item.get(k),
        _ => Some(item),
    }
}

/// kube-apiserver's `normalizeElementOrder`: the items named in `order` come in that order, the
/// others in `server` order, interleaved as its `mergeSortedSlice` does: a server-only item goes
/// first only when the named item is on the server too and after it there; so an item the
/// patch adds comes before the server-only items still waiting (kube-apiserver v1.32: a
/// container `c` patched into `[nginx]` gives `[c, nginx]`; finalizers `[b, c]` patched into
/// `[a]` give `[b, c, a]`, then `[a, d]` into that gives `[b, c, a, d]`).
fn normalize_order(
    merged: Vec<Value>,
    order: &[Value],
    server: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let index_in = |list: &[Value], item: &Value| -> Option<usize> {
        let id = identity(item, key)?;
        list.iter().position(|o| identity(o, key) == Some(id))
    };
    let (mut named, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| index_in(order, item).is_some());
    named.sort_by_key(|item| index_in(order, item));
    server_only.sort_by_key(|item| index_in(server, item).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let (mut named, mut server_only) = (
        named.into_iter().peekable(),
        server_only.into_iter().peekable(),
    );
    loop {
        match (server_only.peek(), named.peek()) {
            (None, None) => break,
            (Some(_), None) => out.extend(server_only.next()),
            (None, Some(_)) => out.extend(named.next()),
            (Some(s), Some(n)) => {
                let server_first = match (index_in(server, s), index_in(server, n)) {
                    (Some(si), Some(ni)) => si < ni,
                    _ => false,
                };
                if server_first {
                    out.extend(server_only.next());
                } else {
                    out.extend(named.next());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"app": "d"}, "finalizers": ["a", "b"],
                         "ownerReferences": [{"uid": "u1", "name": "o1", "kind": "K", "apiVersion": "v1"}]},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "d"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"spec": {
                    "containers": [
                        {"name": "a", "image": "a:1",
                         "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                         "ports": [{"containerPort": 80}]},
                        {"name": "b", "image": "b:1"}
                    ],
                    "volumes": [{"name": "v", "emptyDir": {}}],
                    "tolerations": [{"key": "k1"}]
                }}
            }
        })
    }

    fn smp(patch: Value) -> Result<Value, ApiError> {
        strategic_merge_patch(
            &deployment(),
            patch.to_string().as_bytes(),
            "apps",
            "Deployment",
        )
    }

    fn containers(v: &Value) -> &Value {
        &v["spec"]["template"]["spec"]["containers"]
    }

    #[test]
    fn merge_lists_by_key_and_replace_the_rest() {
        // (name, patch, pointer into the result, expected value there)
        let cases = [
            (
                "container merged by name",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}),
                "/spec/template/spec/containers",
                json!([
                    {"name": "a", "image": "a:1",
                     "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                     "ports": [{"containerPort": 80}]},
                    {"name": "b", "image": "b:2"}
                ]),
            ),
            (
                // kube-apiserver puts an item the patch adds before the server's others.
                "new container first",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "c:1", "x": null}]}}}}),
                "/spec/template/spec/containers/0",
                json!({"name": "c", "image": "c:1"}),
            ),
            (
                "env merged by name inside a container",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "env": [{"name": "Z", "value": "3"}]}]}}}}),
                "/spec/template/spec/containers/0/env",
                json!([{"name": "Z", "value": "3"}, {"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]),
            ),
            (
                "ports merged by containerPort",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "http"}]}]}}}}),
                "/spec/template/spec/containers/0/ports",
                json!([{"containerPort": 80, "name": "http"}]),
            ),
            (
                "tolerations have no strategy and are replaced",
                json!({"spec": {"template": {"spec": {"tolerations": [{"key": "k2"}]}}}}),
                "/spec/template/spec/tolerations",
                json!([{"key": "k2"}]),
            ),
            (
                // `a` stays first: it came before `b` on the server, and `c` follows `b`.
                "finalizers are a merged set",
                json!({"metadata": {"finalizers": ["b", "c"]}}),
                "/metadata/finalizers",
                json!(["a", "b", "c"]),
            ),
            (
                "a new finalizer goes before the server's others",
                json!({"metadata": {"finalizers": ["c"]}}),
                "/metadata/finalizers",
                json!(["c", "a", "b"]),
            ),
            (
                "ownerReferences merge by uid",
                json!({"metadata": {"ownerReferences": [{"uid": "u2", "name": "o2", "kind": "K", "apiVersion": "v1"}]}}),
                "/metadata/ownerReferences",
                json!([{"uid": "u2", "name": "o2", "kind": "K", "apiVersion": "v1"},
                       {"uid": "u1", "name": "o1", "kind": "K", "apiVersion": "v1"}]),
            ),
            (
                "null deletes a map key",
                json!({"metadata": {"labels": {"app": null, "x": "y"}}}),
                "/metadata/labels",
                json!({"x": "y"}),
            ),
            (
                "patch order of named items wins",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "b"}, {"name": "a"}]}}}}),
                "/spec/template/spec/containers/0/name",
                json!("b"),
            ),
        ];
        for (name, patch, pointer, want) in cases {
            let got = smp(patch).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(got.pointer(pointer), Some(&want), "{name}: {got:#}");
        }
    }

    #[test]
    fn directives() {
        let cases = [
            (
                "$patch: delete on a list item",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}}}),
                "/spec/template/spec/containers",
                json!([{"name": "b", "image": "b:1"}]),
            ),
            (
                "$patch: replace as a list element replaces the list",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "z", "image": "z"}, {"$patch": "replace"}]}}}}),
                "/spec/template/spec/containers",
                json!([{"name": "z", "image": "z"}]),
            ),
            (
                "$patch: replace on a map",
                json!({"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}}),
                "/spec/strategy",
                json!({"type": "Recreate"}),
            ),
            (
                "$patch: delete on a map",
                json!({"spec": {"strategy": {"$patch": "delete"}}}),
                "/spec/strategy",
                Value::Null,
            ),
            (
                "$patch: merge is the default",
                json!({"metadata": {"labels": {"$patch": "merge", "b": "2"}}}),
                "/metadata/labels",
                json!({"app": "d", "b": "2"}),
            ),
            (
                "$deleteFromPrimitiveList",
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
                "/metadata/finalizers",
                json!(["b"]),
            ),
            (
                "$setElementOrder",
                json!({"spec": {"template": {"spec": {
                    "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                    "containers": [{"name": "a", "image": "a:2"}]}}}}),
                "/spec/template/spec/containers",
                json!([
                    {"name": "b", "image": "b:1"},
                    {"name": "a", "image": "a:2",
                     "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                     "ports": [{"containerPort": 80}]}
                ]),
            ),
            (
                "$setElementOrder on a primitive list",
                json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}),
                "/metadata/finalizers",
                json!(["b", "a"]),
            ),
            (
                "$retainKeys clears the keys it does not list",
                json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
                "/spec/strategy",
                json!({"type": "Recreate"}),
            ),
            (
                "directives in a new subtree are stripped",
                json!({"spec": {"template": {"spec": {"volumes": [{"name": "w", "$patch": "merge", "secret": {"secretName": "s"}}]}}}}),
                "/spec/template/spec/volumes/0",
                json!({"name": "w", "secret": {"secretName": "s"}}),
            ),
        ];
        for (name, patch, pointer, want) in cases {
            let got = smp(patch).unwrap_or_else(|e| panic!("{name}: {e}"));
            let at = got.pointer(pointer).cloned().unwrap_or(Value::Null);
            assert_eq!(at, want, "{name}: {got:#}");
        }
    }

    #[test]
    fn errors() {
        let cases: [(&str, &[u8], u16, &str); 8] = [
            (
                "not an object",
                b"[]",
                400,
                "json: cannot unmarshal array into Go value of type map[string]interface {}",
            ),
            (
                "not json",
                b"{x",
                400,
                "invalid character 'x' looking for beginning of value",
            ),
            (
                "unknown $patch",
                br#"{"spec":{"strategy":{"$patch":"frob"}}}"#,
                500,
                "unknown patch type: frob in map: map[$patch:frob]",
            ),
            (
                "missing merge key",
                br#"{"spec":{"template":{"spec":{"containers":[{"image":"x"}]}}}}"#,
                500,
                "map: map[image:x] does not contain declared merge key: name",
            ),
            (
                "retainKeys not a list",
                br#"{"spec":{"strategy":{"$retainKeys":"type"}}}"#,
                400,
                "invalid patch format of retainKeys",
            ),
            (
                "patch content outside retainKeys",
                br#"{"spec":{"strategy":{"$retainKeys":["type"],"rollingUpdate":{}}}}"#,
                422,
                "the server rejected our request due to an error in our request",
            ),
            (
                "deleteFromPrimitiveList not a list",
                br#"{"metadata":{"$deleteFromPrimitiveList/finalizers":"a"}}"#,
                400,
                "invalid patch format of primitive list",
            ),
            (
                "setElementOrder not a list",
                br#"{"metadata":{"$setElementOrder/finalizers":"a"}}"#,
                400,
                "invalid patch format of setElementOrder list",
            ),
        ];
        for (name, body, code, message) in cases {
            let e =
                strategic_merge_patch(&deployment(), body, "apps", "Deployment").expect_err(name);
            assert_eq!((e.code, e.message.as_str()), (code, message), "{name}");
        }
    }

    #[test]
    fn service_ports_merge_by_port_and_service_account_secrets_by_name_as_kube_apiserver_does() {
        let svc =
            json!({"spec": {"ports": [{"port": 80, "name": "http"}], "selector": {"a": "1"}}});
        let got = strategic_merge_patch(
            &svc,
            br#"{"spec":{"ports":[{"port":443,"name":"https"}],"selector":{"b":"2"}}}"#,
            "",
            "Service",
        )
        .expect("patches");
        // As kube-apiserver v1.32 answers: the port the patch adds first.
        assert_eq!(
            got["spec"],
            json!({"ports": [{"port": 443, "name": "https"}, {"port": 80, "name": "http"}],
                   "selector": {"a": "1", "b": "2"}})
        );
        let sa = json!({"secrets": [{"name": "a"}], "imagePullSecrets": [{"name": "p"}]});
        let got = strategic_merge_patch(
            &sa,
            br#"{"secrets":[{"name":"b"}],"imagePullSecrets":[{"name":"q"}]}"#,
            "",
            "ServiceAccount",
        )
        .expect("patches");
        assert_eq!(got["secrets"], json!([{"name": "b"}, {"name": "a"}]));
        // No patch strategy on a ServiceAccount's: replaced.
        assert_eq!(got["imagePullSecrets"], json!([{"name": "q"}]));
    }

    #[test]
    fn webhooks_merge_by_name() {
        let cfg = json!({"webhooks": [{"name": "a", "sideEffects": "None"}]});
        let got = strategic_merge_patch(
            &cfg,
            br#"{"webhooks":[{"name":"a","timeoutSeconds":5},{"name":"b"}]}"#,
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        )
        .expect("patches");
        assert_eq!(
            got["webhooks"],
            json!([{"name": "a", "sideEffects": "None", "timeoutSeconds": 5}, {"name": "b"}])
        );
    }

    #[test]
    fn null_patch_is_a_no_op() {
        assert_eq!(smp(Value::Null).expect("no-op"), deployment());
        let got = smp(json!({})).expect("no-op");
        assert_eq!(containers(&got), containers(&deployment()));
    }
}

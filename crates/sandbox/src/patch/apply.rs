//! Server-side apply.
//!
//! The steps follow structured-merge-diff's `Updater.Apply`:
//! 1. merge the applied configuration into the live object (maps key by key, associative lists
//!    and sets item by item, everything else replaced);
//! 2. the applier now owns exactly the paths of its configuration;
//! 3. prune: paths the applier owned last time, no longer applies and nobody else owns are
//!    removed from the object (with their subtrees);
//! 4. compare live with the result: a path that changed and that another manager owns is a
//!    conflict, an error unless `force`, which moves the path to the applier; removed paths
//!    leave every manager.

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement};
use super::managed_fields::{
    Entry, Typed, conflict_error, decode, encode, normalize_time, typed_error, untracked,
    without_managed_fields,
};
use super::schema::{ListKind, key_default};
use crate::error::ApiError;

/// Applies `applied` (an `Apply` patch body, already parsed) for `manager` to `live` (`None`:
/// the object does not exist yet) and returns the new object with its `managedFields`.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    typed: &Typed<'_>,
    now: &str,
) -> Result<Value, ApiError> {
    apply_at(live, applied, manager, "", force, typed, now)
}

/// Server-side apply to the `status` subresource: only `.status` is tracked and the entry
/// carries `subresource: status`. The caller still resets whatever the status strategy does
/// not let through (spec, most of metadata) on the returned object.
pub fn server_side_apply_status(
    live: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
    typed: &Typed<'_>,
    now: &str,
) -> Result<Value, ApiError> {
    apply_at(Some(live), applied, manager, "status", force, typed, now)
}

fn apply_at(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    subresource: &str,
    force: bool,
    typed: &Typed<'_>,
    now: &str,
) -> Result<Value, ApiError> {
    let (group, kind) = (typed.group, typed.kind);
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let live_version = live
        .and_then(|l| l.get("apiVersion"))
        .and_then(Value::as_str);
    if api_version.is_empty() || live_version.is_some_and(|v| v != api_version) {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
            live_version.unwrap_or_default()
        )));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }

    let live_clean = live
        .map(without_managed_fields)
        .unwrap_or_else(|| Value::Object(Map::new()));
    let mut entries = live.map(decode).unwrap_or_default();

    // 2. The applier's new set. Before stripping it also holds apiVersion, kind and
    // metadata.name, which keeps `metadata` from being pruned.
    let full_set = typed
        .to_field_set(applied)
        .map_err(|why| typed_error(api_version, kind, &why))?;
    let new_set = untracked(&full_set, group, kind, subresource);
    let me = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: None,
        subresource: subresource.to_string(),
        set: new_set.clone(),
    };
    let mine = entries.iter().position(|e| e.same_manager(&me));
    let last_set = mine.map(|i| entries[i].set.clone());

    // 1. Merge.
    let mut merged = typed.merge(Some(&live_clean), applied, &mut Vec::new());

    // 3. Prune.
    if let Some(last) = last_set {
        let mut owned = full_set.clone();
        for (i, e) in entries.iter().enumerate() {
            if Some(i) != mine {
                owned = owned.union(&e.set);
            }
        }
        let owned = owned.with_ancestors();
        let mut doomed: Vec<Vec<PathElement>> = Vec::new();
        for p in last.with_ancestors().members() {
            if owned.has(&p) || doomed.iter().any(|d| p.starts_with(d)) {
                continue;
            }
            doomed.push(p);
        }
        for p in &doomed {
            remove_path(&mut merged, p);
        }
    }

    // 4. Conflicts and ownership moves.
    let cmp = typed
        .compare(&live_clean, &merged)
        .filter(|s| untracked(s, group, kind, subresource));
    let changed = cmp.added.union(&cmp.modified);
    let conflicts: Vec<(Entry, FieldSet)> = entries
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != mine)
        .filter_map(|(_, e)| {
            let c = e.set.intersection(&changed);
            (!c.is_empty()).then(|| (e.clone(), c))
        })
        .collect();
    if !force && !conflicts.is_empty() {
        // kube-apiserver's `lastAppliedManager`: kubectl's server-side apply takes over, without
        // conflicts, the fields client-side apply recorded in the last-applied annotation whose
        // values are still live; only the other conflicts are reported.
        let allowed = if manager == KUBECTL {
            allowed_by_last_applied(typed, &live_clean, group, kind, subresource)
        } else {
            None
        };
        let remaining: Vec<(Entry, FieldSet)> = conflicts
            .iter()
            .filter_map(|(e, set)| {
                let rest = match &allowed {
                    Some(allowed) => set.difference(allowed),
                    None => set.clone(),
                };
                (!rest.is_empty()).then(|| (e.clone(), rest))
            })
            .collect();
        if !remaining.is_empty() {
            return Err(conflict_error(&remaining));
        }
    }
    for (i, e) in entries.iter_mut().enumerate() {
        if Some(i) == mine {
            continue;
        }
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }

    // The time moves only when the object changed (a no-op apply keeps it).
    let object_changed = merged != live_clean;
    let time = normalize_time(now);
    match mine {
        Some(i) => {
            let e = &mut entries[i];
            e.set = new_set;
            e.api_version = api_version.to_string();
            if object_changed || e.time.is_none() {
                e.time = Some(time);
            }
        }
        None => entries.push(Entry {
            time: Some(time),
            ..me
        }),
    }
    encode(&mut merged, entries);
    // `lastAppliedUpdater`: kubectl's server-side apply keeps an existing last-applied annotation
    // in step with what it applied, so a later client-side apply diffs against it.
    if manager == KUBECTL
        && merged
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(LAST_APPLIED))
            .is_some()
    {
        let mut last = applied.clone();
        if let Some(a) = last
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.remove(LAST_APPLIED);
        }
        if let Ok(text) = serde_json::to_string(&last) {
            merged["metadata"]["annotations"][LAST_APPLIED] = Value::String(text);
        }
    }
    Ok(merged)
}

/// The field manager `kubectl apply --server-side` uses; the upgrade from client-side apply is
/// made for it only (other managers opt out by their name).
const KUBECTL: &str = "kubectl";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `allowedConflictsFromLastApplied`: the fields of the last-applied annotation whose value
/// the live object still has; `None` without a readable annotation.
fn allowed_by_last_applied(
    typed: &Typed<'_>,
    live: &Value,
    group: &str,
    kind: &str,
    subresource: &str,
) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")?
        .get(LAST_APPLIED)?
        .as_str()
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    let set = typed.to_field_set(&last).ok()?;
    let cmp = typed.compare(&last, live);
    Some(
        untracked(&set, group, kind, subresource)
            .difference(&cmp.modified)
            .difference(&cmp.added)
            .difference(&cmp.removed),
    )
}

impl Typed<'_> {
    /// The applied configuration `r` merged into `l`.
    fn merge(&self, l: Option<&Value>, r: &Value, names: &mut Vec<String>) -> Value {
        match r {
            Value::Object(rm) if names.is_empty() || !self.atomic_map(names) => {
                let mut out = l.and_then(Value::as_object).cloned().unwrap_or_default();
                for (k, rv) in rm {
                    if rv.is_null() {
                        // Owned but unset: Go types drop nulls on decode.
                        out.remove(k);
                        continue;
                    }
                    names.push(k.clone());
                    let merged = self.merge(out.get(k), rv, names);
                    names.pop();
                    out.insert(k.clone(), merged);
                }
                Value::Object(out)
            }
            Value::Array(ra) => {
                let kind = self.list_kind(names);
                let la = l.and_then(Value::as_array);
                match (kind, la) {
                    (ListKind::Atomic, _) | (_, None) => r.clone(),
                    (kind, Some(la)) => match (self.keyed(la, kind), self.keyed(ra, kind)) {
                        (Some(lk), Some(rk)) => {
                            Value::Array(self.merge_items(&lk, &rk, kind, names))
                        }
                        _ => r.clone(),
                    },
                }
            }
            _ => r.clone(),
        }
    }

    /// structured-merge-diff's list merge order: live items keep their places, applied items
    /// follow the applied order, and items only in the live list stay where they were relative
    /// to the shared ones.
    fn merge_items(
        &self,
        lhs: &[(PathElement, &Value)],
        rhs: &[(PathElement, &Value)],
        kind: ListKind,
        names: &mut Vec<String>,
    ) -> Vec<Value> {
        let in_rhs = |pe: &PathElement| rhs.iter().any(|(p, _)| p == pe);
        let lhs_get = |pe: &PathElement| lhs.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
        let mut shared = rhs
            .iter()
            .filter(|(pe, _)| lhs_get(pe).is_some())
            .map(|(pe, _)| pe);
        let mut next_shared = shared.next();
        let merge_one = |l: Option<&Value>, r: &Value, names: &mut Vec<String>| match kind {
            ListKind::Map { .. } => self.merge(l, r, names),
            _ => r.clone(),
        };
        let mut out = Vec::new();
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            if li < lhs.len() && ri < rhs.len() {
                let (pe, lv) = &lhs[li];
                if *pe == rhs[ri].0 {
                    out.push(merge_one(Some(lv), rhs[ri].1, names));
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if in_rhs(pe) && next_shared.is_some_and(|s| s != pe) {
                    // A shared item the applied order places later: emitted then.
                    li += 1;
                    continue;
                }
            }
            if li < lhs.len() && !in_rhs(&lhs[li].0) {
                out.push(lhs[li].1.clone());
                li += 1;
                continue;
            }
            if ri < rhs.len() {
                let (pe, rv) = &rhs[ri];
                out.push(merge_one(lhs_get(pe), rv, names));
                ri += 1;
                if next_shared == Some(pe) {
                    next_shared = shared.next();
                }
            } else {
                // Only shared live items remain, all already emitted.
                li += 1;
            }
        }
        out
    }
}

/// Whether list item `item` is the one `pe` names.
fn item_matches(item: &Value, pe: &PathElement) -> bool {
    match pe {
        PathElement::Key(k) => {
            let Ok(Value::Object(key)) = serde_json::from_str::<Value>(k) else {
                return false;
            };
            key.iter().all(|(f, want)| match item.get(f) {
                Some(v) if !v.is_null() => v == want,
                _ => key_default(f).is_some_and(|d| want == d),
            })
        }
        PathElement::Value(v) => super::fieldset::canonical_string(item) == *v,
        _ => false,
    }
}

/// Removes `path` from `v`; a map or list this empties is removed from its parent too, as
/// structured-merge-diff's `RemoveItems` leaves it null. Returns whether `v` is now empty.
fn remove_path(v: &mut Value, path: &[PathElement]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    match (v, first) {
        (Value::Object(m), PathElement::Field(f)) => {
            if rest.is_empty() {
                if m.remove(f).is_none() {
                    return false;
                }
            } else {
                let Some(child) = m.get_mut(f) else {
                    return false;
                };
                if remove_path(child, rest) {
                    m.remove(f);
                }
            }
            m.is_empty()
        }
        (Value::Array(items), PathElement::Index(i)) => {
            if *i >= items.len() {
                return false;
            }
            if rest.is_empty() || remove_path(&mut items[*i], rest) {
                items.remove(*i);
            }
            items.is_empty()
        }
        (Value::Array(items), pe) => {
            let before = items.len();
            if rest.is_empty() {
                items.retain(|item| !item_matches(item, pe));
            } else {
                let mut emptied = false;
                for item in items.iter_mut().filter(|i| item_matches(i, pe)) {
                    emptied |= remove_path(item, rest);
                }
                if emptied {
                    items.retain(|item| !item_matches(item, pe));
                }
            }
            items.len() != before && items.is_empty()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: &str = "2024-05-01T10:00:00Z";
    const T1: &str = "2024-05-01T11:00:00Z";

    fn deploy(spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "d", "namespace": "ns"}, "spec": spec})
    }

    fn apply(live: Option<&Value>, cfg: &Value, who: &str, force: bool) -> Result<Value, ApiError> {
        server_side_apply(
            live,
            cfg,
            who,
            force,
            &Typed::builtin("apps", "Deployment"),
            T1,
        )
    }

    fn managers(obj: &Value) -> Vec<(String, String, Value)> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["manager"].as_str().unwrap_or_default().to_string(),
                            e["operation"].as_str().unwrap_or_default().to_string(),
                            e["fieldsV1"].clone(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn cfg() -> Value {
        deploy(json!({
            "replicas": 2,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "d"}},
                         "spec": {"containers": [{"name": "a", "image": "a:1"}]}}
        }))
    }

    #[test]
    fn create_owns_the_applied_fields() {
        let obj = apply(None, &cfg(), "mgr", false).expect("applies");
        assert_eq!(obj["spec"]["replicas"], 2);
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{
                "manager": "mgr", "operation": "Apply", "apiVersion": "apps/v1", "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {
                            ".": {}, "f:image": {}, "f:name": {}}}}
                    }
                }}
            }])
        );
    }

    #[test]
    fn reapply_updates_merges_lists_and_prunes_what_is_no_longer_applied() {
        let first = apply(None, &cfg(), "mgr", false).expect("applies");
        // Another writer adds a label and a container the applier never managed.
        let mut live = first.clone();
        live["metadata"]["labels"] = json!({"team": "x"});
        live["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "sidecar", "image": "s"}));
        super::super::record_update(
            Some(&first),
            &mut live,
            "kubectl-edit",
            "apps/v1",
            "",
            T0,
            None,
        );

        let mut next = cfg();
        next["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("replicas");
        next["spec"]["template"]["spec"]["containers"][0]["image"] = json!("a:2");
        let obj = apply(Some(&live), &next, "mgr", false).expect("applies");
        assert!(obj["spec"].get("replicas").is_none(), "pruned: {obj:#}");
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "a:2"}, {"name": "sidecar", "image": "s"}])
        );
        assert_eq!(obj["metadata"]["labels"], json!({"team": "x"}));
        let names: Vec<String> = managers(&obj).into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["mgr", "kubectl-edit"]);
    }

    #[test]
    fn fields_also_owned_by_another_manager_are_not_pruned() {
        let first = apply(None, &cfg(), "a", false).expect("a applies");
        let both = apply(Some(&first), &cfg(), "b", false).expect("b applies same values");
        assert_eq!(managers(&both).len(), 2, "shared ownership");
        let mut less = cfg();
        less["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("replicas");
        let obj = apply(Some(&both), &less, "a", false).expect("a drops replicas");
        assert_eq!(obj["spec"]["replicas"], 2, "b still owns it: {obj:#}");
        let obj = apply(Some(&obj), &less, "b", false).expect("b drops it too");
        assert!(obj["spec"].get("replicas").is_none(), "{obj:#}");
    }

    #[test]
    fn conflicts_with_an_update_manager_and_force() {
        let first = apply(None, &cfg(), "mgr", false).expect("applies");
        let mut scaled = first.clone();
        scaled["spec"]["replicas"] = json!(5);
        super::super::record_update(Some(&first), &mut scaled, "hpa", "apps/v1", "", T0, None);
        assert_eq!(
            managers(&scaled)[1],
            (
                "hpa".to_string(),
                "Update".to_string(),
                json!({"f:spec": {"f:replicas": {}}})
            )
        );
        let e = apply(Some(&scaled), &cfg(), "mgr", false).expect_err("conflict");
        assert_eq!(e.code, 409);
        assert_eq!(e.reason, "Conflict");
        assert_eq!(
            e.message,
            format!(
                "Apply failed with 1 conflict: conflict with \"hpa\" using apps/v1 at {T0}: .spec.replicas"
            )
        );
        assert_eq!(
            e.to_status()["details"],
            json!({"causes": [{"reason": "FieldManagerConflict",
                               "message": format!("conflict with \"hpa\" using apps/v1 at {T0}"),
                               "field": ".spec.replicas"}]})
        );
        // Same value: no conflict, shared ownership.
        let mut same = cfg();
        same["spec"]["replicas"] = json!(5);
        let shared = apply(Some(&scaled), &same, "mgr", false).expect("same value applies");
        assert_eq!(managers(&shared).len(), 2);
        // Forced: ownership moves; hpa is left with nothing and disappears.
        let forced = apply(Some(&scaled), &cfg(), "mgr", true).expect("forced");
        assert_eq!(forced["spec"]["replicas"], 2);
        let names: Vec<String> = managers(&forced).into_iter().map(|m| m.0).collect();
        assert_eq!(names, ["mgr"]);
    }

    #[test]
    fn two_appliers_conflict_listing_every_field() {
        let first = apply(None, &cfg(), "a", false).expect("a applies");
        let mut other = cfg();
        other["spec"]["replicas"] = json!(3);
        other["spec"]["template"]["spec"]["containers"][0]["image"] = json!("a:9");
        let e = apply(Some(&first), &other, "b", false).expect_err("conflict");
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"a\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"a\"].image"
        );
        let causes = &e.to_status()["details"]["causes"];
        assert_eq!(causes[0]["message"], "conflict with \"a\"");
        assert_eq!(
            causes[1]["field"],
            ".spec.template.spec.containers[name=\"a\"].image"
        );
    }

    #[test]
    fn noop_apply_keeps_time_and_atomic_selector_is_replaced() {
        let mut first = apply(None, &cfg(), "mgr", false).expect("applies");
        first["metadata"]["managedFields"][0]["time"] = json!(T0);
        let again = apply(Some(&first), &cfg(), "mgr", false).expect("no-op");
        assert_eq!(again["metadata"]["managedFields"][0]["time"], T0);
        let mut sel = cfg();
        sel["spec"]["selector"] = json!({"matchLabels": {"other": "x"}});
        let obj = apply(Some(&first), &sel, "mgr", false).expect("applies");
        assert_eq!(
            obj["spec"]["selector"],
            json!({"matchLabels": {"other": "x"}})
        );
    }

    #[test]
    fn set_lists_and_custom_resources() {
        let cr = json!({"apiVersion": "example.org/v1", "kind": "Widget",
                        "metadata": {"name": "w", "finalizers": ["a"]},
                        "spec": {"items": [1, 2], "nested": {"x": 1}}});
        let obj = server_side_apply(
            None,
            &cr,
            "m",
            false,
            &Typed::builtin("example.org", "Widget"),
            T1,
        )
        .expect("applies");
        assert_eq!(
            obj["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}}},
                   "f:spec": {"f:items": {}, "f:nested": {"f:x": {}}}})
        );
        let mut live = obj.clone();
        live["metadata"]["finalizers"] = json!(["a", "b"]);
        let mut cr2 = cr.clone();
        cr2["metadata"]["finalizers"] = json!(["c"]);
        cr2["spec"]["items"] = json!([3]);
        let obj = server_side_apply(
            Some(&live),
            &cr2,
            "m",
            false,
            &Typed::builtin("example.org", "Widget"),
            T1,
        )
        .expect("applies");
        // "a" was the applier's and is pruned; "b" is nobody's and stays.
        assert_eq!(obj["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(obj["spec"]["items"], json!([3]));
    }

    #[test]
    fn rejected_bodies() {
        let mut with_mf = cfg();
        with_mf["metadata"]["managedFields"] = json!([]);
        let cases = [
            (
                with_mf,
                400,
                "metadata.managedFields must be nil".to_string(),
            ),
            (
                json!({"apiVersion": "apps/v2", "kind": "Deployment", "metadata": {"name": "d"}}),
                400,
                "Incorrect version specified in apply patch. Specified patch version: apps/v2, expected: apps/v1".to_string(),
            ),
            (
                deploy(json!({"template": {"spec": {"containers": [{"image": "x"}]}}})),
                500,
                "failed to create typed patch object (apps/v1, Kind=Deployment): .spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)".to_string(),
            ),
        ];
        let live = apply(None, &cfg(), "m", false).expect("applies");
        for (body, code, message) in cases {
            let e = apply(Some(&live), &body, "m", false).expect_err("rejected");
            assert_eq!((e.code, e.message), (code, message));
        }
    }

    #[test]
    fn status_apply_tracks_status_under_the_subresource() {
        let live = apply(None, &cfg(), "mgr", false).expect("applies");
        let mut status = deploy(json!({}));
        status["status"] = json!({"conditions": [{"type": "Available", "status": "True"}]});
        let obj = server_side_apply_status(
            &live,
            &status,
            "ctrl",
            false,
            &Typed::builtin("apps", "Deployment"),
            T1,
        )
        .expect("applies");
        // Both are Apply entries with the same time, so they sort by manager name.
        let entry = &obj["metadata"]["managedFields"][0];
        assert_eq!(entry["manager"], "ctrl");
        assert_eq!(entry["subresource"], "status");
        assert_eq!(
            entry["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Available\"}": {
                ".": {}, "f:status": {}, "f:type": {}}}}})
        );
        // A second status applier setting the same condition differently conflicts.
        let mut other = status.clone();
        other["status"]["conditions"][0]["status"] = json!("False");
        let e = server_side_apply_status(
            &obj,
            &other,
            "ctrl2",
            false,
            &Typed::builtin("apps", "Deployment"),
            T1,
        )
        .expect_err("conflict");
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"ctrl\" with subresource \"status\": .status.conditions[type=\"Available\"].status"
        );
    }

    #[test]
    fn service_ports_key_on_port_and_defaulted_protocol() {
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                         "spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
        let obj = server_side_apply(None, &svc, "m", false, &Typed::builtin("", "Service"), T1)
            .expect("applies");
        assert_eq!(
            obj["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:ports": {"k:{\"port\":80,\"protocol\":\"TCP\"}": {
                ".": {}, "f:port": {}, "f:targetPort": {}}}}})
        );
        let mut live = obj.clone();
        live["spec"]["ports"][0]["protocol"] = json!("TCP");
        let mut more = svc.clone();
        more["spec"]["ports"] = json!([{"port": 80, "targetPort": 8080}, {"port": 443}]);
        let obj = server_side_apply(
            Some(&live),
            &more,
            "m",
            false,
            &Typed::builtin("", "Service"),
            T1,
        )
        .expect("applies");
        assert_eq!(
            obj["spec"]["ports"],
            json!([{"port": 80, "targetPort": 8080, "protocol": "TCP"}, {"port": 443}])
        );
    }
}

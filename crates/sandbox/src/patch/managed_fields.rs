//! `metadata.managedFields`: decoding and encoding the entries, the walks that turn objects into
//! field sets, and the bookkeeping of non-apply writes (operation `Update`).
//!
//! Each entry is one manager identity (name, operation, and for `Update` the apiVersion, plus
//! the subresource) with the set of paths it owns. On an update kube-apiserver compares the old
//! and new objects: the writer gains every added or modified path (taking it from whoever owned
//! it: updates are always forced) and every manager loses the removed paths. Added maps and list
//! items are owned as a whole too, which is where the `".": {}` entries come from.

use serde_json::{Map, Value, json};

use super::fieldset::{FieldSet, Path, PathElement, canonical_string, fields, path_string};
use super::schema::{
    ListKind, has_status_subresource, is_always_present, is_atomic_map, key_default, list_kind,
};
use super::unknown_error;
use crate::error::ApiError;

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub manager: String,
    pub operation: String,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub set: FieldSet,
}

impl Entry {
    /// The identity kube-apiserver keys managers by: `Update` entries are per apiVersion,
    /// `Apply` entries are not.
    pub(crate) fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    /// How conflict messages name the manager (apimachinery's `printManager`).
    pub(crate) fn describe(&self) -> String {
        let mut s = quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!("{s} with subresource {}", quote(&self.subresource));
        }
        if self.operation == "Update" {
            s = format!("{s} using {}", self.api_version);
            if let Some(t) = &self.time {
                s = format!("{s} at {t}");
            }
        }
        s
    }

    fn sort_key(&self) -> (String, String, String, String, String) {
        (
            self.operation.clone(),
            self.time.clone().unwrap_or_default(),
            self.manager.clone(),
            self.api_version.clone(),
            self.subresource.clone(),
        )
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Option<Entry> {
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let set = match v.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(f) => FieldSet::from_fields_v1(f)?,
        };
        Some(Entry {
            manager: s("manager"),
            operation: s("operation"),
            api_version: s("apiVersion"),
            time: v.get("time").and_then(Value::as_str).map(String::from),
            subresource: s("subresource"),
            set,
        })
    }
}

/// Go's `%q` for the strings that appear here.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// `metav1.Time` precision: whole seconds, UTC.
pub(crate) fn normalize_time(now: &str) -> String {
    now.parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| now.to_string())
}

pub(crate) fn decode(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().filter_map(Entry::from_json).collect())
        .unwrap_or_default()
}

/// A copy of `obj` without `metadata.managedFields`.
pub(crate) fn without_managed_fields(obj: &Value) -> Value {
    let mut out = obj.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    out
}

/// Writes `entries` (those with an empty set dropped) into `obj`, sorted as kube-apiserver
/// sorts them: operation, time, manager, apiVersion, subresource.
pub(crate) fn encode(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by_key(Entry::sort_key);
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}

/// The paths kube-apiserver never tracks (`stripMetaManager`), plus what the kind's status
/// subresource split resets on this endpoint.
pub(crate) fn untracked(set: &FieldSet, group: &str, kind: &str, subresource: &str) -> FieldSet {
    let strip = FieldSet::from_paths(&[
        fields(&["apiVersion"]),
        fields(&["kind"]),
        fields(&["metadata"]),
        fields(&["metadata", "name"]),
        fields(&["metadata", "namespace"]),
        fields(&["metadata", "creationTimestamp"]),
        fields(&["metadata", "selfLink"]),
        fields(&["metadata", "uid"]),
        fields(&["metadata", "clusterName"]),
        fields(&["metadata", "generation"]),
        fields(&["metadata", "managedFields"]),
        fields(&["metadata", "resourceVersion"]),
    ]);
    let set = set.difference(&strip);
    let status = fields(&["status"]);
    if subresource == "status" {
        let members = set.members();
        return FieldSet::from_paths(members.iter().filter(|p| p.starts_with(&status)));
    }
    if subresource.is_empty() && has_status_subresource(group, kind) {
        return set.recursive_difference(&FieldSet::from_paths(&[status]));
    }
    set
}

/// The changes between two objects, as structured-merge-diff's `Compare` reports them.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    pub added: FieldSet,
    pub modified: FieldSet,
    pub removed: FieldSet,
}

impl Comparison {
    pub(crate) fn filter(self, f: impl Fn(&FieldSet) -> FieldSet) -> Comparison {
        Comparison {
            added: f(&self.added),
            modified: f(&self.modified),
            removed: f(&self.removed),
        }
    }
}

/// Walks objects of one kind with that kind's list and struct strategies.
#[derive(Debug, Clone)]
pub struct Typed<'a> {
    pub group: &'a str,
    /// The version written (`""`: the group's preferred one), whose built-in list types and
    /// atomic maps apply (an autoscaling/v1 HPA's `scaleTargetRef` is atomic, v2's is not).
    pub version: &'a str,
    pub kind: &'a str,
    /// A custom resource's structural schema (of the version written), where its lists' and
    /// maps' `x-kubernetes-list-type`, `-list-map-keys` and `-map-type` are read.
    pub schema: Option<&'a Value>,
}

impl<'a> Typed<'a> {
    /// A built-in kind (or a custom resource whose schema is not at hand).
    pub fn builtin(group: &'a str, kind: &'a str) -> Self {
        Typed {
            group,
            version: "",
            kind,
            schema: None,
        }
    }

    /// A built-in kind's lists as kube-apiserver's field manager types them
    /// (`builtin_fields.txt`), metadata's and a custom resource's as `schema::list_kind` does.
    pub(crate) fn list_kind(&self, names: &[String]) -> ListKind {
        if !names.iter().any(|n| n == "metadata") {
            let path = names.join(".");
            if let Some(k) =
                super::builtin_fields::list_kind(self.group, self.version, self.kind, &path)
            {
                return k;
            }
        }
        list_kind(self.group, self.kind, self.schema, names)
    }

    /// As [`Typed::list_kind`], for maps.
    pub(crate) fn atomic_map(&self, names: &[String]) -> bool {
        if !names.iter().any(|n| n == "metadata") {
            let path = names.join(".");
            if let Some(atomic) =
                super::builtin_fields::is_atomic_map(self.group, self.version, self.kind, &path)
            {
                return atomic;
            }
        }
        is_atomic_map(self.group, self.kind, self.schema, names)
    }

    /// The path element of an item of the list at `names`; the error names the missing key.
    pub(crate) fn item_element(&self, item: &Value, kind: ListKind) -> Result<PathElement, String> {
        match kind {
            ListKind::Map { ssa_keys, .. } => {
                let Some(obj) = item.as_object() else {
                    return Err("expected a map in an associative list".into());
                };
                let mut key = Map::new();
                for k in ssa_keys {
                    match obj.get(*k) {
                        Some(v) if !v.is_null() => {
                            key.insert((*k).to_string(), v.clone());
                        }
                        _ => match key_default(k) {
                            Some(d) => {
                                key.insert((*k).to_string(), json!(d));
                            }
                            None => {
                                return Err(format!(
                                    "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                                    quote(k)
                                ));
                            }
                        },
                    }
                }
                Ok(PathElement::Key(canonical_string(&Value::Object(key))))
            }
            _ => Ok(PathElement::Value(canonical_string(item))),
        }
    }

    /// The items of a list with their path elements, repeated elements dropped; `None` when an
    /// item cannot be keyed (the caller then treats the list as atomic).
    pub(crate) fn keyed<'v>(
        &self,
        list: &'v [Value],
        kind: ListKind,
    ) -> Option<Vec<(PathElement, &'v Value)>> {
        let mut out: Vec<(PathElement, &Value)> = Vec::new();
        for item in list {
            let pe = self.item_element(item, kind).ok()?;
            if !out.iter().any(|(seen, _)| *seen == pe) {
                out.push((pe, item));
            }
        }
        Some(out)
    }

    /// The paths an applied configuration sets (structured-merge-diff's `ToFieldSet`): leaves,
    /// empty maps, list items of associative lists and sets, and atomic lists and maps whole.
    pub(crate) fn to_field_set(&self, v: &Value) -> Result<FieldSet, String> {
        let mut set = FieldSet::new();
        self.walk_set(v, &mut Vec::new(), &mut Vec::new(), &mut set)?;
        Ok(set)
    }

    fn walk_set(
        &self,
        v: &Value,
        path: &mut Path,
        names: &mut Vec<String>,
        set: &mut FieldSet,
    ) -> Result<(), String> {
        match v {
            Value::Object(m) if !m.is_empty() && (path.is_empty() || !self.atomic_map(names)) => {
                for (k, child) in m {
                    path.push(PathElement::Field(k.clone()));
                    names.push(k.clone());
                    self.walk_set(child, path, names, set)?;
                    names.pop();
                    path.pop();
                }
            }
            Value::Array(items) => match self.list_kind(names) {
                ListKind::Atomic => set.insert(path),
                kind => {
                    for (i, item) in items.iter().enumerate() {
                        let pe = self
                            .item_element(item, kind)
                            .map_err(|e| format!("{}: element {i}: {e}", path_string(path)))?;
                        path.push(pe);
                        if matches!(kind, ListKind::Map { .. }) {
                            self.walk_set(item, path, names, set)?;
                        }
                        set.insert(path);
                        path.pop();
                    }
                }
            },
            _ => set.insert(path),
        }
        Ok(())
    }

    /// Compares `old` with `new` (both objects).
    pub(crate) fn compare(&self, old: &Value, new: &Value) -> Comparison {
        let mut c = Comparison::default();
        self.cmp(
            Some(old),
            Some(new),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut c,
        );
        c
    }

    fn cmp(
        &self,
        l: Option<&Value>,
        r: Option<&Value>,
        path: &mut Path,
        names: &mut Vec<String>,
        c: &mut Comparison,
    ) {
        let map_or_absent = |v: Option<&Value>| v.is_none_or(Value::is_object);
        let list_or_absent = |v: Option<&Value>| v.is_none_or(Value::is_array);
        let empty = |v: Option<&Value>| match v {
            None => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            Some(_) => false,
        };
        let structural_map =
            map_or_absent(l) && map_or_absent(r) && (path.is_empty() || !self.atomic_map(names));
        let structural_list =
            list_or_absent(l) && list_or_absent(r) && self.list_kind(names) != ListKind::Atomic;
        if (structural_map || structural_list) && !(empty(l) && empty(r)) {
            if structural_map {
                let lm = l.and_then(Value::as_object);
                let rm = r.and_then(Value::as_object);
                let mut keys: Vec<&String> = rm.map(|m| m.keys().collect()).unwrap_or_default();
                for k in lm.into_iter().flat_map(|m| m.keys()) {
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                for k in keys {
                    let lv = lm.and_then(|m| m.get(k));
                    let rv = rm.and_then(|m| m.get(k));
                    path.push(PathElement::Field(k.clone()));
                    names.push(k.clone());
                    self.cmp(lv, rv, path, names, c);
                    let whole = !self.in_typed_empty(path, names);
                    self.after_item(lv, rv, whole, path, c);
                    names.pop();
                    path.pop();
                }
                return;
            }
            let kind = self.list_kind(names);
            let no_items: &[Value] = &[];
            let ll = l.and_then(Value::as_array).map_or(no_items, Vec::as_slice);
            let rl = r.and_then(Value::as_array).map_or(no_items, Vec::as_slice);
            if let (Some(lk), Some(rk)) = (self.keyed(ll, kind), self.keyed(rl, kind)) {
                let mut pes: Vec<&PathElement> = rk.iter().map(|(pe, _)| pe).collect();
                for (pe, _) in &lk {
                    if !pes.contains(&pe) {
                        pes.push(pe);
                    }
                }
                for pe in pes {
                    let lv = lk.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                    let rv = rk.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                    path.push(pe.clone());
                    self.cmp(lv, rv, path, names, c);
                    self.after_item(lv, rv, true, path, c);
                    path.pop();
                }
                return;
            }
        }
        match (l, r) {
            (None, Some(v)) | (Some(v), None) if self.typed_empty_has(path, names, v) => {}
            (None, Some(_)) => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            (Some(a), Some(b)) if a != b => c.modified.insert(path),
            _ => {}
        }
    }

    /// Whether a typed empty object already holds `value` at `path`: kube compares typed Go
    /// objects, where a field Go always writes (a struct value, a field without `omitempty`)
    /// is there, zero, on both sides — a body's `status: {allowed: false}` or `spec: {}` is no
    /// change from it. Only on a chain of such fields from the root: a new list item's zero
    /// fields are new (`f:resources: {}` of a container).
    fn typed_empty_has(&self, path: &Path, names: &[String], value: &Value) -> bool {
        let zero = match value {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(m) => m.is_empty(),
        };
        zero && self.in_typed_empty(path, names)
    }

    /// Whether the typed empty object has the field at `path`: a chain of fields Go always
    /// writes from the root, through no list item. Such a field is never added as a whole (no
    /// `.` entry); inside a new list item or under a pointer everything is new (a webhook's
    /// `clientConfig`, a ReplicationController's `template.metadata`).
    fn in_typed_empty(&self, path: &Path, names: &[String]) -> bool {
        !names.is_empty()
            && path.iter().all(|pe| matches!(pe, PathElement::Field(_)))
            && (1..=names.len()).all(|n| is_always_present(self.group, self.kind, &names[..n]))
    }

    /// structured-merge-diff's post-item hook: a map field or list item that appears or
    /// disappears is itself added or removed, not only its leaves.
    fn after_item(
        &self,
        l: Option<&Value>,
        r: Option<&Value>,
        whole: bool,
        path: &Path,
        c: &mut Comparison,
    ) {
        match (l, r) {
            (None, Some(_)) if whole => c.added.insert(path),
            (Some(_), None) => c.removed.insert(path),
            _ => {}
        }
    }
}

/// The API group of an `apiVersion`.
pub(crate) fn group_of(api_version: &str) -> &str {
    api_version
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or_default()
}

/// Records a create, update or non-apply patch by `manager` in `new`'s `metadata.managedFields`,
/// as kube-apiserver does on every write.
///
/// The starting entries are the ones `new` carries when it carries any (clients may rewrite
/// managedFields; `[{}]` clears them), else the old object's; on a subresource always the old
/// object's. The writer, keyed by name, `Update`, `api_version` and `subresource`, gains what
/// changed (with the time `now`); every manager loses what was removed and others lose what the
/// writer changed.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
    schema: Option<&Value>,
) {
    let kind = new
        .get("kind")
        .or_else(|| old.and_then(|o| o.get("kind")))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let group = group_of(api_version).to_string();
    let carried = decode(new);
    let mut entries = if !carried.is_empty() && subresource.is_empty() {
        carried
    } else {
        old.map(decode).unwrap_or_default()
    };
    *new = without_managed_fields(new);
    let old_clean = old.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let typed = Typed {
        group: &group,
        version,
        kind: &kind,
        schema,
    };
    let cmp = typed
        .compare(&old_clean, new)
        .filter(|s| untracked(s, &group, &kind, subresource));
    let changed = cmp.added.union(&cmp.modified);
    let me = Entry {
        manager: manager.to_string(),
        operation: "Update".into(),
        api_version: api_version.to_string(),
        time: Some(normalize_time(now)),
        subresource: subresource.to_string(),
        set: FieldSet::new(),
    };
    for e in &mut entries {
        e.set = e.set.difference(&cmp.removed);
        if !e.same_manager(&me) {
            e.set = e.set.difference(&changed);
        }
    }
    if !changed.is_empty() {
        let gained = changed.difference(&cmp.removed);
        match entries.iter_mut().find(|e| e.same_manager(&me)) {
            Some(e) => {
                e.set = e.set.union(&gained);
                e.time = me.time.clone();
            }
            None => entries.push(Entry { set: gained, ..me }),
        }
    }
    encode(new, entries);
}

/// The 409 of an apply that conflicts with other managers (apimachinery's `NewConflictError`).
pub(crate) fn conflict_error(conflicts: &[(Entry, FieldSet)]) -> ApiError {
    let mut sorted: Vec<&(Entry, FieldSet)> = conflicts.iter().collect();
    sorted.sort_by_key(|(e, _)| {
        (
            e.manager.clone(),
            e.operation.clone(),
            e.api_version.clone(),
            e.subresource.clone(),
        )
    });
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    let mut count = 0;
    let mut single = String::new();
    for (entry, set) in sorted {
        let who = entry.describe();
        lines.push(format!("conflicts with {who}:"));
        for p in set.members() {
            let field = path_string(&p);
            count += 1;
            single = format!("conflict with {who}: {field}");
            lines.push(format!("- {field}"));
            causes.push(json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {who}"),
                "field": field,
            }));
        }
    }
    let message = if count == 1 {
        format!("Apply failed with 1 conflict: {single}")
    } else {
        format!("Apply failed with {count} conflicts: {}", lines.join("\n"))
    };
    ApiError::new(409, "Conflict", message).with_details(json!({ "causes": causes }))
}

/// The 500 kube-apiserver answers when an applied configuration does not fit the schema.
pub(crate) fn typed_error(api_version: &str, kind: &str, why: &str) -> ApiError {
    let gv = if api_version.contains('/') {
        api_version.to_string()
    } else {
        format!("/{api_version}")
    };
    unknown_error(format!(
        "failed to create typed patch object ({gv}, Kind={kind}): {why}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-05-01T10:00:00Z";
    const T1: &str = "2024-05-01T11:00:00.123456Z";

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "1"},
               "data": data})
    }

    #[test]
    fn create_records_added_fields_with_dot_for_new_maps() {
        let mut obj = cm(json!({"a": "1"}));
        obj["metadata"]["labels"] = json!({"app": "x"});
        record_update(None, &mut obj, "kubectl-create", "v1", "", T0, None);
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{
                "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": T0, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}},
                             "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
            }])
        );
    }

    #[test]
    fn deployment_create_owns_structs_without_dot_and_items_with_dot() {
        let mut d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}},
                                  "spec": {"containers": [{"name": "n", "image": "i",
                                           "ports": [{"containerPort": 80}]}]}}},
            "status": {"replicas": 0}
        });
        record_update(None, &mut d, "m", "apps/v1", "", T0, None);
        assert_eq!(
            d["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"n\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}}}
                    }}}
                }
            }})
        );
    }

    #[test]
    fn update_table() {
        // (name, entries before, old data, new data, manager, expected fieldsV1 by manager)
        let base = |who: &str, fields: Value| {
            json!({"manager": who, "operation": "Update", "apiVersion": "v1", "time": T0,
                   "fieldsType": "FieldsV1", "fieldsV1": fields})
        };
        struct Case {
            name: &'static str,
            before: Vec<Value>,
            old: Value,
            new: Value,
            want: Vec<(&'static str, Value)>,
        }
        let cases = [
            Case {
                name: "same manager gains a field, time moves",
                before: vec![base("a", json!({"f:data": {".": {}, "f:x": {}}}))],
                old: json!({"x": "1"}),
                new: json!({"x": "1", "y": "2"}),
                want: vec![("a", json!({"f:data": {".": {}, "f:x": {}, "f:y": {}}}))],
            },
            Case {
                name: "other manager's modified field moves to the writer",
                before: vec![base(
                    "a",
                    json!({"f:data": {".": {}, "f:x": {}, "f:y": {}}}),
                )],
                old: json!({"x": "1", "y": "1"}),
                new: json!({"x": "2", "y": "1"}),
                want: vec![
                    ("a", json!({"f:data": {".": {}, "f:y": {}}})),
                    ("b", json!({"f:data": {"f:x": {}}})),
                ],
            },
            Case {
                name: "removed field leaves every manager",
                before: vec![base(
                    "a",
                    json!({"f:data": {".": {}, "f:x": {}, "f:y": {}}}),
                )],
                old: json!({"x": "1", "y": "1"}),
                new: json!({"y": "1"}),
                want: vec![("a", json!({"f:data": {".": {}, "f:y": {}}}))],
            },
            Case {
                name: "no change adds no entry",
                before: vec![base("a", json!({"f:data": {".": {}, "f:x": {}}}))],
                old: json!({"x": "1"}),
                new: json!({"x": "1"}),
                want: vec![("a", json!({"f:data": {".": {}, "f:x": {}}}))],
            },
            Case {
                name: "a manager left with nothing disappears",
                before: vec![base("a", json!({"f:data": {"f:x": {}}}))],
                old: json!({"x": "1"}),
                new: json!({"x": "2"}),
                want: vec![("b", json!({"f:data": {"f:x": {}}}))],
            },
        ];
        for c in cases {
            let mut old = cm(c.old);
            old["metadata"]["managedFields"] = Value::Array(c.before);
            let writer = if c.name.starts_with("same") { "a" } else { "b" };
            let mut new = cm(c.new);
            record_update(Some(&old), &mut new, writer, "v1", "", T1, None);
            let got = decode(&new);
            let got: Vec<(String, Value)> = got
                .iter()
                .map(|e| (e.manager.clone(), e.set.to_fields_v1()))
                .collect();
            let want: Vec<(String, Value)> = c
                .want
                .into_iter()
                .map(|(m, f)| (m.to_string(), f))
                .collect();
            assert_eq!(got, want, "{}", c.name);
            if c.name.starts_with("same") {
                assert_eq!(
                    new["metadata"]["managedFields"][0]["time"],
                    "2024-05-01T11:00:00Z"
                );
            }
            if c.name.starts_with("no change") {
                assert_eq!(new["metadata"]["managedFields"][0]["time"], T0);
            }
        }
    }

    #[test]
    fn managed_fields_sent_by_the_client_win_and_empty_entry_clears() {
        let mut old = cm(json!({"x": "1"}));
        record_update(None, &mut old, "a", "v1", "", T0, None);
        let mut new = old.clone();
        new["metadata"]["managedFields"] = json!([{}]);
        record_update(Some(&old), &mut new, "b", "v1", "", T1, None);
        assert!(new["metadata"].get("managedFields").is_none(), "{new:#}");
        // Omitted managedFields keep the live ones.
        let mut new = without_managed_fields(&old);
        record_update(Some(&old), &mut new, "b", "v1", "", T1, None);
        assert_eq!(
            new["metadata"]["managedFields"],
            old["metadata"]["managedFields"]
        );
    }

    #[test]
    fn status_subresource_tracks_only_status_and_main_resource_skips_it() {
        let dep = |replicas: i64, ready: i64| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"replicas": replicas}, "status": {"readyReplicas": ready}})
        };
        let old = dep(1, 0);
        let mut new = dep(2, 1);
        record_update(Some(&old), &mut new, "ctrl", "apps/v1", "status", T0, None);
        assert_eq!(
            new["metadata"]["managedFields"],
            json!([{"manager": "ctrl", "operation": "Update", "apiVersion": "apps/v1", "time": T0,
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:readyReplicas": {}}},
                    "subresource": "status"}])
        );
        let mut new = dep(2, 1);
        record_update(Some(&old), &mut new, "kubectl", "apps/v1", "", T0, None);
        assert_eq!(
            new["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}}})
        );
    }

    #[test]
    fn changing_a_list_item_field_moves_only_that_field() {
        let dep = |image: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"template": {"spec": {"containers": [{"name": "a", "image": image}]}}}})
        };
        let mut old = dep("a:1");
        record_update(None, &mut old, "m", "apps/v1", "", T0, None);
        let mut new = dep("a:2");
        new["metadata"]["managedFields"] = old["metadata"]["managedFields"].clone();
        record_update(Some(&old), &mut new, "n", "apps/v1", "", T1, None);
        let got: Vec<(String, Value)> = decode(&new)
            .iter()
            .map(|e| (e.manager.clone(), e.set.to_fields_v1()))
            .collect();
        let item = |fields: Value| {
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"a\"}": fields}}}}})
        };
        assert_eq!(
            got,
            vec![
                ("m".to_string(), item(json!({".": {}, "f:name": {}}))),
                ("n".to_string(), item(json!({"f:image": {}}))),
            ]
        );
    }

    #[test]
    fn entries_sort_apply_first_then_by_time() {
        let e = |m: &str, op: &str, t: &str| Entry {
            manager: m.into(),
            operation: op.into(),
            api_version: "v1".into(),
            time: Some(t.into()),
            subresource: String::new(),
            set: FieldSet::from_paths(&[fields(&["data", "x"])]),
        };
        let mut obj = cm(json!({}));
        encode(
            &mut obj,
            vec![
                e("z", "Update", "2024-01-01T00:00:00Z"),
                e("b", "Update", "2023-01-01T00:00:00Z"),
                e("y", "Apply", "2025-01-01T00:00:00Z"),
            ],
        );
        let order: Vec<&str> = obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| a.iter().filter_map(|e| e["manager"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(order, ["y", "b", "z"]);
    }
}

//! The read verbs: get, list (with selectors and `limit`/`continue` paging over a consistent
//! snapshot) and watch (resume from a resourceVersion, bookmarks, `410 Gone`).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::server::{ApiServer, Target};
use crate::error::ApiError;
use crate::labels::{FieldSelector, Selector};
use crate::registry::{ResourceKey, ResourceType};
use crate::store::{Change, EventType, ObjectKey, Table, count_table, list_table, object_key};

/// `?labelSelector=&fieldSelector=&limit=&continue=&resourceVersion=&resourceVersionMatch=`
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub label_selector: Selector,
    pub field_selector: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

impl ListOptions {
    pub fn parse(
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        let label_selector =
            Selector::parse(label_selector.unwrap_or_default()).map_err(ApiError::bad_request)?;
        let field_selector = FieldSelector::parse(field_selector.unwrap_or_default())
            .map_err(ApiError::bad_request)?;
        Ok(ListOptions {
            label_selector,
            field_selector,
            ..Default::default()
        })
    }

    /// Whether a stored object matches, once [`Self::converted`] for its resource.
    fn matches(&self, key: &ResourceKey, object: &Value) -> bool {
        self.label_selector.matches_object(object)
            && super::fields::matches(key, &self.field_selector, object)
    }

    /// These options with the field selector converted to the stored object's labels, or the
    /// 400 kube-apiserver answers for a label the resource does not support.
    fn converted(&self, rt: &ResourceType) -> Result<ListOptions, ApiError> {
        let mut out = self.clone();
        out.field_selector =
            super::fields::convert(rt, &self.field_selector).map_err(ApiError::bad_request)?;
        Ok(out)
    }
}

/// `?watch=true` options on top of the list ones.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    pub list: ListOptions,
    pub allow_bookmarks: bool,
    pub send_initial_events: bool,
    pub timeout: Option<Duration>,
}

/// One event of a watch stream, already shaped for the wire.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    pub type_: &'static str,
    pub object: Value,
}

impl WatchEvent {
    pub fn to_json(&self) -> Value {
        json!({"type": self.type_, "object": self.object})
    }
}

/// A live watch: the backlog (initial state or resumed changes) then changes as they happen.
pub struct WatchStream {
    pub(crate) target: Target,
    /// The target's stored resource, computed once rather than per change.
    pub(crate) key: ResourceKey,
    pub(crate) options: WatchOptions,
    /// The initial state not yet read (`None` once read, or for a watch that resumes).
    initial: Option<LazyItems>,
    /// The chunk of the initial state being sent.
    initial_events: std::collections::VecDeque<WatchEvent>,
    /// After the initial state: resumed changes, the initial-events-end bookmark.
    pub(crate) backlog: std::collections::VecDeque<WatchEvent>,
    /// `None` for a watch that only reports an error and ends.
    pub(crate) live: Option<broadcast::Receiver<Arc<Change>>>,
    /// Resources no longer served: this watch ends when its own is (a deleted CRD).
    retired: Option<broadcast::Receiver<ResourceKey>>,
    pub(crate) last_revision: u64,
}

impl std::fmt::Debug for WatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchStream").finish_non_exhaustive()
    }
}

impl WatchStream {
    /// The next event, a bookmark when `bookmark` fires first, or `None` when the stream ends
    /// (the watcher fell too far behind: the client must re-list, as with kube-apiserver).
    pub async fn next(&mut self, bookmark: &mut tokio::time::Interval) -> Option<WatchEvent> {
        while let Some(initial) = self.initial.as_mut() {
            if let Some(e) = self.initial_events.pop_front() {
                return Some(e);
            }
            match initial.next_chunk(INITIAL_CHUNK) {
                Some(objects) => self
                    .initial_events
                    .extend(objects.into_iter().map(|object| WatchEvent {
                        type_: "ADDED",
                        object,
                    })),
                None => self.initial = None,
            }
        }
        if let Some(e) = self.backlog.pop_front() {
            return Some(e);
        }
        let live = self.live.as_mut()?;
        let retired = self.retired.as_mut()?;
        loop {
            tokio::select! {
                // In order: a change made before its resource was retired (its objects'
                // deletions, made before a CRD goes) is sent before the watch ends.
                biased;
                change = live.recv() => match change {
                    Ok(change) => {
                        if change.revision <= self.last_revision {
                            continue;
                        }
                        self.last_revision = change.revision;
                        if let Some(event) = Self::convert(&self.target, &self.key, &self.options, &change) {
                            return Some(event);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return None,
                },
                gone = retired.recv() => match gone {
                    Ok(key) if key != self.key => {}
                    // Its resource is not served any more (or too many were retired to tell):
                    // the client lists again, and is told 404 if it is gone.
                    Ok(_) | Err(_) => return None,
                },
                _ = bookmark.tick(), if self.options.allow_bookmarks => {
                    return Some(self.bookmark(false));
                }
            }
        }
    }

    fn bookmark(&self, initial_end: bool) -> WatchEvent {
        let rt = &self.target.resource;
        let mut meta = json!({"resourceVersion": self.last_revision.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        WatchEvent {
            type_: "BOOKMARK",
            object: json!({"kind": rt.kind, "apiVersion": rt.api_version(&self.target.version), "metadata": meta}),
        }
    }

    /// Filters a change for this watch, turning selector transitions into ADDED / DELETED as
    /// kube-apiserver's watch cache does.
    fn convert(
        t: &Target,
        key: &ResourceKey,
        options: &WatchOptions,
        change: &Change,
    ) -> Option<WatchEvent> {
        if change.resource != *key {
            return None;
        }
        let (ns, name) = object_key(&change.object);
        if t.resource.namespaced && !t.namespace.is_empty() && ns != t.namespace {
            return None;
        }
        if !t.name.is_empty() && name != t.name {
            return None;
        }
        let now = options.list.matches(key, &change.object);
        let before = change
            .old
            .as_ref()
            .is_some_and(|o| options.list.matches(key, o));
        let type_ = match change.event {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if before || now => "DELETED",
            _ => return None,
        };
        Some(WatchEvent {
            type_,
            object: ApiServer::output(&t.resource, &t.version, &change.object),
        })
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    #[serde(rename = "rv")]
    revision: u64,
    #[serde(rename = "start")]
    after: ObjectKey,
}

fn encode_continue(revision: u64, after: ObjectKey) -> String {
    let token = serde_json::to_vec(&ContinueToken { revision, after }).unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(token)
}

/// A requested resourceVersion, or the storage's `ParseResourceVersion` error: a field error
/// kube-apiserver answers as a plain 500 (`resourceVersion: Invalid value: "x":
/// strconv.ParseUint: …`).
fn parse_revision(s: &str) -> Result<u64, ApiError> {
    match super::options::parse_uint_error(s) {
        None => Ok(s.parse::<u64>().unwrap_or_default()),
        Some(why) => Err(ApiError::new(
            500,
            "",
            format!("resourceVersion: Invalid value: \"{s}\": {why}"),
        )),
    }
}

impl ApiServer {
    pub fn get(&self, t: &Target) -> Result<Value, ApiError> {
        if super::component_statuses::is_component_statuses(&t.resource.group, &t.resource.plural) {
            return self.component_status(&t.name);
        }
        let object = self.current(t)?;
        Ok(Self::output(&t.resource, &t.version, &object))
    }

    /// Objects a collection request selects (for deletecollection).
    pub(crate) fn select(&self, t: &Target, opts: &ListOptions) -> Result<Vec<Value>, ApiError> {
        let ns = t
            .resource
            .namespaced
            .then_some(t.namespace.as_str())
            .filter(|n| !n.is_empty());
        let opts = opts.converted(&t.resource)?;
        let key = t.resource.key();
        Ok(self
            .store()
            .list(&key, ns)
            .into_iter()
            .filter(|o| opts.matches(&key, o))
            .map(|o| (*o).clone())
            .collect())
    }

    /// The snapshot a list reads, its revision and the key it continues after: the continue
    /// token's snapshot, or the store's current table (kept for later pages under `limit`).
    fn list_snapshot(
        &self,
        t: &Target,
        opts: &ListOptions,
        limit: Option<usize>,
    ) -> Result<(Table, u64, Option<ObjectKey>), ApiError> {
        let rt = &t.resource;
        let mut store = self.store();
        if let Some(token) = &opts.continue_token {
            let token: ContinueToken = base64::engine::general_purpose::STANDARD
                .decode(token)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .ok_or_else(|| {
                    ApiError::bad_request("continue key is not valid: illegal base64 data")
                })?;
            let Some(table) = store.snapshot(token.revision, &rt.key()) else {
                // As kube-apiserver does, offer a token that continues from the same key at
                // the current revision, for clients that accept an inconsistent list.
                store.keep_snapshot(&rt.key());
                let mut gone = ApiError::new(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                );
                gone.continue_token = Some(encode_continue(store.revision(), token.after));
                return Err(gone);
            };
            Ok((table, token.revision, Some(token.after)))
        } else {
            let requested = match opts.resource_version.as_deref() {
                None | Some("") => None,
                Some(rv) => Some(parse_revision(rv)?),
            };
            if let (Some(rv), Some("Exact")) = (requested, opts.resource_version_match.as_deref()) {
                if rv != store.revision() {
                    return Err(ApiError::gone(rv, store.revision()));
                }
            }
            if limit.is_some() {
                store.keep_snapshot(&rt.key());
            }
            Ok((store.table(&rt.key()), store.revision(), None))
        }
    }

    /// A list object (`ConfigMapList`) with `metadata.resourceVersion`, `continue` and
    /// `remainingItemCount` as kube-apiserver fills them.
    pub fn list(&self, t: &Target, opts: &ListOptions) -> Result<Value, ApiError> {
        let rt = &t.resource;
        if super::component_statuses::is_component_statuses(&rt.group, &rt.plural) {
            // Probed, not stored: no revision to name.
            return Ok(json!({
                "kind": rt.list_kind,
                "apiVersion": rt.api_version(&t.version),
                "metadata": {},
                "items": self.component_statuses(),
            }));
        }
        let ns = rt
            .namespaced
            .then_some(t.namespace.as_str())
            .filter(|n| !n.is_empty());
        let opts = &opts.converted(rt)?;
        let key = rt.key();
        let limit = opts.limit.filter(|l| *l > 0);
        let (table, revision, after) = self.list_snapshot(t, opts, limit)?;
        let mut items = Vec::new();
        let mut cursor = after;
        let mut more;
        // Selectors filter after paging reads, as in etcd: keep reading until the page is full.
        loop {
            let want = limit.map_or(usize::MAX, |l| l - items.len());
            let (page, page_more) = list_table(&table, ns, cursor.as_ref(), want);
            if let Some(last) = page.last() {
                cursor = Some(object_key(last));
            }
            items.extend(
                page.into_iter()
                    .filter(|o| opts.matches(&key, o))
                    .map(|o| Self::output(rt, &t.version, &o)),
            );
            more = page_more;
            if !page_more || limit.is_none_or(|l| items.len() >= l) {
                break;
            }
        }
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if more && let Some(after) = cursor {
            {
                metadata["continue"] = json!(encode_continue(revision, after.clone()));
                let remaining = count_table(&table, ns, Some(&after));
                if opts.label_selector.is_everything() && opts.field_selector.terms.is_empty() {
                    metadata["remainingItemCount"] = json!(remaining);
                }
            }
        }
        Ok(json!({
            "kind": rt.list_kind,
            "apiVersion": rt.api_version(&t.version),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// An unlimited list (no `limit`, so no `continue` or `remainingItemCount` to compute
    /// first) whose items are read from its snapshot as they are written out, so an answer
    /// of 100,000 objects never exists whole in memory (issue 22): the same answer as
    /// [`Self::list`], for the streaming encoders of the HTTP layer. `None` when the list is
    /// limited (a page is bounded by its limit and needs its last key before its metadata).
    pub(crate) fn list_lazily(
        &self,
        t: &Target,
        opts: &ListOptions,
    ) -> Result<Option<LazyList>, ApiError> {
        let rt = &t.resource;
        if opts.limit.is_some_and(|l| l > 0)
            || super::component_statuses::is_component_statuses(&rt.group, &rt.plural)
        {
            return Ok(None);
        }
        let opts = opts.converted(rt)?;
        let (table, revision, after) = self.list_snapshot(t, &opts, None)?;
        Ok(Some(LazyList {
            kind: rt.list_kind.clone(),
            api_version: rt.api_version(&t.version),
            resource_version: revision.to_string(),
            typed_items: rt.is_custom(),
            items: LazyItems {
                namespace: rt
                    .namespaced
                    .then(|| t.namespace.clone())
                    .filter(|n| !n.is_empty()),
                key: rt.key(),
                resource: rt.clone(),
                version: t.version.clone(),
                table,
                name: None,
                cursor: after,
                opts,
                done: false,
            },
        }))
    }

    /// Starts a watch. Without a resourceVersion (or with "0", or with `sendInitialEvents`),
    /// the current state comes first as ADDED events.
    pub fn watch(&self, t: &Target, mut opts: WatchOptions) -> Result<WatchStream, ApiError> {
        let rt = &t.resource;
        let ns = rt
            .namespaced
            .then_some(t.namespace.as_str())
            .filter(|n| !n.is_empty());
        opts.list = opts.list.converted(rt)?;
        let key = rt.key();
        let store = self.store();
        let requested = match opts.list.resource_version.as_deref() {
            None | Some("") | Some("0") => None,
            Some(rv) => Some(parse_revision(rv)?),
        };
        let initial = opts.send_initial_events || requested.is_none();
        // The current state as ADDED events, read from its snapshot a chunk at a time as the
        // watcher takes them (as an unlimited list is, issue 22), not decoded whole first.
        let (from, initial_items) = if initial && !(opts.send_initial_events && requested.is_some())
        {
            let items = LazyItems {
                table: store.table(&key),
                namespace: ns.map(str::to_string),
                cursor: None,
                opts: opts.list.clone(),
                key: key.clone(),
                resource: rt.clone(),
                version: t.version.clone(),
                name: (!t.name.is_empty()).then(|| t.name.clone()),
                done: false,
            };
            (store.revision(), Some(items))
        } else {
            (requested.unwrap_or(store.revision()), None)
        };
        let mut backlog_events = Vec::new();
        let sub = match store.subscribe(from) {
            Ok(sub) => sub,
            Err(e) => {
                // Once the request is valid, kube-apiserver reports an expired resourceVersion as
                // the watch's one ERROR event (its watch cache's error watcher), not as an HTTP
                // error: clients re-list on that event.
                let status = ApiError::gone(e.requested, e.oldest).to_status();
                return Ok(WatchStream {
                    target: t.clone(),
                    key,
                    options: opts,
                    initial: None,
                    initial_events: Default::default(),
                    backlog: [WatchEvent {
                        type_: "ERROR",
                        object: status,
                    }]
                    .into(),
                    live: None,
                    retired: None,
                    last_revision: from,
                });
            }
        };
        drop(store);
        let mut stream = WatchStream {
            target: t.clone(),
            key,
            options: opts,
            initial: initial_items,
            initial_events: Default::default(),
            backlog: Default::default(),
            live: Some(sub.live),
            retired: Some(sub.retired),
            last_revision: from,
        };
        for change in &sub.backlog {
            stream.last_revision = change.revision;
            if let Some(e) =
                WatchStream::convert(&stream.target, &stream.key, &stream.options, change)
            {
                backlog_events.push(e);
            }
        }
        if stream.options.send_initial_events && stream.options.allow_bookmarks {
            backlog_events.push(stream.bookmark(true));
        }
        stream.backlog = backlog_events.into();
        Ok(stream)
    }
}

/// Stored objects a watch's initial state reads at a time.
const INITIAL_CHUNK: usize = 256;

/// An unlimited list whose items are read as they are written (see [`ApiServer::list_lazily`]).
pub(crate) struct LazyList {
    pub kind: String,
    pub api_version: String,
    pub resource_version: String,
    /// Whether the items carry `apiVersion` and `kind` in JSON (a custom resource's do).
    pub typed_items: bool,
    pub items: LazyItems,
}

/// The items of a [`LazyList`], read from its snapshot a chunk at a time; the snapshot is an
/// immutable map shared with the store, so holding it costs nothing until the store moves on.
/// A clone reads the same items again from the start (a protobuf list reads them twice).
#[derive(Clone)]
pub(crate) struct LazyItems {
    table: Table,
    /// A watch of one object (`…/configmaps/NAME?watch=1`) reads only it.
    name: Option<String>,
    namespace: Option<String>,
    cursor: Option<ObjectKey>,
    opts: ListOptions,
    key: ResourceKey,
    resource: Arc<ResourceType>,
    version: String,
    done: bool,
}

impl LazyItems {
    /// The next up to `n` stored objects' worth of items (fewer, or none, once selectors
    /// filter), as the API shows them; `None` once the snapshot is read.
    pub fn next_chunk(&mut self, n: usize) -> Option<Vec<Value>> {
        if self.done {
            return None;
        }
        let (page, more) = list_table(
            &self.table,
            self.namespace.as_deref(),
            self.cursor.as_ref(),
            n,
        );
        if let Some(last) = page.last() {
            self.cursor = Some(object_key(last));
        }
        self.done = !more;
        Some(
            page.into_iter()
                .filter(|o| self.opts.matches(&self.key, o))
                .filter(|o| self.name.as_ref().is_none_or(|n| object_key(o).1 == *n))
                .map(|o| ApiServer::output(&self.resource, &self.version, &o))
                .collect(),
        )
    }
}

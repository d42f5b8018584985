//! Watch semantics: resuming, bookmarks, `410 Gone`, selector transitions, and a kube-rs
//! reflector kept consistent through a forced expiry.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use crate::common;
use crate::support::{self, DEADLINE, configmap};

/// The next non-bookmark event, failing the test after the deadline.
async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    loop {
        let event = support::next_event(stream).await;
        if !matches!(event, WatchEvent::Bookmark(_)) {
            return event;
        }
    }
}

/// `TYPE name` of an event, for comparing sequences.
fn describe(event: &WatchEvent<ConfigMap>) -> String {
    let (t, o) = match event {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        WatchEvent::Bookmark(_) => return "BOOKMARK".into(),
        WatchEvent::Error(e) => return format!("ERROR {} {}", e.code, e.message),
    };
    format!("{t} {}", o.metadata.name.clone().unwrap_or_default())
}

/// "API Concepts" (efficient detection of changes): a watch started at a resourceVersion
/// delivers exactly the changes after it, in order, then the live ones.
#[tokio::test]
async fn watch_resumes_exactly_after_resource_version() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let a = cms
        .create(&PostParams::default(), &configmap("a", &[]))
        .await
        .expect("create a");
    let from = a.metadata.resource_version.clone().expect("rv");
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .expect("modify a");
    cms.create(&PostParams::default(), &configmap("b", &[]))
        .await
        .expect("create b");
    cms.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");

    let mut stream = cms
        .watch(&WatchParams::default().disable_bookmarks(), &from)
        .await
        .expect("watch")
        .boxed();
    let mut got = Vec::new();
    let mut last_rv = from.parse::<u64>().expect("numeric rv");
    for _ in 0..3 {
        let event = next_event(&mut stream).await;
        if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) = &event {
            let rv: u64 = o
                .metadata
                .resource_version
                .as_deref()
                .expect("rv")
                .parse()
                .expect("numeric");
            assert!(rv > last_rv, "resourceVersions increase along the stream");
            last_rv = rv;
        }
        got.push(describe(&event));
    }
    assert_eq!(got, ["MODIFIED a", "ADDED b", "DELETED a"]);
    // Nothing else is pending: the next event is the next live change.
    cms.create(&PostParams::default(), &configmap("c", &[]))
        .await
        .expect("create c");
    assert_eq!(describe(&next_event(&mut stream).await), "ADDED c");
    sandbox.shutdown().await;
}

/// "API Concepts" (watch bookmarks): with `allowWatchBookmarks=true` the server sends BOOKMARK
/// events carrying only a resourceVersion no older than the events already sent.
#[tokio::test]
async fn watch_sends_bookmarks_when_requested() {
    let sandbox = common::sandbox_with(|c| c.bookmark_interval = Duration::from_millis(100)).await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let now = cms.list(&ListParams::default()).await.expect("list");
    let from = now.metadata.resource_version.expect("list rv");
    let mut stream = cms
        .watch(&WatchParams::default(), &from)
        .await
        .expect("watch")
        .boxed();
    let x = cms
        .create(&PostParams::default(), &configmap("x", &[]))
        .await
        .expect("create");
    let x_rv: u64 = x
        .metadata
        .resource_version
        .as_deref()
        .expect("rv")
        .parse()
        .expect("numeric");
    let mut saw_added = false;
    let bookmark = loop {
        let event = tokio::time::timeout(DEADLINE, stream.next())
            .await
            .expect("an event before the deadline")
            .expect("open")
            .expect("decodes");
        match event {
            WatchEvent::Added(o) if o.metadata.name.as_deref() == Some("x") => saw_added = true,
            WatchEvent::Bookmark(b) if saw_added => break b,
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {}", describe(&other)),
        }
    };
    let rv: u64 = bookmark
        .metadata
        .resource_version
        .parse()
        .expect("numeric bookmark rv");
    assert!(
        rv >= x_rv,
        "bookmark {rv} is not older than the last event {x_rv}"
    );
    assert_eq!(bookmark.types.kind, "ConfigMap");
    sandbox.shutdown().await;
}

/// "API Concepts" (410 Gone responses): a watch from a resourceVersion that has been compacted
/// away is answered with an ERROR event carrying a 410 Expired Status, and the stream ends —
/// the client must re-list.
#[tokio::test]
async fn watch_from_compacted_version_is_gone() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let a = cms
        .create(&PostParams::default(), &configmap("a", &[]))
        .await
        .expect("create");
    let from = a.metadata.resource_version.clone().expect("rv");
    cms.create(&PostParams::default(), &configmap("b", &[]))
        .await
        .expect("create");
    sandbox.api().compact();
    cms.create(&PostParams::default(), &configmap("c", &[]))
        .await
        .expect("create");

    let mut stream = cms
        .watch(&WatchParams::default(), &from)
        .await
        .expect("the watch itself starts: kube-apiserver reports expiry as a watch event")
        .boxed();
    let event = tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("an event")
        .expect("open")
        .expect("decodes");
    let WatchEvent::Error(status) = event else {
        panic!("expected an ERROR event, got {}", describe(&event));
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (410, "Expired"),
        "{status:?}"
    );
    assert!(
        status
            .message
            .starts_with(&format!("too old resource version: {from} (")),
        "{}",
        status.message
    );
    let end = tokio::time::timeout(DEADLINE, stream.next())
        .await
        .expect("the stream ends");
    assert!(end.is_none(), "nothing follows the ERROR event");
    sandbox.shutdown().await;
}

/// "API Concepts" (watch with label selectors): an object relabelled out of the selector is
/// seen as DELETED, relabelled back in as ADDED, and changed while matching as MODIFIED.
#[tokio::test]
async fn label_selector_watch_turns_relabels_into_deleted_and_added() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    let created = cms
        .create(&PostParams::default(), &configmap("r", &[("app", "x")]))
        .await
        .expect("create");
    let from = created.metadata.resource_version.expect("rv");
    let mut stream = cms
        .watch(
            &WatchParams::default().labels("app=x").disable_bookmarks(),
            &from,
        )
        .await
        .expect("watch")
        .boxed();
    let relabel = |v: &'static str| {
        let cms = cms.clone();
        async move {
            cms.patch(
                "r",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": v}}})),
            )
            .await
            .expect("relabel")
        }
    };
    relabel("y").await;
    cms.patch(
        "r",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"unseen": "1"}})),
    )
    .await
    .expect("change while not matching");
    relabel("x").await;
    cms.patch(
        "r",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"seen": "1"}})),
    )
    .await
    .expect("change while matching");
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(describe(&next_event(&mut stream).await));
    }
    assert_eq!(got, ["DELETED r", "ADDED r", "MODIFIED r"]);
    sandbox.shutdown().await;
}

/// The (name, resourceVersion) pairs of a set of config maps, sorted.
fn versions<'a>(items: impl Iterator<Item = &'a ConfigMap>) -> Vec<(String, String)> {
    let mut v: Vec<_> = items
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                c.metadata.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

/// "API Concepts" (efficient detection of changes, 410 Gone): the list-then-watch pattern of
/// client reflectors. A kube-rs reflector follows creates, updates and deletes, and after its
/// watch expires (the history is compacted while it runs) it re-lists and converges again.
#[tokio::test]
async fn reflector_converges_through_changes_and_forced_expiry() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    crate::support::create_configmaps(&cms, &["pre-1", "pre-2"]).await;

    let (store, writer) = reflector::store::<ConfigMap>();
    let relists = Arc::new(AtomicUsize::new(0));
    let counter = relists.clone();
    // Watches end after a second, so the reflector resumes often from its last resourceVersion.
    let stream = reflector(
        writer,
        watcher(cms.clone(), watcher::Config::default().timeout(1)),
    )
    .default_backoff();
    let task = tokio::spawn(stream.for_each(move |event| {
        if let Ok(watcher::Event::Init) = event {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        futures::future::ready(())
    }));
    tokio::time::timeout(DEADLINE, store.wait_until_ready())
        .await
        .expect("ready before the deadline")
        .expect("writer alive");

    let converged = || {
        let (cms, store) = (cms.clone(), store.clone());
        async move {
            let list = cms.list(&ListParams::default()).await.ok()?;
            let cached = store.state();
            let live = versions(
                list.items
                    .iter()
                    .filter(|c| c.metadata.name.as_deref() != Some(common::ROOT_CA)),
            );
            let cached = versions(
                cached
                    .iter()
                    .map(|c| c.as_ref())
                    .filter(|c| c.metadata.name.as_deref() != Some(common::ROOT_CA)),
            );
            (cached == live).then_some(live)
        }
    };

    cms.create(&PostParams::default(), &configmap("new", &[]))
        .await
        .expect("create");
    cms.patch(
        "pre-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await
    .expect("update");
    cms.delete("pre-2", &DeleteParams::default())
        .await
        .expect("delete");
    let state = common::wait_for("the reflector to follow live changes", DEADLINE, converged).await;
    assert_eq!(
        state.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["new", "pre-1"]
    );
    let before = relists.load(Ordering::SeqCst);

    // Writes elsewhere move the revision past everything the reflector has seen; compacting
    // then makes its next resume too old.
    let secret = |name: &str| {
        let mut s = Secret::default();
        s.metadata.name = Some(name.to_string());
        s
    };
    secrets
        .create(&PostParams::default(), &secret("s1"))
        .await
        .expect("secret");
    sandbox.api().compact();
    secrets
        .create(&PostParams::default(), &secret("s2"))
        .await
        .expect("secret");
    common::wait_for("the reflector to re-list after expiry", DEADLINE, || {
        let n = relists.load(Ordering::SeqCst);
        async move { (n > before).then_some(()) }
    })
    .await;
    cms.create(&PostParams::default(), &configmap("after", &[]))
        .await
        .expect("create");
    cms.delete("new", &DeleteParams::default())
        .await
        .expect("delete");
    let state = common::wait_for(
        "the reflector to converge after re-listing",
        DEADLINE,
        converged,
    )
    .await;
    assert_eq!(
        state.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["after", "pre-1"]
    );
    task.abort();
    sandbox.shutdown().await;
}

/// "Efficient detection of changes": a watch from resourceVersion "0" (or none) starts with the
/// current state as ADDED events, then the changes after it. The initial state is read from its
/// snapshot a chunk of 256 objects at a time as the watcher takes it (issue 22): across chunks,
/// with a selector that leaves whole chunks empty, every object comes once, in key order, and a
/// write made while the initial state is being sent comes after it, once.
#[tokio::test]
async fn initial_state_spans_chunks_then_changes_follow() {
    let sandbox = common::sandbox().await;
    let cms: Api<ConfigMap> = Api::namespaced(common::client(&sandbox).await, "default");
    for i in 0..600 {
        let labels: &[(&str, &str)] = if i % 200 == 199 || i >= 550 {
            &[("pick", "yes")]
        } else {
            &[]
        };
        cms.create(
            &PostParams::default(),
            &configmap(&format!("cm-{i:03}"), labels),
        )
        .await
        .expect("create");
    }
    let mut all = cms
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    let mut picked = cms
        .watch(&WatchParams::default().labels("pick=yes"), "0")
        .await
        .expect("watch")
        .boxed();
    let mut names = Vec::new();
    for _ in 0..601 {
        match next_event(&mut all).await {
            WatchEvent::Added(cm) => names.push(cm.metadata.name.unwrap_or_default()),
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    let mut expected: Vec<String> = (0..600).map(|i| format!("cm-{i:03}")).collect();
    expected.push("kube-root-ca.crt".into());
    assert_eq!(names, expected);
    cms.create(
        &PostParams::default(),
        &configmap("zz-late", &[("pick", "yes")]),
    )
    .await
    .expect("create");
    // `picked` has not been read yet: its initial state is the one of when it started.
    let mut picked_names = Vec::new();
    for _ in 0..53 {
        match next_event(&mut picked).await {
            WatchEvent::Added(cm) => picked_names.push(cm.metadata.name.unwrap_or_default()),
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    let mut expected: Vec<String> = [199, 399]
        .into_iter()
        .chain(550..600)
        .map(|i| format!("cm-{i:03}"))
        .collect();
    expected.push("zz-late".into());
    assert_eq!(picked_names, expected);
    match next_event(&mut all).await {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("zz-late")),
        other => panic!("expected ADDED zz-late, got {other:?}"),
    }
    sandbox.shutdown().await;
}

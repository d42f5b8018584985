//! Events: one store behind core `v1` and `events.k8s.io/v1`, and field selectors per kind.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Secret};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use crate::common;
use crate::support::{create_configmaps, names, next_event, status};

fn events_v1(name: &str, regarding: &str, reason: &str) -> EventV1 {
    serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": name},
        "eventTime": "2024-05-01T10:00:00.000000Z",
        "reportingController": "lien.dev/webhook",
        "reportingInstance": "lien-0",
        "action": "Delete",
        "reason": reason,
        "type": "Warning",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": regarding, "namespace": "default"},
        "note": format!("{regarding} is in use"),
        "series": {"count": 2, "lastObservedTime": "2024-05-01T10:00:05.000000Z"},
    }))
    .expect("an events.k8s.io/v1 Event")
}

fn core_event(name: &str, involved: &str, reason: &str, type_: &str, source: &str) -> Event {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": involved, "namespace": "default", "uid": format!("uid-{involved}")},
        "reason": reason,
        "type": type_,
        "message": format!("about {involved}"),
        "source": {"component": source},
        "firstTimestamp": "2024-05-01T10:00:00Z",
        "lastTimestamp": "2024-05-01T10:00:03Z",
        "count": 4,
    }))
    .expect("a core Event")
}

/// The code and message of the Status refusing a list with field selector `selector`.
async fn refusal<K>(api: &Api<K>, selector: &str) -> (u16, String)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let s = status(api.list(&ListParams::default().fields(selector)).await);
    (s.code, s.message)
}

/// kube-apiserver serves `events.k8s.io/v1` events from the core event store (k/k
/// `pkg/registry/events/rest/storage_events.go`), converting fields as k/k
/// `pkg/apis/events/v1/conversion.go` does: what one API writes the other reads, with one
/// resourceVersion, and a watch on either API sees writes made through the other.
#[tokio::test]
async fn both_event_apis_share_one_store_with_converted_fields() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let core: Api<Event> = Api::namespaced(client.clone(), "default");
    let v1: Api<EventV1> = Api::namespaced(client.clone(), "default");
    let mut core_watch = core
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch core events")
        .boxed();

    let written = v1
        .create(
            &PostParams::default(),
            &events_v1("refused", "x", "DeletionRefused"),
        )
        .await
        .expect("create through events.k8s.io/v1");
    let read = core.get("refused").await.expect("read through core v1");
    assert_eq!(read.involved_object.name.as_deref(), Some("x"));
    assert_eq!(read.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(read.message.as_deref(), Some("x is in use"));
    assert_eq!(
        read.reporting_component.as_deref(),
        Some("lien.dev/webhook")
    );
    assert_eq!(read.reporting_instance.as_deref(), Some("lien-0"));
    assert_eq!(read.action.as_deref(), Some("Delete"));
    assert_eq!(read.reason.as_deref(), Some("DeletionRefused"));
    assert_eq!(read.type_.as_deref(), Some("Warning"));
    assert_eq!(read.series.as_ref().and_then(|s| s.count), Some(2));
    assert!(read.event_time.is_some());
    assert_eq!(
        read.metadata.resource_version, written.metadata.resource_version,
        "one object, one resourceVersion"
    );
    assert_eq!(read.metadata.uid, written.metadata.uid);

    match next_event(&mut core_watch).await {
        WatchEvent::Added(e) => assert_eq!(e.metadata.name.as_deref(), Some("refused")),
        other => panic!("expected ADDED, got {other:?}"),
    }

    core.create(
        &PostParams::default(),
        &core_event("old-style", "y", "Scheduled", "Normal", "kubelet"),
    )
    .await
    .expect("create through core v1");
    let back = v1
        .get("old-style")
        .await
        .expect("read through events.k8s.io/v1");
    assert_eq!(
        back.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("y")
    );
    assert_eq!(back.note.as_deref(), Some("about y"));
    assert_eq!(back.deprecated_count, Some(4));
    assert_eq!(
        back.deprecated_source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("kubelet")
    );
    assert!(back.deprecated_first_timestamp.is_some() && back.deprecated_last_timestamp.is_some());

    // Both lists hold both events at the same resourceVersion.
    let core_list = core.list(&ListParams::default()).await.expect("list core");
    let v1_list = v1.list(&ListParams::default()).await.expect("list v1");
    assert_eq!(core_list.items.len(), 2);
    assert_eq!(v1_list.items.len(), 2);
    assert_eq!(
        core_list.metadata.resource_version,
        v1_list.metadata.resource_version
    );

    // An update through one API is seen by the other; a delete through one removes both.
    let mut edited = v1.get("refused").await.expect("get");
    edited.note = Some("still in use".into());
    v1.replace("refused", &PostParams::default(), &edited)
        .await
        .expect("replace through events.k8s.io/v1");
    assert_eq!(
        core.get("refused").await.expect("get").message.as_deref(),
        Some("still in use")
    );
    core.delete("refused", &Default::default())
        .await
        .expect("delete through core");
    assert_eq!(status(v1.get("refused").await).code, 404);
    sandbox.shutdown().await;
}

/// Field selectors on events: core v1 accepts `involvedObject.*`, `reason`, `reportingComponent`,
/// `source` and `type` (k/k `pkg/apis/core/v1/conversion.go` `AddFieldLabelConversionsForEvent`,
/// values from `pkg/registry/core/event/strategy.go` `ToSelectableFields`, where `source` falls
/// back to the reporting controller); `events.k8s.io/v1` accepts `regarding.*` and
/// `reportingController` instead (`pkg/apis/events/v1/conversion.go`). Unknown labels: 400
/// `field label not supported: <label>`.
#[tokio::test]
async fn event_field_selectors() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let core: Api<Event> = Api::namespaced(client.clone(), "default");
    let v1: Api<EventV1> = Api::namespaced(client.clone(), "default");
    for e in [
        core_event("a1", "a", "Created", "Normal", "kubelet"),
        core_event("a2", "a", "Failed", "Warning", "kubelet"),
        core_event("b1", "b", "Created", "Normal", "scheduler"),
    ] {
        core.create(&PostParams::default(), &e)
            .await
            .expect("create");
    }
    v1.create(
        &PostParams::default(),
        &events_v1("a3", "a", "DeletionRefused"),
    )
    .await
    .expect("create v1");
    let cases: &[(&str, &[&str])] = &[
        ("involvedObject.name=a", &["a1", "a2", "a3"]),
        (
            "involvedObject.kind=ConfigMap,involvedObject.namespace=default,involvedObject.name=a,involvedObject.uid=uid-a",
            &["a1", "a2"],
        ),
        (
            "involvedObject.apiVersion==v1,reason=Created",
            &["a1", "b1"],
        ),
        ("type!=Normal", &["a2", "a3"]),
        ("source=scheduler", &["b1"]),
        // No source: the reporting controller stands in.
        ("source=lien.dev/webhook", &["a3"]),
        ("reportingComponent=lien.dev/webhook", &["a3"]),
        (
            "involvedObject.fieldPath=,involvedObject.resourceVersion=",
            &["a1", "a2", "a3", "b1"],
        ),
    ];
    for (selector, want) in cases {
        let got = core
            .list(&ListParams::default().fields(selector))
            .await
            .expect(selector);
        assert_eq!(names(&got.items), *want, "core field selector {selector:?}");
    }
    let got = v1
        .list(
            &ListParams::default().fields("regarding.name=a,reportingController=lien.dev/webhook"),
        )
        .await
        .expect("events.k8s.io selector");
    assert_eq!(got.items.len(), 1);
    assert_eq!(got.items[0].metadata.name.as_deref(), Some("a3"));

    assert_eq!(
        refusal(&core, "foo=bar").await,
        (400, "field label not supported: foo".to_string())
    );
    assert_eq!(
        refusal(&v1, "involvedObject.name=a").await,
        (
            400,
            "field label not supported: involvedObject.name".to_string()
        )
    );

    // Watches filter on the same fields.
    let mut watch = core
        .watch(&WatchParams::default().fields("involvedObject.name=b"), "0")
        .await
        .expect("watch")
        .boxed();
    let first = next_event(&mut watch).await;
    assert!(matches!(first, WatchEvent::Added(e) if e.metadata.name.as_deref() == Some("b1")));
    for (name, involved) in [("a4", "a"), ("b2", "b")] {
        core.create(
            &PostParams::default(),
            &core_event(name, involved, "X", "Normal", "k"),
        )
        .await
        .expect(name);
    }
    let next = next_event(&mut watch).await;
    assert!(
        matches!(&next, WatchEvent::Added(e) if e.metadata.name.as_deref() == Some("b2")),
        "the watch skips a4: {next:?}"
    );
    sandbox.shutdown().await;
}

/// Field selectors of other kinds (k/k `pkg/registry/core/{secret,namespace}/strategy.go`), and
/// each API version's wording for a label it does not support: core kinds with only metadata
/// fields say `field label "x" not supported for "Kind"` (`pkg/apis/core/v1/conversion.go`),
/// kinds without a conversion function fall back to `DefaultMetaV1FieldSelectorConversion`
/// (`k8s.io/apimachinery/pkg/runtime/conversion.go`).
#[tokio::test]
async fn field_selectors_per_kind_and_their_refusals() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    for (name, type_) in [
        ("s1", "Opaque"),
        ("s2", "kubernetes.io/tls-like"),
        ("s3", "Opaque"),
    ] {
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": name}, "type": type_,
        }))
        .expect("secret");
        secrets
            .create(&PostParams::default(), &s)
            .await
            .expect("create");
    }
    let got = secrets
        .list(&ListParams::default().fields("type=Opaque"))
        .await
        .expect("type selector");
    assert_eq!(names(&got.items), ["s1", "s3"]);

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let active = namespaces
        .list(&ListParams::default().fields("status.phase=Active"))
        .await
        .expect("phase selector");
    assert!(
        active
            .items
            .iter()
            .any(|n| n.metadata.name.as_deref() == Some("default"))
    );
    let terminating = namespaces
        .list(&ListParams::default().fields("status.phase=Terminating"))
        .await
        .expect("phase selector");
    assert!(terminating.items.is_empty());

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_configmaps(&cms, &["c"]).await;
    assert_eq!(
        refusal(&cms, "data.a=b").await,
        (
            400,
            "field label \"data.a\" not supported for \"ConfigMap\"".to_string()
        )
    );
    assert_eq!(
        refusal(&secrets, "data.a=b").await,
        (400, "field label not supported: data.a".to_string())
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), "default");
    assert_eq!(
        refusal(&leases, "spec.holderIdentity=a").await,
        (
            400,
            "\"spec.holderIdentity\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                .to_string()
        )
    );
    sandbox.shutdown().await;
}

//! Events as kubectl shows them: `describe` lists an object's events (field selectors on
//! `involvedObject.*`), `get events` shows what was written through `events.k8s.io/v1`.

use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::PostParams;

use super::*;

/// Writes, through `events.k8s.io/v1` as Lien does, a Warning about ConfigMap `name`.
async fn lien_event(sandbox: &Sandbox, k: &Kubectl, name: &str, uid: &str) {
    let client = common::client(sandbox).await;
    let events: Api<EventV1> = Api::namespaced(client, &k.namespace);
    let event: EventV1 = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}.refused")},
        "eventTime": "2024-05-01T10:00:00.000000Z",
        "reportingController": "lien.dev/webhook",
        "reportingInstance": "lien-0",
        "action": "Delete",
        "reason": "DeletionRefused",
        "type": "Warning",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
            "namespace": k.namespace, "uid": uid},
        "note": format!("configmap {name} is in use by usage/app"),
    }))
    .expect("event");
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("create the event");
}

#[tokio::test]
async fn describe_shows_events_and_get_events_shows_lien_events() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "events").await;
    k.apply_yaml(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n",
    )
    .await;
    let uid = k.jsonpath("configmap", "x", "{.metadata.uid}").await;
    lien_event(&sandbox, &k, "x", &uid).await;

    let described = k.ns(&["describe", "configmap", "x"]).await.out();
    let events_section = described
        .split_once("Events:")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no Events section:\n{described}"));
    let rows = table(events_section);
    assert_eq!(
        rows[0],
        ["Type", "Reason", "Age", "From", "Message"],
        "{described}"
    );
    assert_eq!(rows[1][0], "----", "{described}");
    assert_eq!(rows[2][..2], ["Warning", "DeletionRefused"], "{described}");
    assert_eq!(rows[2][3], "lien.dev/webhook", "{described}");
    assert!(
        events_section.contains("configmap x is in use by usage/app"),
        "{described}"
    );

    // kube-apiserver's event columns (k/k pkg/printers/internalversion/printers.go,
    // printEvent), the event read through core v1; `-o wide` adds the priority-1 ones.
    let listed = k.ns(&["get", "events"]).await.out();
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{listed}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{listed}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    // Last Seen falls back to the eventTime of 2024: HumanDuration's years and days (`2y206d`).
    assert!(row[0].contains('y') && row[0].ends_with('d'), "{listed}");
    assert_eq!(
        row[1..4],
        ["Warning", "DeletionRefused", "configmap/x"],
        "{listed}"
    );
    assert!(
        lines[1].contains("configmap x is in use by usage/app"),
        "{listed}"
    );
    let wide = k.ns(&["get", "events", "-o", "wide"]).await.out();
    let lines: Vec<&str> = wide.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "LAST",
            "SEEN",
            "TYPE",
            "REASON",
            "OBJECT",
            "SUBOBJECT",
            "SOURCE",
            "MESSAGE",
            "FIRST",
            "SEEN",
            "COUNT",
            "NAME"
        ],
        "{wide}"
    );
    assert!(lines[1].contains("lien.dev/webhook"), "{wide}");
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(cells[cells.len() - 2..], ["1", "x.refused"], "{wide}");
    let listed = k
        .ns(&[
            "get",
            "events",
            "-o",
            "custom-columns=TYPE:.type,REASON:.reason,OBJECT:.involvedObject.name,FROM:.reportingComponent",
        ])
        .await
        .out();
    assert_eq!(
        table(&listed),
        [
            ["TYPE", "REASON", "OBJECT", "FROM"],
            ["Warning", "DeletionRefused", "x", "lien.dev/webhook"]
        ],
        "{listed}"
    );

    // And by field selector, as a user narrows them.
    let selected = k
        .ns(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=x,reason=DeletionRefused",
            "-o",
            "name",
        ])
        .await
        .out();
    assert_eq!(selected.trim(), "event/x.refused");
    let err = k
        .ns(&["get", "events", "--field-selector", "foo=bar"])
        .await
        .err();
    assert!(err.contains("field label not supported: foo"), "{err}");
    sandbox.shutdown().await;
}

/// An event written through `events.k8s.io/v1` with only `eventTime` (what kube-rs' `Recorder`
/// writes, so every Lien event) reads through core v1 as kube-apiserver encodes it: the
/// conversion (k/k `pkg/apis/events/v1/conversion.go`) maps `deprecatedLastTimestamp` to
/// `lastTimestamp`, which is a non-pointer `metav1.Time` written `null` when zero, and
/// `eventTime` carries over. So `kubectl get events --sort-by=.lastTimestamp` finds the field on
/// every event (null sorts first) and prints them, as on a cluster; a missing field would be
/// kubectl's `couldn't find any field with path`.
#[tokio::test]
async fn events_with_only_event_time_sort_by_last_timestamp_as_on_a_cluster() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "evsort").await;
    lien_event(&sandbox, &k, "a", "uid-a").await;
    lien_event(&sandbox, &k, "b", "uid-b").await;
    let json: serde_json::Value =
        serde_json::from_str(&k.ns(&["get", "events", "-o", "json"]).await.out()).expect("JSON");
    let first = &json["items"][0];
    let fields = first.as_object().expect("an event");
    assert_eq!(first["eventTime"], "2024-05-01T10:00:00.000000Z", "{first}");
    for zero in ["lastTimestamp", "firstTimestamp"] {
        assert!(
            fields.get(zero) == Some(&serde_json::Value::Null),
            "{zero}: {first}"
        );
    }
    assert_eq!(first["source"], json!({}), "{first}");
    let sorted = k
        .ns(&["get", "events", "--sort-by=.lastTimestamp"])
        .await
        .out();
    let rows = table(&sorted);
    assert_eq!(rows.len(), 3, "{sorted}");
    assert_eq!(rows[0][..3], ["LAST", "SEEN", "TYPE"], "{sorted}");
    let mut objects: Vec<&str> = rows[1..].iter().map(|r| r[3].as_str()).collect();
    objects.sort();
    assert_eq!(objects, ["configmap/a", "configmap/b"], "{sorted}");
    sandbox.shutdown().await;
}

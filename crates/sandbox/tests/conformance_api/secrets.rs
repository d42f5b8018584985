//! Secrets: `stringData` is write-only input. kube-apiserver's v1 → internal conversion
//! (k/k `pkg/apis/core/v1/conversion.go`, `Convert_v1_Secret_To_core_Secret`) copies each
//! `stringData` entry into `data` ("StringData overwrites Data") whenever it decodes a Secret —
//! create, update and patch alike — and the internal type has no `stringData`, so it is never
//! stored nor returned (kubernetes.io/docs/concepts/configuration/secret: "The stringData field
//! is a write-only convenience field … merged into the data field").

use serde_json::{Value, json};

use crate::common;
use crate::support::request;

fn b64(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test]
async fn string_data_is_merged_into_data_and_never_stored() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let base = "/api/v1/namespaces/default/secrets";
    let json_headers = [("content-type", "application/json")];
    let body = json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "data": {"kept": b64("old"), "over": b64("old")},
        "stringData": {"over": "new", "plain": "hello"},
    });
    let created = request(
        &client,
        "POST",
        base,
        &json_headers,
        body.to_string().into(),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let want = json!({"kept": b64("old"), "over": b64("new"), "plain": b64("hello")});
    let created = created.json();
    assert_eq!(created["data"], want, "{created}");
    assert!(created.get("stringData").is_none(), "{created}");
    assert_eq!(created["type"], "Opaque");

    let got: Value = request(&client, "GET", &format!("{base}/s"), &[], vec![])
        .await
        .json();
    assert_eq!(got["data"], want, "{got}");
    assert!(got.get("stringData").is_none(), "{got}");

    // A merge patch and an update decode the Secret again: merged the same way.
    let patched = request(
        &client,
        "PATCH",
        &format!("{base}/s"),
        &[("content-type", "application/merge-patch+json")],
        json!({"stringData": {"kept": "patched"}})
            .to_string()
            .into(),
    )
    .await;
    assert_eq!(
        patched.status,
        200,
        "{}",
        String::from_utf8_lossy(&patched.body)
    );
    let patched = patched.json();
    assert_eq!(patched["data"]["kept"], b64("patched"), "{patched}");
    assert!(patched.get("stringData").is_none(), "{patched}");

    let mut update = patched.clone();
    update["stringData"] = json!({"added": "by update"});
    let updated = request(
        &client,
        "PUT",
        &format!("{base}/s"),
        &json_headers,
        update.to_string().into(),
    )
    .await;
    assert_eq!(
        updated.status,
        200,
        "{}",
        String::from_utf8_lossy(&updated.body)
    );
    let updated = updated.json();
    assert_eq!(updated["data"]["added"], b64("by update"), "{updated}");
    assert_eq!(updated["data"]["plain"], b64("hello"), "{updated}");
    assert!(updated.get("stringData").is_none(), "{updated}");

    // A Secret with only stringData gets a data map.
    let only = json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "only"},
        "stringData": {"k": "v"},
    });
    let only = request(
        &client,
        "POST",
        base,
        &json_headers,
        only.to_string().into(),
    )
    .await;
    assert_eq!(only.status, 201, "{}", String::from_utf8_lossy(&only.body));
    assert_eq!(only.json()["data"], json!({"k": b64("v")}));
    sandbox.shutdown().await;
}

//! Helpers shared by the lifecycle tests: objects with owners and finalizers, and waiting for
//! them to change or go.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::Status;
use kube::{Resource, ResourceExt};
use lien_sandbox::testing::TestWebhook;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::common;

/// How long any one expected change may take. The sandbox's GC backs off to at most 200 ms.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A finalizer no controller handles: only the test removes it.
pub const HOLD: &str = "lifecycle.test/hold";

pub async fn namespace(client: &kube::Client, name: &str) -> Namespace {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.to_string());
    api.create(&PostParams::default(), &ns)
        .await
        .expect("create namespace")
}

/// An owner reference to `owner`, optionally with `blockOwnerDeletion`.
pub fn owner_ref<K>(owner: &K, block: Option<bool>) -> OwnerReference
where
    K: Resource<DynamicType = ()>,
{
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.meta().name.clone().expect("owner name"),
        uid: owner.meta().uid.clone().expect("owner uid"),
        block_owner_deletion: block,
        controller: None,
    }
}

/// A ConfigMap with the given owners, finalizers and labels.
pub async fn configmap(
    api: &Api<ConfigMap>,
    name: &str,
    owners: Vec<OwnerReference>,
    finalizers: &[&str],
    labels: &[(&str, &str)],
) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_string());
    if !owners.is_empty() {
        cm.metadata.owner_references = Some(owners);
    }
    if !finalizers.is_empty() {
        cm.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
    if !labels.is_empty() {
        cm.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
    }
    cm.data = Some([("k".to_string(), name.to_string())].into());
    api.create(&PostParams::default(), &cm)
        .await
        .unwrap_or_else(|e| panic!("create configmap {name}: {e}"))
}

/// Waits until `name` is gone (404).
pub async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    common::wait_for(&format!("{name} to be deleted"), DEADLINE, || async {
        // Any 404: a custom resource whose CRD went meanwhile is the bare `404 page not found`,
        // which kube-rs does not read as NotFound.
        match api.get(name).await {
            Ok(_) => None,
            Err(kube::Error::Api(s)) if s.code == 404 => Some(()),
            Err(e) => panic!("get {name}: {e}"),
        }
    })
    .await
}

/// Waits until `name` satisfies `check`, returning it.
pub async fn wait_until<K>(api: &Api<K>, name: &str, what: &str, check: impl Fn(&K) -> bool) -> K
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    common::wait_for(&format!("{name}: {what}"), DEADLINE, || async {
        let obj = api.get_opt(name).await.expect("get")?;
        check(&obj).then_some(obj)
    })
    .await
}

/// Reads an object that must still exist.
pub async fn present<K>(api: &Api<K>, name: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    api.get_opt(name)
        .await
        .expect("get")
        .unwrap_or_else(|| panic!("{name} should still exist"))
}

pub fn is_deleting<K: Resource>(obj: &K) -> bool {
    obj.meta().deletion_timestamp.is_some()
}

/// Removes one finalizer (a merge patch of the whole list, guarded by resourceVersion), as a
/// controller does when its cleanup is done.
pub async fn remove_finalizer<K>(api: &Api<K>, name: &str, finalizer: &str)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let obj = present(api, name).await;
    let rest: Vec<String> = obj
        .finalizers()
        .iter()
        .filter(|f| f.as_str() != finalizer)
        .cloned()
        .collect();
    let patch =
        json!({"metadata": {"finalizers": rest, "resourceVersion": obj.resource_version()}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_or_else(|e| panic!("remove finalizer {finalizer} from {name}: {e}"));
}

/// The `Status` of a refused request.
pub fn status<T: Debug>(result: Result<T, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends every DELETE of a ConfigMap (matching `selector`) to `webhook`, through a
/// ValidatingWebhookConfiguration `name` that fails closed.
pub async fn watch_configmap_deletes(
    client: &kube::Client,
    webhook: &TestWebhook,
    name: &str,
    selector: Option<serde_json::Value>,
) {
    let config = webhook.configuration(
        name,
        json!([{"operations": ["DELETE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]),
        "Fail",
        selector,
    );
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    hooks
        .create(
            &PostParams::default(),
            &serde_json::from_value(config).expect("webhook configuration"),
        )
        .await
        .expect("create webhook configuration");
}

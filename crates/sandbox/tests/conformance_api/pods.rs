//! Pod subresources other than `status`: `eviction`
//! (<https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/>, honouring
//! <https://kubernetes.io/docs/tasks/run-application/configure-pdb/>) and `ephemeralcontainers`
//! (<https://kubernetes.io/docs/concepts/workloads/pods/ephemeral-containers/>).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::support::*;
use crate::common::{client, sandbox};

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    }))
    .expect("pod")
}

async fn send(admin: &kube::Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body
        .map(|b| serde_json::to_vec(&b).expect("json"))
        .unwrap_or_default();
    let reply = request(
        admin,
        method,
        path,
        &[("content-type", "application/json")],
        body,
    )
    .await;
    (reply.status, reply.json_or_null())
}

/// The admin's client without kube-rs's own retries: it retries a 429 with backoff (as
/// client-go's `kubectl drain` does), and the refusal itself is what is checked here.
async fn without_retries(sandbox: &lien_sandbox::Sandbox) -> kube::Client {
    let kubeconfig: kube::config::Kubeconfig =
        serde_json::from_value(sandbox.kubeconfig()).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("client config");
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

async fn gone(pods: &Api<Pod>, name: &str) -> bool {
    matches!(pods.get(name).await, Err(kube::Error::Api(s)) if s.code == 404)
}

/// "API-initiated eviction": an Eviction for a pod no PodDisruptionBudget covers deletes it and
/// is answered `Status{Success}` (201); an Eviction naming another pod than the URL is 400; a
/// pod that does not exist is 404; the subresource takes only POST.
#[tokio::test]
async fn eviction_deletes_a_pod_no_budget_protects() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("pod");
    let reply = send(
        &admin,
        "POST",
        "/api/v1/namespaces/default/pods/p/eviction",
        Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "other", "namespace": "default"}})),
    )
    .await;
    assert_eq!(reply.0, 400, "{:?}", reply.1);
    assert_eq!(
        reply.1["message"],
        "name in URL does not match name in Eviction object"
    );
    let reply = send(
        &admin,
        "GET",
        "/api/v1/namespaces/default/pods/p/eviction",
        None,
    )
    .await;
    assert_eq!(reply.0, 405, "{:?}", reply.1);

    let reply = send(
        &admin,
        "POST",
        "/api/v1/namespaces/default/pods/p/eviction",
        Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "default"}})),
    )
    .await;
    assert_eq!(reply.0, 201, "{:?}", reply.1);
    assert_eq!(
        reply.1,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201})
    );
    assert!(gone(&pods, "p").await);
    let s = status(pods.evict("p", &EvictParams::default()).await);
    assert_eq!((s.code, s.message.as_str()), (404, "pods \"p\" not found"));
}

/// A running, Ready pod covered by a PodDisruptionBudget is evicted only while the budget
/// allows a disruption: one its controller has not observed yet, or with `disruptionsAllowed`
/// 0, refuses with 429 and kube-apiserver's message and cause; one that allows it is spent
/// (`disruptionsAllowed` decremented, the pod in `disruptedPods`) and the pod deleted.
#[tokio::test]
async fn eviction_honours_a_pod_disruption_budget() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &pod("web-1"))
        .await
        .expect("pod");
    // What the kubelet would report of a started pod.
    pods.patch_status(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .expect("pod status");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("pdb created");

    let raw = without_retries(&sandbox).await;
    let evict = || {
        send(
            &raw,
            "POST",
            "/api/v1/namespaces/default/pods/web-1/eviction",
            Some(json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "web-1"}})),
        )
    };
    let refusal = |(code, body): (u16, Value)| {
        assert_eq!(code, 429, "{body}");
        assert_eq!(body["reason"], "TooManyRequests");
        assert_eq!(
            body["message"],
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(
            body["details"]["causes"].as_array().map(Vec::len),
            Some(1),
            "{body}"
        );
        assert_eq!(body["details"]["causes"][0]["reason"], "DisruptionBudget");
        body["details"]["causes"][0]["message"].clone()
    };
    let message = refusal(evict().await);
    assert_eq!(
        message,
        "The disruption budget web is still being processed by the server."
    );

    // What the disruption controller would write: one pod, healthy, none to spare.
    let budget_status = |allowed: i64| {
        Patch::Merge(
            json!({"status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}}),
        )
    };
    pdbs.patch_status("web", &PatchParams::default(), &budget_status(0))
        .await
        .expect("pdb status");
    let message = refusal(evict().await);
    assert_eq!(
        message,
        "The disruption budget web needs 1 healthy pods and has 1 currently"
    );
    assert!(!gone(&pods, "web-1").await);

    pdbs.patch_status("web", &PatchParams::default(), &budget_status(1))
        .await
        .expect("pdb status");
    pods.evict("web-1", &EvictParams::default())
        .await
        .expect("evicted");
    assert!(gone(&pods, "web-1").await);
    let spent = pdbs.get_status("web").await.expect("pdb");
    let st = serde_json::to_value(spent.status).expect("json");
    assert_eq!(st["disruptionsAllowed"], 0);
    assert!(st["disruptedPods"]["web-1"].is_string(), "{st}");
}

/// `pods/NAME/ephemeralcontainers`: GET answers the Pod; PATCH and PUT change
/// `spec.ephemeralContainers` and nothing else (defaulted as containers are); an ephemeral
/// container can be neither removed nor changed, and needs an image.
#[tokio::test]
async fn ephemeral_containers_are_added_through_their_subresource() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("pod");
    let got: Value = pods
        .get_subresource("ephemeralcontainers", "p")
        .await
        .map(|p| serde_json::to_value(p).expect("json"))
        .expect("get ephemeralcontainers");
    assert_eq!(got["kind"], "Pod");
    let patched = pods
        .patch_subresource(
            "ephemeralcontainers",
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {
                "ephemeralContainers": [{"name": "debugger", "image": "busybox",
                    "targetContainerName": "app"}],
                // Not the subresource's to change: ignored.
                "containers": [{"name": "app", "image": "nginx:1.28"}]
            }})),
        )
        .await
        .expect("patched");
    let spec = serde_json::to_value(patched.spec).expect("json");
    assert_eq!(spec["containers"][0]["image"], "nginx:1.27");
    assert_eq!(spec["ephemeralContainers"][0]["image"], "busybox");
    assert_eq!(
        spec["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    assert_eq!(spec["ephemeralContainers"][0]["imagePullPolicy"], "Always");

    let mut removed = pods.get("p").await.expect("pod");
    removed.spec.as_mut().expect("spec").ephemeral_containers = Some(vec![]);
    let s = status(
        pods.replace_subresource("ephemeralcontainers", "p", &PostParams::default(), &removed)
            .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    assert_eq!(
        s.message,
        "Pod \"p\" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral containers \"debugger\" may not be removed\n"
    );
    let s = status(
        pods.patch_subresource(
            "ephemeralcontainers",
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"ephemeralContainers": [{"name": "second"}]}})),
        )
        .await,
    );
    assert_eq!(s.code, 422, "{s:?}");
    // The container the patch adds goes first (kube-apiserver v1.32 says `[0]` too).
    assert_eq!(
        s.message,
        "Pod \"p\" is invalid: spec.ephemeralContainers[0].image: Required value"
    );
}

/// `pods/binding`, as a scheduler binds a pod (kube's `BindingREST`, answers measured against
/// kube-apiserver 1.32 in the differential's `kinds/pod-binding`): `201 Status{Success}`, the
/// node set with `PodScheduled: True`; a second binding is a conflict; a binding for another
/// name is 400 and one without a node 422; the pod's own update may not move it.
#[tokio::test]
async fn a_binding_puts_a_pod_on_a_node_once() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("pod");
    let path = "/api/v1/namespaces/default/pods/p/binding";
    let binding = |name: &str, node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
               "target": {"kind": "Node", "name": node}})
    };
    let (code, body) = send(&admin, "POST", path, Some(binding("p", "node-1"))).await;
    assert_eq!(
        (code, &body),
        (
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        )
    );
    let bound = pods.get("p").await.expect("pod");
    let spec = bound.spec.expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    let conditions = bound.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True"),
        "{conditions:?}"
    );

    let (code, body) = send(&admin, "POST", path, Some(binding("p", "node-2"))).await;
    assert_eq!(code, 409, "{body}");
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"node-1\""
    );
    let (code, _) = send(&admin, "POST", path, Some(binding("q", "node-1"))).await;
    assert_eq!(code, 400);
    let (code, body) = send(&admin, "POST", path, Some(binding("p", ""))).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "Binding \"p\" is invalid: target.name: Required value"
    );
    // Through the pod itself the node cannot change (`ValidatePodUpdate`).
    let moved = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "node-2"}})),
        )
        .await;
    assert!(
        matches!(&moved, Err(kube::Error::Api(s)) if s.code == 422),
        "{moved:?}"
    );
    sandbox.shutdown().await;
}

/// Storage object in-use protection (<https://kubernetes.io/docs/concepts/storage/persistent-volumes/#storage-object-in-use-protection>):
/// a new claim carries `kubernetes.io/pvc-protection`; deleted while a scheduled pod mounts it,
/// it stays, Terminating, until the pod is gone; a claim no scheduled pod mounts goes at once.
#[tokio::test]
async fn a_claim_a_scheduled_pod_mounts_waits_for_the_pod() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::api::DeleteParams;
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), "default");
    let claim = |name: &str| -> PersistentVolumeClaim {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
        .expect("claim")
    };
    for name in ["db", "idle"] {
        let created = claims
            .create(&PostParams::default(), &claim(name))
            .await
            .expect("claim");
        assert_eq!(
            created.metadata.finalizers.as_deref(),
            Some(&["kubernetes.io/pvc-protection".to_string()][..])
        );
    }
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let mounting: Pod = serde_json::from_value(json!({
        "metadata": {"name": "db-0"},
        "spec": {"containers": [{"name": "app", "image": "postgres:17"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db"}}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &mounting)
        .await
        .expect("pod");
    let (code, body) = send(
        &admin,
        "POST",
        "/api/v1/namespaces/default/pods/db-0/binding",
        Some(
            json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "db-0"},
                    "target": {"kind": "Node", "name": "sandbox"}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    claims
        .delete("idle", &DeleteParams::default())
        .await
        .expect("delete");
    claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("delete");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while claims.get_opt("idle").await.expect("get").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "idle claim not released"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Held while the pod mounts it (give the controller time to act wrongly).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let held = claims.get("db").await.expect("held by its finalizer");
    assert!(held.metadata.deletion_timestamp.is_some());
    pods.delete("db-0", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
    while claims.get_opt("db").await.expect("get").is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "db claim not released after its pod went"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    sandbox.shutdown().await;
}

/// "Service Accounts" (the ServiceAccount admission controller): a Pod runs as a service account
/// that exists — one that names a missing account is forbidden (403, kube-apiserver v1.32.13's
/// words: differential case `python-client/…serviceaccountname-nobody`); one that names none
/// runs as `default`; once the account is made, the same Pod is admitted.
#[tokio::test]
async fn a_pod_must_run_as_a_service_account_that_exists() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let mut nobody = pod("p");
    nobody.spec.as_mut().expect("spec").service_account_name = Some("nobody".into());
    let s = status(pods.create(&PostParams::default(), &nobody).await);
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"), "{s:?}");
    assert_eq!(
        s.message,
        "pods \"p\" is forbidden: error looking up service account default/nobody: serviceaccount \"nobody\" not found"
    );
    let plain = pods
        .create(&PostParams::default(), &pod("q"))
        .await
        .expect("a pod naming no account runs as default");
    assert_eq!(
        plain.spec.expect("spec").service_account_name.as_deref(),
        Some("default")
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nobody"}})).expect("sa"),
        )
        .await
        .expect("create the account");
    pods.create(&PostParams::default(), &nobody)
        .await
        .expect("admitted once its account exists");
    sandbox.shutdown().await;
}

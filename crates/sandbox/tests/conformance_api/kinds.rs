//! Per-kind behaviour: DELETE responses, defaults, the Node, namespace bootstrap objects, Service
//! cluster IPs and the `scale` subresource.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};

use crate::common;
use crate::support::{
    DEADLINE, create_configmaps, register, request, serve_crd, status, widget, widget_crd,
};

/// A raw request through the client: (HTTP status, JSON body).
async fn raw(client: &kube::Client, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let reply = match body {
        Some(b) => {
            let json = [("content-type", "application/json")];
            request(
                client,
                method,
                path,
                &json,
                serde_json::to_vec(&b).expect("json"),
            )
            .await
        }
        None => request(client, method, path, &[], vec![]).await,
    };
    (reply.status, reply.json_or_null())
}

/// `kubectl scale`'s merge patch of the `scale` subresource.
async fn scale_to<K>(api: &Api<K>, name: &str, replicas: i32) -> Scale
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_scale(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .expect("patch scale")
}

fn parse<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("parses")
}

/// k/k `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go` (`finalizeDelete`:
/// a `Status{Success}` whose details name the resource, unless the store sets
/// `ReturnDeletedObject`, as `pkg/registry/core/{service,serviceaccount,pod}/storage/storage.go`
/// do) and `staging/src/k8s.io/apiextensions-apiserver/pkg/registry/customresource/etcd.go`
/// (custom resources answer a Status).
#[tokio::test]
async fn delete_answers_the_object_or_a_status_per_kind() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ns = "default";
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    create_configmaps(&cms, &["c"]).await;
    let (code, body) = raw(
        &client,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let s: Status = parse(body.clone());
    assert_eq!(
        s.status,
        Some(kube::core::response::StatusSummary::Success),
        "{body}"
    );
    let details = s.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("c", "configmaps")
    );
    assert!(!details.uid.is_empty());

    for (plural, object) in [
        (
            "services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}),
        ),
        (
            "serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "s"}}),
        ),
        (
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        ),
    ] {
        let path = format!("/api/v1/namespaces/default/{plural}");
        let (code, created) = raw(&client, "POST", &path, Some(object)).await;
        assert_eq!(code, 201, "{created}");
        let (code, body) = raw(&client, "DELETE", &format!("{path}/s"), None).await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(
            body["kind"], created["kind"],
            "{plural} returns the object: {body}"
        );
        assert_eq!(body["metadata"]["uid"], created["metadata"]["uid"]);
    }
    // Typed clients get what they expect.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    sas.create(
        &PostParams::default(),
        &parse(json!({"metadata": {"name": "typed"}})),
    )
    .await
    .expect("sa");
    let deleted = sas
        .delete("typed", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(deleted.is_left(), "a ServiceAccount comes back as itself");

    // A custom resource: Status.
    let ar = widget_crd(&client).await;
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    widgets
        .create(
            &PostParams::default(),
            &widget(&ar, "w", json!({"size": 1})),
        )
        .await
        .expect("widget");
    let gone = widgets
        .delete("w", &DeleteParams::default())
        .await
        .expect("delete widget");
    let right = gone.right().expect("a custom resource answers a Status");
    assert_eq!(right.details.expect("details").kind, "widgets");
    sandbox.shutdown().await;
}

/// `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/delete.go`: an object that waits for
/// finalizers is returned as it now is, with 202 Accepted only when the client set
/// `orphanDependents: false`, else 200.
#[tokio::test]
async fn a_delete_that_waits_answers_the_object_200_or_202() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let path = "/api/v1/namespaces/default/configmaps";
    for (name, options, expected) in [
        ("a", json!({}), 200),
        ("b", json!({"propagationPolicy": "Foreground"}), 200),
        ("c", json!({"orphanDependents": false}), 202),
    ] {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "finalizers": ["example.com/hold"]}});
        assert_eq!(raw(&client, "POST", path, Some(cm)).await.0, 201);
        let mut opts = options;
        opts["apiVersion"] = json!("v1");
        opts["kind"] = json!("DeleteOptions");
        let (code, body) = raw(&client, "DELETE", &format!("{path}/{name}"), Some(opts)).await;
        assert_eq!(code, expected, "{name}: {body}");
        assert_eq!(body["kind"], "ConfigMap", "{body}");
        assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
    }
    sandbox.shutdown().await;
}

/// The node a kubelet registers (`pkg/kubelet/kubelet_node_status.go`, `initialNode` and
/// `setNodeStatus`): Ready, addresses, capacity and node info.
#[tokio::test]
async fn the_sandbox_node_is_registered_and_ready() {
    let sandbox = common::sandbox().await;
    let nodes: Api<Node> = Api::all(common::client(&sandbox).await);
    let node = nodes.get("sandbox").await.expect("node sandbox");
    let status = node.status.expect("status");
    let ready = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("True", Some("KubeletReady"))
    );
    let addresses = status.addresses.unwrap_or_default();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == "127.0.0.1")
    );
    let capacity = status.capacity.expect("capacity");
    assert_eq!(capacity.get("pods").map(|q| q.0.as_str()), Some("110"));
    assert!(status.allocatable.is_some());
    let info = status.node_info.expect("nodeInfo");
    assert_eq!(info.kubelet_version, "v1.32.0-lien-sandbox");
    assert_eq!(info.operating_system, "linux");
    sandbox.shutdown().await;
}

/// kube-controller-manager's serviceaccounts-controller
/// (`pkg/controller/serviceaccount/serviceaccounts_controller.go`) and root-ca-cert-publisher
/// (`pkg/controller/certificates/rootcacertpublisher/publisher.go`): every namespace, the
/// initial ones too, gets a `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap with
/// the cluster's CA, recreated when deleted and restored when changed.
#[tokio::test]
async fn every_namespace_gets_its_default_service_account_and_root_ca() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let ca = sandbox.ca().cert_pem().to_string();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &parse(json!({"metadata": {"name": "fresh"}})),
        )
        .await
        .expect("namespace");
    for ns in [
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "fresh",
    ] {
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        common::wait_for("the default service account", DEADLINE, || {
            let sas = sas.clone();
            async move { sas.get_opt("default").await.ok().flatten() }
        })
        .await;
        let cm = common::wait_for("kube-root-ca.crt", DEADLINE, || {
            let cms = cms.clone();
            async move { cms.get_opt("kube-root-ca.crt").await.ok().flatten() }
        })
        .await;
        assert_eq!(cm.data.unwrap_or_default().get("ca.crt"), Some(&ca), "{ns}");
        let annotations = cm.metadata.annotations.unwrap_or_default();
        assert!(
            annotations
                .get("kubernetes.io/description")
                .is_some_and(|d| d.starts_with("Contains a CA bundle")),
            "{annotations:?}"
        );
    }
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "fresh");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "fresh");
    let old = sas.get("default").await.expect("sa");
    sas.delete("default", &DeleteParams::default())
        .await
        .expect("delete sa");
    common::wait_for("the service account recreated", DEADLINE, || {
        let sas = sas.clone();
        let old_uid = old.metadata.uid.clone();
        async move {
            sas.get_opt("default")
                .await
                .ok()
                .flatten()
                .filter(|sa| sa.metadata.uid != old_uid)
        }
    })
    .await;
    cms.patch(
        "kube-root-ca.crt",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"ca.crt": "tampered"}})),
    )
    .await
    .expect("tamper");
    common::wait_for("the CA restored", DEADLINE, || {
        let cms = cms.clone();
        let ca = ca.clone();
        async move {
            let cm = cms.get("kube-root-ca.crt").await.ok()?;
            (cm.data?.get("ca.crt") == Some(&ca)).then_some(())
        }
    })
    .await;
    sandbox.shutdown().await;
}

/// Defaults of `pkg/apis/core/v1/defaults.go` (`SetDefaults_Pod`, `SetDefaults_PodSpec`,
/// `SetDefaults_Container`), the Pod strategy's `PrepareForCreate` (phase Pending, QoS class,
/// `pkg/registry/core/pod/strategy.go`) and the ServiceAccount admission plugin
/// (`plugin/pkg/admission/serviceaccount/admission.go`).
#[tokio::test]
async fn a_pod_is_defaulted_and_pending() {
    let sandbox = common::sandbox().await;
    let pods: Api<Pod> = Api::namespaced(common::client(&sandbox).await, "default");
    let pod = pods
        .create(
            &PostParams::default(),
            &parse(json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "image": "nginx"},
                {"name": "b", "image": "nginx:1.27", "resources": {"requests": {"cpu": "100m"}}},
            ]}})),
        )
        .await
        .expect("pod");
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    assert!(spec.security_context.is_some());
    let pull: Vec<_> = spec
        .containers
        .iter()
        .map(|c| c.image_pull_policy.clone().unwrap_or_default())
        .collect();
    assert_eq!(pull, ["Always", "IfNotPresent"]);
    assert_eq!(
        spec.containers[0].termination_message_path.as_deref(),
        Some("/dev/termination-log")
    );
    assert_eq!(
        spec.containers[0].termination_message_policy.as_deref(),
        Some("File")
    );
    let status = pod.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("Burstable"));
    sandbox.shutdown().await;
}

/// `pkg/apis/apps/v1/defaults.go` and `pkg/apis/batch/v1/defaults.go`: what `kubectl get -o
/// yaml` shows of a Deployment with `strategy: {}`, a StatefulSet, a DaemonSet, a Job and a
/// CronJob written without them.
#[tokio::test]
async fn workloads_are_defaulted() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let template = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let selector = json!({"matchLabels": {"app": "x"}});
    let pp = PostParams::default();
    let d: Deployment = Api::namespaced(client.clone(), "default")
        .create(&pp, &parse(json!({"metadata": {"name": "d"}, "spec": {"selector": selector, "strategy": {}, "template": template}})))
        .await
        .expect("deployment");
    let ds = d.spec;
    let strategy = ds.strategy.expect("strategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    let ru = strategy.rolling_update.expect("rollingUpdate");
    assert_eq!(
        serde_json::to_value(&ru).expect("json"),
        json!({"maxSurge": "25%", "maxUnavailable": "25%"})
    );
    let tspec = ds.template.spec.expect("template spec");
    assert_eq!(tspec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(
        tspec.service_account_name, None,
        "admission defaults are for Pods only"
    );

    let s: StatefulSet = Api::namespaced(client.clone(), "default")
        .create(&pp, &parse(json!({"metadata": {"name": "s"}, "spec": {"selector": selector, "serviceName": "s", "template": template}})))
        .await
        .expect("statefulset");
    let ss = serde_json::to_value(s.spec).expect("json");
    assert_eq!(ss["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        ss["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(ss["revisionHistoryLimit"], 10);
    assert_eq!(ss["replicas"], 1);

    let a: DaemonSet = Api::namespaced(client.clone(), "default")
        .create(&pp, &parse(json!({"metadata": {"name": "a"}, "spec": {"selector": selector, "template": template}})))
        .await
        .expect("daemonset");
    let a = serde_json::to_value(a.spec).expect("json");
    assert_eq!(
        a["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );

    let mut job_template = template.clone();
    job_template["spec"]["restartPolicy"] = json!("Never");
    let j: Job = Api::namespaced(client.clone(), "default")
        .create(
            &pp,
            &parse(json!({"metadata": {"name": "j"}, "spec": {"template": job_template}})),
        )
        .await
        .expect("job");
    let uid = j.metadata.uid.clone().expect("uid");
    let js = serde_json::to_value(j.spec.expect("spec")).expect("json");
    assert_eq!(
        (
            &js["backoffLimit"],
            &js["completions"],
            &js["parallelism"],
            &js["completionMode"],
            &js["suspend"]
        ),
        (
            &json!(6),
            &json!(1),
            &json!(1),
            &json!("NonIndexed"),
            &json!(false)
        )
    );
    assert_eq!(
        js["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        json!(uid)
    );
    assert_eq!(js["template"]["metadata"]["labels"]["job-name"], "j");

    let c: CronJob = Api::namespaced(client.clone(), "default")
        .create(&pp, &parse(json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_template}}}})))
        .await
        .expect("cronjob");
    let cs = serde_json::to_value(c.spec).expect("json");
    assert_eq!(
        (
            &cs["concurrencyPolicy"],
            &cs["suspend"],
            &cs["successfulJobsHistoryLimit"],
            &cs["failedJobsHistoryLimit"]
        ),
        (&json!("Allow"), &json!(false), &json!(3), &json!(1))
    );
    sandbox.shutdown().await;
}

/// Service cluster IPs (`pkg/registry/core/service/storage/alloc.go`, ipallocator) and
/// `SetDefaults_Service`/`SetDefaults_ServicePort`: an address from the service range, unique,
/// released on delete; `None` kept for headless Services; the `kubernetes` Service holds the
/// range's first address; ports get TCP and targetPort = port.
#[tokio::test]
async fn services_get_unique_cluster_ips_from_the_service_range() {
    let sandbox = common::sandbox().await;
    let svcs: Api<Service> = Api::namespaced(common::client(&sandbox).await, "default");
    let kubernetes = svcs.get("kubernetes").await.expect("kubernetes service");
    assert_eq!(
        kubernetes.spec.expect("spec").cluster_ip.as_deref(),
        Some("10.96.0.1")
    );
    let pp = PostParams::default();
    let a = svcs
        .create(&pp, &parse(json!({"metadata": {"name": "a"}, "spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}})))
        .await
        .expect("a");
    let spec = serde_json::to_value(a.spec).expect("json");
    let ip = spec["clusterIP"].as_str().expect("clusterIP").to_string();
    let octets: Vec<u8> = ip.split('.').map(|o| o.parse().expect("octet")).collect();
    assert!(
        octets[0] == 10 && (96..112).contains(&octets[1]),
        "{ip} in 10.96.0.0/12"
    );
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );

    let taken = status(
        svcs.create(&pp, &parse(json!({"metadata": {"name": "b"}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}})))
            .await,
    );
    assert_eq!(taken.code, 422);
    assert!(
        taken.message.contains("provided IP is already allocated"),
        "{}",
        taken.message
    );
    let outside = status(
        svcs.create(&pp, &parse(json!({"metadata": {"name": "b"}, "spec": {"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}})))
            .await,
    );
    assert!(
        outside
            .message
            .contains("The range of valid IPs is 10.96.0.0/12"),
        "{}",
        outside.message
    );

    svcs.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    let b = svcs
        .create(&pp, &parse(json!({"metadata": {"name": "b"}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}})))
        .await
        .expect("the released address is free again");
    assert_eq!(b.spec.expect("spec").cluster_ip, Some(ip));

    let headless = svcs
        .create(&pp, &parse(json!({"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}})))
        .await
        .expect("headless");
    assert_eq!(
        headless.spec.expect("spec").cluster_ips,
        Some(vec!["None".to_string()])
    );
    sandbox.shutdown().await;
}

/// The `scale` subresource (`pkg/registry/apps/deployment/storage/storage.go` `ScaleREST`;
/// "Scale subresource" of the CustomResourceDefinition docs,
/// https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#scale-subresource):
/// an autoscaling/v1 Scale read from and written to the object's replicas, a stale
/// resourceVersion refused with 409, negative replicas with 422.
#[tokio::test]
async fn scale_reads_and_writes_replicas() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let d = deployments
        .create(
            &PostParams::default(),
            &parse(json!({"metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}})),
        )
        .await
        .expect("deployment");
    let scale = deployments.get_scale("web").await.expect("get scale");
    assert_eq!(scale.spec.as_ref().and_then(|s| s.replicas), Some(2));
    assert_eq!(
        scale
            .status
            .as_ref()
            .and_then(|s| s.selector.clone())
            .as_deref(),
        Some("app=web")
    );
    assert_eq!(scale.metadata.resource_version, d.metadata.resource_version);

    let patched = scale_to(&deployments, "web", 3).await;
    assert_eq!(patched.spec.and_then(|s| s.replicas), Some(3));
    let after = deployments.get("web").await.expect("get");
    assert_eq!(after.spec.replicas, Some(3));
    assert_eq!(
        after.metadata.generation,
        Some(2),
        "a replicas change is a spec change"
    );

    let stale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "resourceVersion": d.metadata.resource_version}, "spec": {"replicas": 5}});
    let conflict = status(
        deployments
            .replace_scale("web", &PostParams::default(), &parse(stale))
            .await,
    );
    assert_eq!(conflict.code, 409, "{}", conflict.message);
    let negative = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": -1}});
    let invalid = status(
        deployments
            .replace_scale("web", &PostParams::default(), &parse(negative))
            .await,
    );
    assert_eq!(invalid.code, 422, "{}", invalid.message);

    // A CRD that declares the subresource.
    let ar = serve_crd(&client, &parse(scalable_crd())).await;
    let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    pools
        .create(
            &PostParams::default(),
            &DynamicObject::new("p", &ar).data(json!({"spec": {"size": 1}})),
        )
        .await
        .expect("pool");
    let scaled = scale_to(&pools, "p", 4).await;
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(4));
    let pool = pools.get("p").await.expect("pool");
    assert_eq!(pool.data["spec"]["size"], 4);
    sandbox.shutdown().await;
}

fn scalable_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.size",
                    "labelSelectorPath": ".status.selector",
                }},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"size": {"type": "integer"}, "selector": {"type": "string"}}},
                }}},
            }],
        },
    })
}

/// Admission of a write through `scale` ("Dynamic Admission Control", the `AdmissionRequest`
/// fields, https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#request):
/// `kind` autoscaling/v1 Scale, `resource` deployments, `subResource` scale, old and new Scale.
#[tokio::test]
async fn webhooks_review_scale_writes_as_scale() {
    use lien_sandbox::testing::{TestWebhook, Verdict};
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let hook = TestWebhook::start(|_| Verdict::Allow)
        .await
        .expect("webhook");
    let rules = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments/scale"]}]);
    register(&client, hook.configuration("scale", rules, "Fail", None)).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    deployments
        .create(
            &PostParams::default(),
            &parse(json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}})),
        )
        .await
        .expect("deployment");
    assert!(
        hook.requests().is_empty(),
        "the rule names deployments/scale only"
    );
    scale_to(&deployments, "web", 3).await;
    let requests = hook.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let r = &requests[0];
    assert_eq!(
        r["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        r["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(r["subResource"], "scale");
    assert_eq!(r["operation"], "UPDATE");
    assert_eq!(r["object"]["kind"], "Scale");
    assert_eq!(r["object"]["spec"]["replicas"], 3);
    assert_eq!(r["oldObject"]["spec"]["replicas"], 1);
    hook.stop().await;
    sandbox.shutdown().await;
}

/// "Certificates and Certificate Signing Requests": a CSR's `spec.request` must be a PEM
/// `CERTIFICATE REQUEST` signed by its key — anything else is 422 naming the bytes as Go prints
/// them (checked against kube-apiserver v1.32.13: differential case `invalid/csr-bad-request`);
/// a request made by a real key is stored.
#[tokio::test]
async fn a_certificate_signing_request_must_hold_a_signed_request() {
    use base64::Engine;
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let csr = |name: &str, request: &[u8]| {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
               "metadata": {"name": name},
               "spec": {"request": base64::engine::general_purpose::STANDARD.encode(request),
                        "signerName": "example.com/s", "usages": ["client auth"]}})
    };
    let (code, body) = raw(&client, "POST", path, Some(csr("bad", b"hello"))).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        "CertificateSigningRequest.certificates.k8s.io \"bad\" is invalid: spec.request: Invalid value: []byte{0x68, 0x65, 0x6c, 0x6c, 0x6f}: PEM block type must be CERTIFICATE REQUEST"
    );
    let key = rcgen::KeyPair::generate().expect("a key");
    let request = rcgen::CertificateParams::new(vec!["someone".to_string()])
        .expect("params")
        .serialize_request(&key)
        .expect("a request")
        .pem()
        .expect("pem");
    let (code, body) = raw(&client, "POST", path, Some(csr("good", request.as_bytes()))).await;
    assert_eq!(code, 201, "{body}");
    sandbox.shutdown().await;
}

/// The deprecated ComponentStatus API (`kubectl get componentstatuses`): probed on each read,
/// not stored — the scheduler and controller-manager at their default ports on this machine
/// (nothing listens there in a test: unhealthy, in Go's words), the storage healthy — with
/// kube's deprecation warning on every read. Checked against kube-apiserver v1.32.13
/// (differential cases `errors/get-api-v1-componentstatuses-etcd-0`, `kinds/get-componentstatuses`).
#[tokio::test]
async fn component_statuses_are_probed_on_each_read_with_a_deprecation_warning() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let one = request(
        &client,
        "GET",
        "/api/v1/componentstatuses/etcd-0",
        &[],
        vec![],
    )
    .await;
    assert_eq!(one.status, 200);
    assert_eq!(
        one.warnings,
        ["299 - \"v1 ComponentStatus is deprecated in v1.19+\""]
    );
    let etcd: Value = serde_json::from_slice(&one.body).expect("json");
    assert_eq!(
        etcd,
        json!({"kind": "ComponentStatus", "apiVersion": "v1",
               "metadata": {"name": "etcd-0", "creationTimestamp": null},
               "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}]})
    );
    let all = request(&client, "GET", "/api/v1/componentstatuses", &[], vec![]).await;
    let list: Value = serde_json::from_slice(&all.body).expect("json");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["scheduler", "controller-manager", "etcd-0"]);
    let scheduler = &list["items"][0]["conditions"][0];
    if scheduler["status"] == "False" {
        assert!(scheduler.get("error").is_none(), "{scheduler}");
        assert_eq!(
            scheduler["message"],
            "Get \"https://127.0.0.1:10259/healthz\": dial tcp 127.0.0.1:10259: connect: connection refused"
        );
    }
    let missing = request(
        &client,
        "GET",
        "/api/v1/componentstatuses/nope",
        &[],
        vec![],
    )
    .await;
    assert_eq!(missing.status, 404);
    sandbox.shutdown().await;
}

/// A template's own metadata, as kube-apiserver encodes it: Go's `ObjectMeta` is embedded by
/// value, so every pod or job template it returns has `metadata: {creationTimestamp: null}`
/// even when none was sent — in a Deployment's template and both of a CronJob's templates —
/// while the object's own metadata has its time. Checked against kube-apiserver v1.32.13
/// (differential entry `pod-template-creation-timestamp-null`).
#[tokio::test]
async fn templates_carry_go_s_zero_creation_time() {
    let sandbox = common::sandbox().await;
    let client = common::client(&sandbox).await;
    let pod_spec =
        json!({"containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"});
    let (code, deployment) = raw(
        &client,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                    "spec": {"selector": {"matchLabels": {"a": "b"}},
                             "template": {"metadata": {"labels": {"a": "b"}},
                                          "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})),
    )
    .await;
    assert_eq!(code, 201, "{deployment}");
    assert_eq!(
        deployment["spec"]["template"]["metadata"],
        json!({"creationTimestamp": null, "labels": {"a": "b"}})
    );
    assert!(deployment["metadata"]["creationTimestamp"].is_string());
    let (code, cronjob) = raw(
        &client,
        "POST",
        "/apis/batch/v1/namespaces/default/cronjobs",
        Some(
            json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
                    "spec": {"schedule": "* * * * *",
                             "jobTemplate": {"spec": {"template": {"spec": pod_spec}}}}}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{cronjob}");
    assert_eq!(
        cronjob["spec"]["jobTemplate"]["metadata"],
        json!({"creationTimestamp": null})
    );
    assert_eq!(
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["metadata"],
        json!({"creationTimestamp": null})
    );
    let (_, read) = raw(
        &client,
        "GET",
        "/apis/batch/v1/namespaces/default/cronjobs/c",
        None,
    )
    .await;
    assert_eq!(
        read["spec"]["jobTemplate"]["metadata"],
        json!({"creationTimestamp": null})
    );
    sandbox.shutdown().await;
}

//! The objects kube-apiserver creates when it starts, under any authorization mode
//! (<https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings>,
//! <https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/#priorityclass>,
//! <https://kubernetes.io/docs/concepts/services-networking/service/#services-without-selectors>
//! for the `kubernetes` Service's Endpoints).

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, ListParams, PostParams};
use lien_sandbox::apiserver::Authorization;
use serde_json::json;

use super::support::*;
use crate::common::{client, client_for, sandbox, sandbox_with, wait_for};

fn has_rule(role: &ClusterRole, group: &str, resource: &str, verb: &str) -> bool {
    role.rules.iter().flatten().any(|r| {
        r.api_groups.iter().flatten().any(|g| g == group)
            && r.resources.iter().flatten().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

/// "Default roles and role bindings": `cluster-admin`, `admin`, `edit`, `view` (the last three
/// aggregated from ClusterRoles labelled `rbac.authorization.k8s.io/aggregate-to-*`), the
/// `system:` roles clients rely on, with their bindings to `system:authenticated` (and
/// `system:unauthenticated` for `system:public-info-viewer`), every one labelled
/// `kubernetes.io/bootstrapping: rbac-defaults` — present even under AlwaysAllow.
#[tokio::test]
async fn default_cluster_roles_and_bindings_exist() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    for name in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:aggregate-to-admin",
        "system:aggregate-to-edit",
        "system:aggregate-to-view",
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        let role = roles.get(name).await.expect(name);
        let labels = role.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            labels
                .get("kubernetes.io/bootstrapping")
                .map(String::as_str),
            Some("rbac-defaults"),
            "{name}"
        );
    }
    let view = roles.get("view").await.expect("view");
    assert_eq!(
        serde_json::to_value(&view.aggregation_rule).expect("json"),
        json!({"clusterRoleSelectors": [{"matchLabels":
            {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]})
    );
    let edit_labels = roles.get("edit").await.expect("edit").metadata.labels;
    assert_eq!(
        edit_labels
            .unwrap_or_default()
            .get("rbac.authorization.k8s.io/aggregate-to-admin")
            .map(String::as_str),
        Some("true")
    );
    // The clusterrole-aggregation controller fills their rules: view reads, edit also writes
    // (through view), admin also manages Roles (through edit).
    let admin_role = wait_for("admin's aggregated rules", DEADLINE, || {
        let roles = roles.clone();
        async move {
            let role = roles.get("admin").await.ok()?;
            (has_rule(&role, "", "pods", "list")
                && has_rule(&role, "", "pods", "create")
                && has_rule(&role, "rbac.authorization.k8s.io", "roles", "create"))
            .then_some(role)
        }
    })
    .await;
    assert!(!has_rule(&admin_role, "", "nodes", "list"));
    let view = roles.get("view").await.expect("view");
    assert!(has_rule(&view, "apps", "deployments", "watch"));
    assert!(
        !has_rule(&view, "", "secrets", "get"),
        "view cannot read secrets"
    );
    assert!(!has_rule(&view, "", "pods", "create"));

    let bindings: Api<ClusterRoleBinding> = Api::all(admin.clone());
    for (name, groups) in [
        ("cluster-admin", vec!["system:masters"]),
        ("system:discovery", vec!["system:authenticated"]),
        ("system:basic-user", vec!["system:authenticated"]),
        (
            "system:public-info-viewer",
            vec!["system:authenticated", "system:unauthenticated"],
        ),
    ] {
        let b = bindings.get(name).await.expect(name);
        assert_eq!(b.role_ref.name, name);
        let subjects: Vec<String> = b
            .subjects
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(subjects, groups, "{name}");
    }
}

/// Under RBAC, `view` grants what the aggregated roles grant, and a ClusterRole an admin labels
/// `rbac.authorization.k8s.io/aggregate-to-view: "true"` extends `view` (and so `edit` and
/// `admin`) — "Aggregated ClusterRoles" in the RBAC docs.
#[tokio::test]
async fn view_is_aggregated_and_grants_under_rbac() {
    let sandbox = sandbox_with(|c| c.authorization = Authorization::Rbac).await;
    let admin = client(&sandbox).await;
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "user-views"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "sandbox-user"}]
    }))
    .expect("binding");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding created");
    let user = client_for(&sandbox, "sandbox-user").await;
    let pods: Api<Pod> = Api::namespaced(user.clone(), "default");
    wait_for("view to grant listing pods", DEADLINE, || {
        let pods = pods.clone();
        async move { pods.list(&ListParams::default()).await.ok() }
    })
    .await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}
    }))
    .expect("pod");
    let s = status(pods.create(&PostParams::default(), &pod).await);
    assert_eq!(s.code, 403, "{s:?}");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(user.clone());
    assert_eq!(status(nodes.list(&ListParams::default()).await).code, 403);

    let extra: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": "view-nodes",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]
    }))
    .expect("role");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &extra)
        .await
        .expect("role created");
    wait_for("view to grant listing nodes", DEADLINE, || {
        let nodes = nodes.clone();
        async move { nodes.list(&ListParams::default()).await.ok() }
    })
    .await;
    let roles: Api<ClusterRole> = Api::all(admin.clone());
    wait_for("admin to aggregate view's new rule", DEADLINE, || {
        let roles = roles.clone();
        async move {
            let role = roles.get("admin").await.ok()?;
            has_rule(&role, "", "nodes", "list").then_some(())
        }
    })
    .await;
}

/// kube-apiserver's `scheduling/bootstrap-system-priority-classes` post-start hook:
/// `system-node-critical` (2000001000) and `system-cluster-critical` (2000000000), not global
/// defaults, preempting lower priorities.
#[tokio::test]
async fn system_priority_classes_exist() {
    let sandbox = sandbox().await;
    let pcs: Api<PriorityClass> = Api::all(client(&sandbox).await);
    let node = pcs
        .get("system-node-critical")
        .await
        .expect("node critical");
    assert_eq!(node.value, Some(2_000_001_000));
    assert_eq!(node.global_default, None);
    assert_eq!(
        node.description.as_deref(),
        Some("Used for system critical pods that must not be moved from their current node.")
    );
    let cluster = pcs
        .get("system-cluster-critical")
        .await
        .expect("cluster critical");
    assert_eq!(cluster.value, Some(2_000_000_000));
    assert_eq!(
        cluster.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
}

/// The `kubernetes` Service in `default` has Endpoints and an EndpointSlice at the address the
/// API server serves on (its endpoint reconciler), and targets its port.
#[tokio::test]
async fn the_kubernetes_service_has_endpoints_at_the_sandbox() {
    let sandbox = sandbox().await;
    let admin = client(&sandbox).await;
    let port = i32::from(sandbox.addr().port());
    let svc = Api::<Service>::namespaced(admin.clone(), "default")
        .get("kubernetes")
        .await
        .expect("service");
    let svc_port = &svc.spec.expect("spec").ports.expect("ports")[0];
    assert_eq!(svc_port.port, 443);
    assert_eq!(
        svc_port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(port))
    );
    let ep = Api::<Endpoints>::namespaced(admin.clone(), "default")
        .get("kubernetes")
        .await
        .expect("endpoints");
    assert_eq!(
        serde_json::to_value(&ep.subsets).expect("json"),
        json!([{"addresses": [{"ip": "127.0.0.1"}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
    );
    assert_eq!(
        ep.metadata.labels.unwrap_or_default()["endpointslice.kubernetes.io/skip-mirror"],
        "true"
    );
    let slice = Api::<EndpointSlice>::namespaced(admin, "default")
        .get("kubernetes")
        .await
        .expect("endpointslice");
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(
        slice.metadata.labels.unwrap_or_default()["kubernetes.io/service-name"],
        "kubernetes"
    );
    assert_eq!(
        serde_json::to_value(&slice.endpoints).expect("json"),
        json!([{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}])
    );
    assert_eq!(
        serde_json::to_value(&slice.ports).expect("json"),
        json!([{"name": "https", "port": port, "protocol": "TCP"}])
    );
}

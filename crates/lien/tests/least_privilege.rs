//! Least privilege by construction (issue 31, item 3), on both targets (`LIEN_E2E_TARGET`),
//! with Lien running as its ServiceAccount bound to exactly the ClusterRole `lien manifests`
//! generates: the default install cannot read a Secret; a Usage of a kind Lien may not watch
//! says `NotPermitted`, naming the resource and the flag that grants it — and claims no
//! protection; following that hint (`lien manifests --resource secrets`, applied) protects the
//! object without restarting Lien.

#[path = "ha/cluster.rs"]
mod cluster;

use std::time::{Duration, Instant};

use cluster::Cluster;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

/// Lien retries a refused list every 10 s (`FORBIDDEN_RETRY`); the rest is the list, the
/// resolution and the status write.
const DEADLINE: Duration = Duration::from_secs(45);

/// The RBAC objects of `lien manifests` with `options` (ServiceAccount, ClusterRole, Roles and
/// their bindings), applied as `kubectl apply --server-side` would.
async fn apply_rbac(c: &Cluster, options: &lien::manifests::Options) {
    let rbac = lien::manifests::objects_with(options)
        .into_iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some(
                    "ServiceAccount"
                        | "ClusterRole"
                        | "ClusterRoleBinding"
                        | "Role"
                        | "RoleBinding"
                )
            )
        });
    cluster::real::apply_all(&c.client, rbac).await;
}

fn usages(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let mut ar =
        ApiResource::from_gvk(&GroupVersionKind::gvk(lien_api::GROUP, "v1alpha1", "Usage"));
    ar.plural = "usages".into();
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn ready(usage: &DynamicObject) -> Option<(String, String, String)> {
    let conditions = usage.data["status"]["conditions"].as_array()?;
    let c = conditions.iter().find(|c| c["type"] == "Ready")?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("message")))
}

/// Waits until the Usage's Ready condition has `status` and `reason`; returns its message.
async fn wait_ready(api: &Api<DynamicObject>, name: &str, status: &str, reason: &str) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        let last = api.get(name).await.ok().and_then(|u| ready(&u));
        if let Some((s, r, m)) = &last
            && s == status
            && r == reason
        {
            return m.clone();
        }
        assert!(
            Instant::now() < end,
            "Usage {name}: Ready {status}/{reason} not reached in {DEADLINE:?}; last {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn status_code(r: Result<impl Sized, kube::Error>) -> u16 {
    match r {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(e) => panic!("no answer: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_default_install_reads_no_secret_and_a_usage_of_one_says_how_to_grant_it() {
    let mut c = Cluster::start(1).await;
    c.expect_refused("secrets");
    // The default install's RBAC (on the real target this replaces the suite's wider grant).
    apply_rbac(&c, &lien::manifests::Options::default()).await;
    let kubeconfig = c.service_account_kubeconfig(lien::manifests::NAME).await;

    let ns = "least-privilege";
    c.create_namespace(ns).await;
    let secrets: Api<Secret> = Api::namespaced(c.client.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "db-password"},
                "stringData": {"password": "hunter2"}}))
            .expect("secret"),
        )
        .await
        .expect("secret");

    // 1. Lien's ServiceAccount, with the default install's rights, reads no Secret.
    let lien_client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
            &Default::default(),
        )
        .await
        .expect("config"),
    )
    .expect("client");
    let as_lien: Api<Secret> = Api::namespaced(lien_client.clone(), ns);
    assert_eq!(status_code(as_lien.get("db-password").await), 403);
    assert_eq!(
        status_code(
            Api::<Secret>::all(lien_client)
                .list(&ListParams::default())
                .await
        ),
        403
    );

    // 2. Lien runs as that ServiceAccount (the sandbox's replicas otherwise run as its admin).
    let as_service_account = format!("--kubeconfig={}", kubeconfig.display());
    let args: Vec<&str> = if c.is_real() {
        vec![]
    } else {
        vec![&as_service_account]
    };
    c.spawn(0, "lien-0", &args);

    // A Usage of the Secret: not Ready, NotPermitted, naming what to grant — never Resolved.
    let api = usages(&c.client, ns);
    let usage: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
        "metadata": {"name": "app-reads-password", "namespace": ns},
        "spec": {"of": {"apiVersion": "v1", "kind": "Secret",
                        "resourceRef": {"name": "db-password"}},
                 "reason": "the app reads its database password from it"},
    }))
    .expect("usage");
    api.create(&PostParams::default(), &usage)
        .await
        .expect("the Usage is admitted");
    let message = wait_ready(&api, "app-reads-password", "False", "NotPermitted").await;
    assert!(
        message.contains("--resource secrets") && message.contains("rbac.protectedResources"),
        "the condition names the flag and the Helm value: {message}"
    );
    let claimed = in_use(&api.get("app-reads-password").await.expect("usage").data);
    assert_ne!(claimed.as_deref(), Some("True"), "no protection is claimed");
    // Nor does the webhook refuse: nothing is labelled.
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    assert_eq!(
        status_code(secrets.delete("db-password", &dry_run).await),
        200
    );

    // 3. The hint, followed: the same install with `--resource secrets`, applied. Lien picks the
    //    grant up by itself; the Usage resolves and the DELETE is refused.
    let mut granted = lien::manifests::Options::default();
    granted
        .resources
        .push(lien::manifests::Resource::parse("secrets").expect("a resource"));
    apply_rbac(&c, &granted).await;
    wait_ready(&api, "app-reads-password", "True", "Resolved").await;
    // The label follows the resolution by a moment: dry runs until Lien refuses, then the
    // real DELETE, refused too.
    let end = Instant::now() + DEADLINE;
    while status_code(secrets.delete("db-password", &dry_run).await) != 409 {
        assert!(
            Instant::now() < end,
            "a dry-run DELETE of the Secret is not refused in {DEADLINE:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    match secrets
        .delete("db-password", &DeleteParams::default())
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 409 => {
            assert!(s.message.contains("app-reads-password"), "{}", s.message)
        }
        other => panic!("the DELETE of a protected Secret: {other:?}"),
    }
}

/// The `InUse` condition's status of a Usage's data.
fn in_use(data: &Value) -> Option<String> {
    data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "InUse")
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

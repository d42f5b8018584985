//! `lien uninstall`: removes Lien from a cluster without leaving anything stuck.
//!
//! Order, and why:
//! 1. **Refuse** (non-zero, listing them) while Usages, ClusterUsages or DependencyRules still
//!    protect something (`InUse=True`) or objects still carry `lien.dev/in-use`, unless
//!    `--force`: uninstalling lifts every protection at once.
//! 2. **Stop Lien**: delete the Deployment and wait for its pods to be gone, then wait until
//!    nobody holds the leader Lease. A running leader restores its webhook configuration
//!    (tampering protection) and re-adds labels and finalizers, so nothing below would stick
//!    while it runs. A Lien running outside the Deployment (`lien run` on a workstation) is
//!    seen through the Lease: uninstall stops with the holder's name, to be stopped first.
//! 3. **The Validating- and MutatingWebhookConfiguration**: from here on nothing is refused or
//!    sealed, so the steps below cannot be blocked by Lien's own webhooks (failurePolicy Fail
//!    while they are down).
//! 4. **What Lien wrote on other objects**: the `lien.dev/in-use` label, the replay records
//!    (`lien.dev/deletion-attempt`), deletion requests never sealed
//!    (`lien.dev/delete-when-free`, set after the mutating hook went) and Lien's finalizers
//!    (`lien.dev/usage`, `lien.dev/cascade`) on every object of every listable kind. Nothing else: others' labels, annotations and
//!    finalizers stay (a merge patch guarded by the resourceVersion read).
//! 5. **Lien's own objects**: Service, disruption budget, RBAC, ServiceAccount and the
//!    namespace (with its Secrets and Lease), as `lien manifests` lists them.
//! 6. **The CRDs**, last: deleting them deletes every Usage and rule, which no finalizer holds
//!    any more.
//!
//! `--dry-run` prints what each step would do and changes nothing. `--keep-installed-objects`
//! stops after step 4: the Helm chart's pre-delete hook runs it so, and Helm deletes the
//! release's objects next (and keeps the CRDs, as Helm does with a chart's `crds/`).

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, PartialObjectMeta, Patch, PatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::discovery::verbs;
use serde_json::{Value, json};

/// The annotation a refused DELETE is recorded in.
const RECORD: &str = lien_controller::replay::DELETION_ATTEMPT_ANNOTATION;
/// The annotation of a deletion request (`kubectl lien delete --when-free`), sealed into a
/// record by Lien's mutating webhook; one set without it is left over.
const REQUEST: &str = lien_core::seams::DELETE_WHEN_FREE_ANNOTATION;
/// Lien's finalizers.
const FINALIZERS: [&str; 2] = [lien_api::USAGE_FINALIZER, lien_api::CASCADE_FINALIZER];

#[derive(Debug, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArgs,
    /// Uninstall even though Usages or rules still protect objects (every protection is lifted).
    #[arg(long)]
    pub force: bool,
    /// Print what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Stop Lien and remove what it wrote (webhook configurations, labels, replay records,
    /// finalizers), but leave the objects of the install — Service, RBAC, namespace, CRDs — to
    /// the tool that installed them: the Helm chart's pre-delete hook runs this, and Helm
    /// deletes the release's objects right after.
    #[arg(long)]
    pub keep_installed_objects: bool,
    /// Lien's namespace.
    #[arg(long, default_value = lien::manifests::NAMESPACE)]
    pub namespace: String,
    /// The Validating- and MutatingWebhookConfiguration Lien registers (one name for both).
    #[arg(long, default_value = "lien")]
    pub webhook_configuration: String,
    /// The leader-election Lease, watched to know that Lien has stopped.
    #[arg(long, default_value = lien_controller::leader::DEFAULT_LEASE)]
    pub lease: String,
    /// How long to wait for Lien's pods to go and its Lease to be free, in seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout_seconds: u64,
}

fn gvk_of(object: &Value) -> GroupVersionKind {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap_or_default())
}

/// The Api for an object's kind (resolved through discovery), in its namespace if any.
async fn api_for(
    client: &kube::Client,
    gvk: &GroupVersionKind,
    namespace: Option<&str>,
) -> anyhow::Result<Api<DynamicObject>> {
    let gk = lien_core::GroupKind::new(&gvk.group, &gvk.kind);
    let found = lien_watch::discover(client, &gk, &gvk.api_version())
        .await
        .with_context(|| format!("discovering {}", gvk.kind))?;
    Ok(match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &found.ar),
        None => Api::all_with(client.clone(), &found.ar),
    })
}

/// Whether a Usage or rule protects something: it holds relations (`InUse=True`) and they
/// refuse (not `spec.enforcement: Warn`, which refuses nothing: uninstalling lifts no protection).
fn protects(object: &Value) -> bool {
    object["spec"]["enforcement"] != "Warn"
        && object["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "InUse" && c["status"] == "True")
        })
}

fn describe(meta: &kube::api::ObjectMeta, kind: &str) -> String {
    match &meta.namespace {
        Some(ns) => format!("{kind} {ns}/{}", meta.name.as_deref().unwrap_or_default()),
        None => format!("{kind} {}", meta.name.as_deref().unwrap_or_default()),
    }
}

/// Step 1: the sources that still protect something.
async fn protecting(client: &kube::Client) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for (kind, plural) in [
        ("Usage", "usages"),
        ("ClusterUsage", "clusterusages"),
        ("DependencyRule", "dependencyrules"),
    ] {
        let mut ar =
            ApiResource::from_gvk(&GroupVersionKind::gvk(lien_api::GROUP, "v1alpha1", kind));
        ar.plural = plural.to_owned();
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let list = match api.list(&ListParams::default()).await {
            Ok(list) => list,
            // The CRD is not installed (any more): nothing of that kind protects.
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e).with_context(|| format!("listing {plural}")),
        };
        for o in list.items.iter().filter(|o| protects(&o.data)) {
            out.push(format!("{} (InUse=True)", describe(&o.metadata, kind)));
        }
    }
    Ok(out)
}

/// Every listable and patchable resource the API server serves.
async fn resources(client: &kube::Client) -> anyhow::Result<Vec<ApiResource>> {
    let served = lien_watch::served_resources(client, lien_watch::Versions::Preferred)
        .await
        .context("discovering the API server's resources")?;
    Ok(served
        .into_iter()
        .filter(|r| r.supports(verbs::LIST) && r.supports(verbs::PATCH))
        .map(|r| r.ar)
        .collect())
}

/// What step 4 changes on one object: a merge patch, or `None` when Lien left nothing there.
fn strip_patch(meta: &kube::api::ObjectMeta) -> Option<Value> {
    let mut patch = serde_json::Map::new();
    if meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(lien_api::IN_USE_LABEL))
    {
        patch.insert("labels".into(), json!({lien_api::IN_USE_LABEL: null}));
    }
    let annotations: serde_json::Map<String, Value> = [RECORD, REQUEST]
        .into_iter()
        .filter(|k| {
            meta.annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(*k))
        })
        .map(|k| (k.to_owned(), Value::Null))
        .collect();
    if !annotations.is_empty() {
        patch.insert("annotations".into(), Value::Object(annotations));
    }
    let finalizers = meta.finalizers.clone().unwrap_or_default();
    if finalizers.iter().any(|f| FINALIZERS.contains(&f.as_str())) {
        // A merge patch replaces the list: the others' finalizers are kept, in order, and
        // the resourceVersion makes a concurrent change fail rather than be undone.
        let kept: Vec<&String> = finalizers
            .iter()
            .filter(|f| !FINALIZERS.contains(&f.as_str()))
            .collect();
        patch.insert("finalizers".into(), json!(kept));
    }
    if patch.is_empty() {
        return None;
    }
    patch.insert("resourceVersion".into(), json!(meta.resource_version));
    Some(json!({ "metadata": patch }))
}

/// Step 4 on every object of `ar`; returns how many objects were (or would be) changed.
async fn strip_kind(
    client: &kube::Client,
    ar: &ApiResource,
    dry_run: bool,
) -> anyhow::Result<usize> {
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client.clone(), ar);
    let mut changed = 0;
    for attempt in 0.. {
        let list = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list,
            // Run with the Helm hook's rights (those of Lien's own install: the resources
            // Lien may watch and patch), a resource outside them is one Lien could not have
            // written to either. Said, not hidden: run by someone else, it is theirs to check.
            Err(kube::Error::Api(e)) if e.code == 403 => {
                lien::outln!(
                    "skipped {}: not permitted to list it (Lien's install does not grant it either)",
                    lien_watch::grantable_resource(ar)
                );
                return Ok(changed);
            }
            Err(e) => return Err(e).with_context(|| format!("listing {}", ar.plural)),
        };
        let mut conflicts = 0;
        for o in &list.items {
            let Some(patch) = strip_patch(&o.metadata) else {
                continue;
            };
            let what = describe(&o.metadata, &ar.kind);
            if dry_run {
                lien::outln!("would remove Lien's label/record/finalizers from {what}");
                changed += 1;
                continue;
            }
            let name = o.metadata.name.as_deref().unwrap_or_default();
            let api: Api<DynamicObject> = match &o.metadata.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
                None => Api::all_with(client.clone(), ar),
            };
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    lien::outln!("removed Lien's label/record/finalizers from {what}");
                    changed += 1;
                }
                Err(kube::Error::Api(e)) if e.code == 409 => conflicts += 1,
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("patching {what}")),
            }
        }
        if conflicts == 0 {
            break;
        }
        if attempt == 5 {
            bail!(
                "{} kept changing while Lien's marks were removed from them: run lien uninstall again",
                ar.plural
            );
        }
    }
    Ok(changed)
}

async fn delete(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    dry_run: bool,
) -> anyhow::Result<()> {
    if dry_run {
        if api.get_opt(name).await?.is_some() {
            lien::outln!("would delete {what}");
        }
        return Ok(());
    }
    match api.delete(name, &DeleteParams::foreground()).await {
        Ok(_) => lien::outln!("deleted {what}"),
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e).with_context(|| format!("deleting {what}")),
    }
    Ok(())
}

/// A line on stderr; a closed stderr is no reason to stop an uninstall halfway.
fn warn(text: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{text}");
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut done: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<String>>>,
{
    let end = tokio::time::Instant::now() + timeout;
    let mut said = false;
    loop {
        // `Some(why)`: not yet.
        let why = match done().await? {
            None => return Ok(()),
            Some(why) => why,
        };
        if !said {
            // Said once, up front: a wait of up to --timeout-seconds must not be silent.
            said = true;
            warn(format_args!("waiting up to {timeout:?} for {what} ({why})"));
        }
        if tokio::time::Instant::now() >= end {
            bail!("timed out after {timeout:?} waiting for {what}: {why}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until nobody leads: the Lease is gone, released (empty holder), or not renewed for
/// its duration while we watch (the judgement every candidate makes, on our own clock). A
/// holder that keeps renewing is a running Lien: the error names it.
async fn lease_free(
    leases: &Api<Lease>,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let end = tokio::time::Instant::now() + timeout;
    let mut last: Option<(String, Option<String>)> = None;
    let mut still = tokio::time::Instant::now();
    loop {
        let Some(lease) = leases
            .get_opt(name)
            .await
            .with_context(|| format!("reading Lease {name}"))?
        else {
            return Ok(());
        };
        let spec = lease.spec.unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        if holder.is_empty() {
            return Ok(());
        }
        let seen = (holder.clone(), lease.metadata.resource_version);
        if last.is_none() {
            // Said once, up front: a wait of up to --timeout-seconds must not be silent.
            warn(format_args!(
                "waiting up to {timeout:?} for Lien replica {holder:?} to stop: it holds the Lease {namespace}/{name} (renewed while it runs); stop it (a `lien run` outside the Deployment?) or wait for its claim to lapse"
            ));
        }
        if last.as_ref() != Some(&seen) {
            last = Some(seen);
            still = tokio::time::Instant::now();
        }
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15),
        );
        if still.elapsed() > duration {
            return Ok(());
        }
        if tokio::time::Instant::now() >= end {
            bail!(
                "Lien replica {holder:?} still holds the Lease {name} after {timeout:?}: stop it (a `lien run` outside the Deployment?), then run lien uninstall again"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn run(args: UninstallArgs) -> anyhow::Result<()> {
    let connected = args.cluster.connect().await?;
    super::cluster::check_reachable(&connected).await?;
    let client = connected.client;
    let timeout = Duration::from_secs(args.timeout_seconds);
    // The objects of the install in `--namespace`, not the default one: a Lien installed with
    // `lien manifests --namespace X` is uninstalled with `lien uninstall --namespace X`.
    let objects = lien::manifests::objects_with(&lien::manifests::Options {
        namespace: args.namespace.clone(),
        ..Default::default()
    });

    // 1. Refuse while something is protected.
    let protecting = protecting(&client).await?;
    if !protecting.is_empty() {
        let list = protecting.join("\n  ");
        if !args.force {
            bail!(
                "{} Lien object(s) still protect something; uninstalling lifts every protection at once:\n  {list}\ndelete them (or their users) first, or run lien uninstall --force",
                protecting.len()
            );
        }
        eprintln!("--force: lifting the protection of\n  {list}");
    }

    // 2. Stop Lien: the Deployment and its pods, then the Lease.
    for o in objects.iter().filter(|o| o["kind"] == "Deployment") {
        let api = api_for(&client, &gvk_of(o), o["metadata"]["namespace"].as_str()).await?;
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        delete(
            &api,
            name,
            &format!("Deployment {}/{name}", args.namespace),
            args.dry_run,
        )
        .await?;
    }
    if !args.dry_run {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &args.namespace);
        let selector = format!("app.kubernetes.io/name={}", lien::manifests::NAME);
        wait_until("Lien's pods to be gone", timeout, || async {
            let left = match pods.list(&ListParams::default().labels(&selector)).await {
                Ok(left) => left.items.len(),
                // An API server without pods (the sandbox) runs none of Lien's.
                Err(kube::Error::Api(e)) if e.code == 404 => 0,
                Err(e) => return Err(e).context("listing Lien's pods"),
            };
            Ok((left > 0).then(|| format!("{left} pod(s) left")))
        })
        .await?;
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), &args.namespace);
    if args.dry_run {
        if let Some(lease) = leases.get_opt(&args.lease).await? {
            let holder = lease
                .spec
                .and_then(|s| s.holder_identity)
                .unwrap_or_default();
            if !holder.is_empty() {
                lien::outln!("would wait for Lien replica {holder:?} to release the Lease");
            }
        }
    } else {
        lease_free(&leases, &args.namespace, &args.lease, timeout).await?;
    }

    // 3. The webhook configurations.
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let api = api_for(
            &client,
            &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
            None,
        )
        .await?;
        delete(
            &api,
            &args.webhook_configuration,
            &format!("{kind} {}", args.webhook_configuration),
            args.dry_run,
        )
        .await?;
    }

    // 4. Lien's label, records and finalizers, wherever they are.
    let mut marked = 0;
    for ar in resources(&client).await? {
        marked += strip_kind(&client, &ar, args.dry_run).await?;
    }
    lien::outln!(
        "{} object(s) {} Lien's label, replay record or finalizers",
        marked,
        if args.dry_run {
            "carry"
        } else {
            "no longer carry"
        }
    );

    if args.keep_installed_objects {
        if !args.dry_run {
            lien::outln!(
                "Lien is stopped and nothing it wrote is left; its installed objects are kept (--keep-installed-objects)"
            );
        }
        return Ok(());
    }

    // 5. Lien's own objects, the namespace last; 6. the CRDs.
    let (crds, rest): (Vec<&Value>, Vec<&Value>) = objects
        .iter()
        .filter(|o| o["kind"] != "Deployment")
        .partition(|o| o["kind"] == "CustomResourceDefinition");
    let (namespaces, rest): (Vec<&Value>, Vec<&Value>) =
        rest.into_iter().partition(|o| o["kind"] == "Namespace");
    for o in rest
        .into_iter()
        .chain(namespaces)
        .chain(crds.iter().copied())
    {
        let namespace = o["metadata"]["namespace"].as_str();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let api = match api_for(&client, &gvk_of(o), namespace).await {
            Ok(api) => api,
            // A kind the cluster does not serve holds nothing of Lien's.
            Err(_) => continue,
        };
        let what = match namespace {
            Some(ns) => format!("{} {ns}/{name}", o["kind"].as_str().unwrap_or_default()),
            None => format!("{} {name}", o["kind"].as_str().unwrap_or_default()),
        };
        delete(&api, name, &what, args.dry_run).await?;
    }
    if !args.dry_run {
        let crd_api = api_for(
            &client,
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            None,
        )
        .await?;
        wait_until("Lien's CRDs to be gone", timeout, || async {
            let mut left = Vec::new();
            for o in &crds {
                let name = o["metadata"]["name"].as_str().unwrap_or_default();
                if crd_api.get_opt(name).await?.is_some() {
                    left.push(name.to_owned());
                }
            }
            Ok((!left.is_empty()).then(|| format!("left: {}", left.join(", "))))
        })
        .await?;
        lien::outln!("Lien is uninstalled");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_in_warn_mode_protects_nothing() {
        let in_use = json!({"type": "InUse", "status": "True"});
        let source = |enforcement: &str| json!({"spec": {"enforcement": enforcement}, "status": {"conditions": [in_use]}});
        assert!(protects(&source("Deny")));
        assert!(!protects(&source("Warn")));
        assert!(
            protects(&json!({"status": {"conditions": [in_use]}})),
            "Deny by default"
        );
        assert!(
            !protects(&json!({"spec": {"enforcement": "Deny"}})),
            "not in use"
        );
    }

    #[test]
    fn only_what_lien_wrote_is_removed() {
        let meta: kube::api::ObjectMeta = serde_json::from_value(json!({
            "name": "x", "resourceVersion": "7",
            "labels": {lien_api::IN_USE_LABEL: "true", "team": "a"},
            "annotations": {RECORD: "sealed", REQUEST: "Background", "note": "keep"},
            "finalizers": ["example.com/keep", lien_api::USAGE_FINALIZER, lien_api::CASCADE_FINALIZER, "z/keep"],
        }))
        .expect("meta");
        assert_eq!(
            strip_patch(&meta),
            Some(json!({"metadata": {
                "labels": {lien_api::IN_USE_LABEL: null},
                "annotations": {RECORD: null, REQUEST: null},
                "finalizers": ["example.com/keep", "z/keep"],
                "resourceVersion": "7",
            }}))
        );
        let foreign: kube::api::ObjectMeta = serde_json::from_value(json!({
            "name": "y", "labels": {"team": "a"}, "finalizers": ["example.com/keep"],
        }))
        .expect("meta");
        assert_eq!(strip_patch(&foreign), None);
    }
}

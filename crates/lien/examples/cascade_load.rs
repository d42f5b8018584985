//! CascadeRule under load (issue 9): N claims, each referencing a cluster-scoped composite that
//! owns M composed resources (`blockOwnerDeletion`, a finalizer an "external API" removes
//! `latency` after their deletion starts), all claims deleted at once with
//! `compositeDeletePolicy: Foreground`. Prints how long the teardown took against the children's
//! own finalization.
//!
//! Run against a cluster (or `lien sandbox --no-lien`) where `lien run` runs, with KUBECONFIG
//! set (see docs/benchmarks.md, "CascadeRule teardown"):
//! `cargo run --release -p lien --example cascade_load -- 1000 9 2000`

#[path = "load/schemaless.rs"]
mod schemaless;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::Mutex;

const GROUP: &str = "bench.example.org";
const NS: &str = "cascade-bench";
const EXTERNAL: &str = "bench.example.org/external";
const CONCURRENCY: usize = 64;

fn ar(kind: &str, plural: &str) -> ApiResource {
    schemaless::resource(GROUP, kind, plural)
}

async fn crd(client: &Client, kind: &str, plural: &str, namespaced: bool) -> anyhow::Result<()> {
    schemaless::crd(client, "cascade-load", GROUP, (kind, plural), namespaced).await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let parents: usize = args.get(1).map_or(Ok(1000), |a| a.parse())?;
    let composed: usize = args.get(2).map_or(Ok(9), |a| a.parse())?;
    let latency = Duration::from_millis(args.get(3).map_or(Ok(2000), |a| a.parse())?);
    let client = Client::try_default().await.context("KUBECONFIG")?;

    crd(&client, "Claim", "claims", true).await?;
    crd(&client, "Composite", "composites", false).await?;
    crd(&client, "Composed", "composeds", false).await?;
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await;
    let rules: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "lien.dev",
            "v1alpha1",
            "CascadeRule",
        )),
    );
    rules
        .patch(
            "bench-claims",
            &PatchParams::apply("cascade-load").force(),
            &Patch::Apply(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "CascadeRule",
                "metadata": {"name": "bench-claims"},
                "spec": {"parent": {"apiVersion": format!("{GROUP}/v1"), "kind": "Claim"},
                         "children": "[self.spec.resourceRef]",
                         "childKinds": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Composite",
                                         "backReference": "self.spec.claimRef"}],
                         "propagationPolicyExpression":
                           "has(self.spec.compositeDeletePolicy) ? self.spec.compositeDeletePolicy : 'Background'"}})),
        )
        .await
        .context("CascadeRule")?;

    let claims: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &ar("Claim", "claims"));
    let composites: Api<DynamicObject> =
        Api::all_with(client.clone(), &ar("Composite", "composites"));
    let composeds: Api<DynamicObject> = Api::all_with(client.clone(), &ar("Composed", "composeds"));

    let t = Instant::now();
    stream::iter(0..parents)
        .map(|i| {
            let (claims, composites, composeds) =
                (claims.clone(), composites.clone(), composeds.clone());
            async move {
                let name = format!("xr-{i}");
                let obj = |v: serde_json::Value| -> anyhow::Result<DynamicObject> {
                    Ok(serde_json::from_value(v)?)
                };
                // The claim first, then its composite, as Crossplane makes them (a composite
                // older than its claim is never deleted through its uid-less claimRef).
                claims
                    .create(
                        &PostParams::default(),
                        &obj(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Claim",
                            "metadata": {"name": format!("claim-{i}"), "namespace": NS},
                            "spec": {"compositeDeletePolicy": "Foreground",
                                     "resourceRef": {"apiVersion": format!("{GROUP}/v1"),
                                                     "kind": "Composite", "name": name}}}))?,
                    )
                    .await?;
                let xr = composites
                    .create(
                        &PostParams::default(),
                        &obj(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Composite",
                            "metadata": {"name": name},
                            "spec": {"claimRef": {"apiVersion": format!("{GROUP}/v1"), "kind": "Claim",
                                                  "name": format!("claim-{i}"), "namespace": NS}}}))?,
                    )
                    .await?;
                for j in 0..composed {
                    composeds
                        .create(
                            &PostParams::default(),
                            &obj(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Composed",
                                "metadata": {"name": format!("{name}-{j}"), "finalizers": [EXTERNAL],
                                    "ownerReferences": [{"apiVersion": format!("{GROUP}/v1"),
                                        "kind": "Composite", "name": name, "uid": xr.uid(),
                                        "controller": true, "blockOwnerDeletion": true}]},
                                "spec": {}}))?,
                        )
                        .await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    println!(
        "created {parents} trees of {} objects in {:?}",
        composed + 2,
        t.elapsed()
    );
    let t = Instant::now();
    loop {
        let list = claims.list(&ListParams::default()).await?;
        let adopted = list
            .items
            .iter()
            .filter(|c| {
                c.finalizers().iter().any(|f| f == "lien.dev/cascade")
                    && c.annotations().contains_key("lien.dev/cascade-children")
            })
            .count();
        if adopted == parents {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "Lien adopted every claim (finalizer + recorded UIDs) in {:?}",
        t.elapsed()
    );

    // The external API: each composed resource's finalizer goes `latency` after its deletion
    // started.
    let last_composed_gone = Arc::new(Mutex::new(None::<Instant>));
    let gone = last_composed_gone.clone();
    // When composed resources start being deleted (first, last).
    let composed_started = Arc::new(Mutex::new((None::<Instant>, None::<Instant>)));
    let started = composed_started.clone();
    // When composites start being deleted (first, last) and the last one goes.
    let composite_times = Arc::new(Mutex::new((
        None::<Instant>,
        None::<Instant>,
        None::<Instant>,
    )));
    let xr_watch = {
        let composites = composites.clone();
        let times = composite_times.clone();
        tokio::spawn(async move {
            let mut seen: HashMap<String, ()> = HashMap::new();
            let stream = watcher::watcher(composites, watcher::Config::default());
            futures::pin_mut!(stream);
            while let Some(Ok(ev)) = stream.next().await {
                match ev {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                        if o.metadata.deletion_timestamp.is_some()
                            && seen.insert(o.name_any(), ()).is_none()
                        {
                            let mut t = times.lock().await;
                            t.0.get_or_insert_with(Instant::now);
                            t.1 = Some(Instant::now());
                        }
                    }
                    watcher::Event::Delete(_) => times.lock().await.2 = Some(Instant::now()),
                    _ => {}
                }
            }
        })
    };
    let external = {
        let composeds = composeds.clone();
        tokio::spawn(async move {
            let mut seen: HashMap<String, ()> = HashMap::new();
            let stream = watcher::watcher(composeds.clone(), watcher::Config::default());
            futures::pin_mut!(stream);
            while let Some(Ok(ev)) = stream.next().await {
                match ev {
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                        if o.metadata.deletion_timestamp.is_some()
                            && seen.insert(o.name_any(), ()).is_none()
                        {
                            {
                                let mut t = started.lock().await;
                                t.0.get_or_insert_with(Instant::now);
                                t.1 = Some(Instant::now());
                            }
                            let api = composeds.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(latency).await;
                                let _ = api
                                    .patch(
                                        &o.name_any(),
                                        &PatchParams::default(),
                                        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                                    )
                                    .await;
                            });
                        }
                    }
                    watcher::Event::Delete(_) => *gone.lock().await = Some(Instant::now()),
                    _ => {}
                }
            }
        })
    };

    let start = Instant::now();
    stream::iter(0..parents)
        .map(|i| {
            let claims = claims.clone();
            async move {
                claims
                    .delete(&format!("claim-{i}"), &DeleteParams::default())
                    .await
                    .map(drop)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    let deletes_sent = start.elapsed();
    loop {
        let left = claims.list(&ListParams::default()).await?.items.len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let total = start.elapsed();
    let last_leaf = last_composed_gone
        .lock()
        .await
        .map(|t| t - start)
        .unwrap_or_default();
    let composites_left = composites.list(&ListParams::default()).await?.items.len();
    let since = |t: Option<Instant>| t.map(|t| t - start).unwrap_or_default();
    let xr = *composite_times.lock().await;
    let leaf = *composed_started.lock().await;
    println!(
        "timeline: composites' deletion started {:?} .. {:?}; composed resources' deletion started {:?} .. {:?}; last composite gone {:?}",
        since(xr.0),
        since(xr.1),
        since(leaf.0),
        since(leaf.1),
        since(xr.2)
    );
    xr_watch.abort();
    println!(
        "parents={parents} tree={} latency={latency:?}: DELETEs sent in {deletes_sent:?}; last composed resource gone at {last_leaf:?}; every claim gone at {total:?} (after the last composed: {:?}); composites left: {composites_left}",
        composed + 1,
        total.saturating_sub(last_leaf)
    );
    external.abort();
    Ok(())
}

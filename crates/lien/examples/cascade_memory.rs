//! CascadeRule memory at its bounds (issue 28, finding 6): N parents whose `children` name K
//! composites each, with names of L characters. Lien keeps at most `MAX_CHILDREN_PER_PARENT`
//! children per parent and `MAX_REFERENCE_BYTES_PER_RULE` of references per rule; this writes
//! parents at and beyond those bounds, waits until Lien has adopted every one (its finalizer)
//! and the rule's status counts them, then deletes them all and waits until they are gone.
//! Lien's peak RSS is measured around it (`scripts/cascade-memory.sh`, docs/benchmarks.md,
//! "CascadeRule memory bounds (issue 28)").
//!
//! `cargo run --release -p lien --example cascade_memory -- 40 20000 20` (the probe's 40
//! parents of 20,000 names), `-- 250 256 253` (past the rule's bound, at the parent's).

#[path = "load/schemaless.rs"]
mod schemaless;

use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::ApiResource;
use kube::{Client, ResourceExt};
use serde_json::json;

const GROUP: &str = "memory.example.org";
const NS: &str = "cascade-memory";
const CONCURRENCY: usize = 16;

fn ar(kind: &str, plural: &str) -> ApiResource {
    schemaless::resource(GROUP, kind, plural)
}

async fn crd(client: &Client, kind: &str, plural: &str, namespaced: bool) -> anyhow::Result<()> {
    schemaless::crd(client, "cascade-memory", GROUP, (kind, plural), namespaced).await
}

/// `k` names of `len` characters, distinct per parent `i`.
fn names(i: usize, k: usize, len: usize) -> Vec<String> {
    (0..k)
        .map(|j| {
            let s = format!("p{i}-c{j}-");
            format!("{s}{}", "x".repeat(len.saturating_sub(s.len())))
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let parents: usize = args.get(1).map_or(Ok(40), |a| a.parse())?;
    let children: usize = args.get(2).map_or(Ok(20_000), |a| a.parse())?;
    let len: usize = args.get(3).map_or(Ok(20), |a| a.parse())?;
    let client = Client::try_default().await.context("KUBECONFIG")?;
    crd(&client, "Claim", "claims", true).await?;
    crd(&client, "Composite", "composites", false).await?;
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await;
    let rules: Api<lien_api::CascadeRule> = Api::all(client.clone());
    rules
        .patch(
            "memory-claims",
            &PatchParams::apply("cascade-memory").force(),
            &Patch::Apply(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "CascadeRule",
                "metadata": {"name": "memory-claims"},
                "spec": {"parent": {"apiVersion": format!("{GROUP}/v1"), "kind": "Claim"},
                         "children": format!("self.spec.refs.map(n, {{'apiVersion': '{GROUP}/v1', 'kind': 'Composite', 'name': n}})"),
                         "childKinds": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Composite",
                                         "backReference": "has(self.spec.claimRef) ? self.spec.claimRef : null"}]}})),
        )
        .await
        .context("CascadeRule")?;
    let claims: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NS, &ar("Claim", "claims"));

    let t = Instant::now();
    let mut written = 0usize;
    for i in 0..parents {
        written += names(i, children, len)
            .iter()
            .map(|n| n.len() + 3)
            .sum::<usize>();
    }
    stream::iter(0..parents)
        .map(|i| {
            let claims = claims.clone();
            async move {
                let claim: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": format!("{GROUP}/v1"), "kind": "Claim",
                    "metadata": {"name": format!("p{i}"), "namespace": NS},
                    "spec": {"refs": names(i, children, len)}}))?;
                claims.create(&PostParams::default(), &claim).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    println!(
        "created {parents} parents of {children} children ({:.1} MiB of names) in {:?}",
        written as f64 / (1 << 20) as f64,
        t.elapsed()
    );
    let t = Instant::now();
    loop {
        let adopted = claims
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|c| c.finalizers().iter().any(|f| f == "lien.dev/cascade"))
            .count();
        let status = rules.get("memory-claims").await?.status.unwrap_or_default();
        if adopted == parents && status.parents == parents as u64 {
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
            println!(
                "Lien adopted every parent in {:?}; the rule: Ready={} {}: {}",
                t.elapsed(),
                ready.map_or("", |c| c.status.as_str()),
                ready.map_or("", |c| c.reason.as_str()),
                ready.map_or("", |c| c.message.as_str()),
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let t = Instant::now();
    stream::iter(0..parents)
        .map(|i| {
            let claims = claims.clone();
            async move {
                claims
                    .delete(&format!("p{i}"), &DeleteParams::default())
                    .await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    loop {
        if claims.list(&ListParams::default()).await?.items.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("every parent deleted and gone in {:?}", t.elapsed());
    Ok(())
}

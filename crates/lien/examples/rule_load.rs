//! One DependencyRule over 1,000 CephBlockPools and 100,000 PersistentVolumes, against a real
//! `lien run` process (issue 8, "Performance"; docs/benchmarks.md "DependencyRule end to end").
//!
//! ```text
//! cargo build --release -p lien --example rule_load --bin lien
//! target/release/lien sandbox --no-lien --port 0 --kubeconfig /tmp/rl.kubeconfig \
//!     --service lien-system/lien-webhook=127.0.0.1:18443 &
//! target/release/examples/rule_load --kubeconfig /tmp/rl.kubeconfig \
//!     --lien target/release/lien --webhook-addr 127.0.0.1:18443
//! ```
//!
//! What it does, in order:
//! 1. creates the CephBlockPool CRD, `--namespaces` namespaces with `--pools` pools between them,
//!    and `--pvs` PersistentVolumes shaped as Rook's RBD CSI driver writes them (about 1.5 KB
//!    of JSON each), spread evenly over every pool but `--spare` (kept free for step 4);
//! 2. creates the rook-ceph pack's PersistentVolume → CephBlockPool rule, read from
//!    `examples/rules/rook-ceph.yaml` (`--rules`), before Lien runs;
//! 3. starts `lien run` under `/usr/bin/time -v` and times the initial sync: until the rule's
//!    `status.relations` equals the number of PVs, and until every used pool carries the in-use
//!    label;
//! 4. protection in force: `--samples` times, creates a PV on a spare pool and times, from the
//!    create returning, until a dry-run DELETE of the pool is refused (409) — then deletes the PV
//!    and times until the pool's DELETE is allowed again;
//! 5. reads Lien's RSS (`VmRSS`, `VmHWM`), stops it with SIGTERM and prints `/usr/bin/time`'s
//!    report.
//!
//! `--reuse` skips steps 1 and 2 against a sandbox an earlier run filled (for iterating on
//! Lien; the published numbers are from a fresh sandbox).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

#[path = "load/mod.rs"]
mod load;
#[path = "load/measure.rs"]
mod measure;

use load::{Error, create_all, resource};
use measure::{child_of, dry_delete, percentile, rss};

struct Args {
    kubeconfig: PathBuf,
    lien: PathBuf,
    webhook_addr: String,
    rules: PathBuf,
    namespaces: usize,
    pools: usize,
    spare: usize,
    pvs: usize,
    samples: usize,
    concurrency: usize,
    /// Skip steps 1 and 2: the objects and the rule exist from an earlier run against the same
    /// sandbox (for iterating; a fresh sandbox is what the published numbers use).
    reuse: bool,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        kubeconfig: PathBuf::from("/tmp/rl.kubeconfig"),
        lien: PathBuf::from("target/release/lien"),
        webhook_addr: "127.0.0.1:18443".into(),
        rules: PathBuf::from("examples/rules/rook-ceph.yaml"),
        namespaces: 10,
        pools: 1000,
        spare: 20,
        pvs: 100_000,
        samples: 100,
        concurrency: 32,
        reuse: false,
    };
    load::flags(|flag, value| {
        match flag {
            "--kubeconfig" => a.kubeconfig = value()?.into(),
            "--lien" => a.lien = value()?.into(),
            "--webhook-addr" => a.webhook_addr = value()?,
            "--rules" => a.rules = value()?.into(),
            "--namespaces" => a.namespaces = value()?.parse()?,
            "--pools" => a.pools = value()?.parse()?,
            "--spare" => a.spare = value()?.parse()?,
            "--pvs" => a.pvs = value()?.parse()?,
            "--samples" => a.samples = value()?.parse()?,
            "--concurrency" => a.concurrency = value()?.parse()?,
            "--reuse" => a.reuse = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if a.spare >= a.pools {
        return Err("--spare must be smaller than --pools".into());
    }
    Ok(a)
}

fn pool_resource() -> ApiResource {
    resource("ceph.rook.io", "v1", "CephBlockPool", "cephblockpools")
}

fn pv_resource() -> ApiResource {
    resource("", "v1", "PersistentVolume", "persistentvolumes")
}

fn rule_resource() -> ApiResource {
    resource("lien.dev", "v1alpha1", "DependencyRule", "dependencyrules")
}

fn namespace_of(pool: usize, namespaces: usize) -> String {
    format!("rook-{}", pool % namespaces)
}

/// A PersistentVolume as Rook's RBD CSI provisioner writes it (about 1.5 KB of JSON).
fn pv(name: &str, namespace: &str, pool: &str) -> Value {
    let uid = uuid(name);
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "annotations": {"pv.kubernetes.io/provisioned-by": "rook-ceph.rbd.csi.ceph.com",
                            "volume.kubernetes.io/provisioner-deletion-secret-name": "rook-csi-rbd-provisioner",
                            "volume.kubernetes.io/provisioner-deletion-secret-namespace": namespace},
            "finalizers": ["kubernetes.io/pv-protection"],
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": format!("data-{name}"),
                         "namespace": "apps", "resourceVersion": "123456", "uid": uid},
            "csi": {
                "driver": "rook-ceph.rbd.csi.ceph.com",
                "fsType": "ext4",
                "volumeHandle": format!("0001-0009-{namespace}-0000000000000002-{uid}"),
                "volumeAttributes": {
                    "clusterID": namespace,
                    "imageFeatures": "layering",
                    "imageFormat": "2",
                    "imageName": format!("csi-vol-{uid}"),
                    "journalPool": pool,
                    "pool": pool,
                    "storage.kubernetes.io/csiProvisionerIdentity": "1700000000000-8081-rook-ceph.rbd.csi.ceph.com",
                },
                "controllerExpandSecretRef": {"name": "rook-csi-rbd-provisioner", "namespace": namespace},
                "nodeStageSecretRef": {"name": "rook-csi-rbd-node", "namespace": namespace},
            },
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "rook-ceph-block",
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound"},
    })
}

/// A stable UUID-shaped string for a name (the claim's UID in the fixture).
fn uuid(name: &str) -> String {
    let mut h: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in name.bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000000001000000000000000000013B);
    }
    let hex = format!("{h:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// The rook-ceph pack's PersistentVolume → CephBlockPool rule.
fn pack_rule(path: &PathBuf) -> Result<Value, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc)?;
        if v["kind"] == "DependencyRule"
            && v["spec"]["of"]["kind"] == "CephBlockPool"
            && v["spec"]["by"]["kind"] == "PersistentVolume"
        {
            return Ok(v);
        }
    }
    Err(format!(
        "{}: no DependencyRule of CephBlockPool by PersistentVolume",
        path.display()
    )
    .into())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut check: F) -> Result<Duration, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, Error>>,
{
    let start = Instant::now();
    loop {
        if check().await? {
            return Ok(start.elapsed());
        }
        if start.elapsed() > deadline {
            return Err(format!("{what}: not within {deadline:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Steps 1 and 2: the CRD, namespaces, pools and PVs, then `rule` (named `rule_name`).
async fn create_objects(
    client: &Client,
    a: &Args,
    rule: Value,
    rule_name: &str,
) -> Result<(), Error> {
    // 1. The CRD, namespaces, pools and PVs.
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    crds.create(&PostParams::default(), &serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "cephblockpools.ceph.rook.io"},
        "spec": {"group": "ceph.rook.io", "scope": "Namespaced",
                 "names": {"plural": "cephblockpools", "singular": "cephblockpool", "kind": "CephBlockPool", "listKind": "CephBlockPoolList"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))?).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("", "v1", "Namespace", "namespaces"),
    );
    let ns_objects = (0..a.namespaces)
        .map(|i| format!("rook-{i}"))
        .chain(["lien-system".to_string()])
        .map(|n| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}))
        .collect();
    create_all(&namespaces, ns_objects, a.concurrency).await?;
    let started = Instant::now();
    for ns in 0..a.namespaces {
        let api = Api::namespaced_with(client.clone(), &format!("rook-{ns}"), &pool_resource());
        let pools = (0..a.pools)
            .filter(|p| p % a.namespaces == ns)
            .map(|p| json!({"apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool",
                            "metadata": {"name": format!("pool-{p}"), "namespace": format!("rook-{ns}")},
                            "spec": {"replicated": {"size": 3}, "failureDomain": "host"}}))
            .collect();
        create_all(&api, pools, a.concurrency).await?;
    }
    let used = a.pools - a.spare;
    let pvs_api: Api<DynamicObject> = Api::all_with(client.clone(), &pv_resource());
    let pvs: Vec<Value> = (0..a.pvs)
        .map(|i| {
            let pool = i % used;
            pv(
                &format!("pvc-{}", uuid(&i.to_string())),
                &namespace_of(pool, a.namespaces),
                &format!("pool-{pool}"),
            )
        })
        .collect();
    let pv_bytes = serde_json::to_vec(&pvs[0])?.len();
    create_all(&pvs_api, pvs, a.concurrency).await?;
    println!(
        "created {} pools in {} namespaces and {} PVs ({} bytes of JSON each) in {:.1} s",
        a.pools,
        a.namespaces,
        a.pvs,
        pv_bytes,
        started.elapsed().as_secs_f64()
    );

    // 2. The rule, before Lien runs.
    let rules: Api<DynamicObject> = Api::all_with(client.clone(), &rule_resource());
    // The CRDs are installed by `lien run --install-crds`; install them now so the rule exists
    // before Lien starts.
    for crd in lien_api::crds() {
        let mut value = serde_json::to_value(&crd)?;
        value["apiVersion"] = json!("apiextensions.k8s.io/v1");
        value["kind"] = json!("CustomResourceDefinition");
        crds.create(&PostParams::default(), &serde_json::from_value(value)?)
            .await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    rules
        .create(&PostParams::default(), &serde_json::from_value(rule)?)
        .await?;
    println!("rule {rule_name} created");

    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let a = args()?;
    let client = load::client(&a.kubeconfig).await?;

    let used = a.pools - a.spare;
    let pvs_api: Api<DynamicObject> = Api::all_with(client.clone(), &pv_resource());
    let rules: Api<DynamicObject> = Api::all_with(client.clone(), &rule_resource());
    let rule = pack_rule(&a.rules)?;
    let rule_name = rule["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if !a.reuse {
        create_objects(&client, &a, rule, &rule_name).await?;
    }

    // 3. Lien, and the initial sync.
    let lien = tokio::process::Command::new("/usr/bin/time")
        .arg("-v")
        .arg(&a.lien)
        .args([
            "run",
            "--webhook-addr",
            &a.webhook_addr,
            "--no-leader-election",
        ])
        .env("KUBECONFIG", &a.kubeconfig)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let t0 = Instant::now();
    let time_pid = lien.id().ok_or("no pid")?;
    let expected = a.pvs as u64;
    let mut relations_at = None;
    let mut labelled_at = None;
    let pool_all: Api<DynamicObject> = Api::all_with(client.clone(), &pool_resource());
    while relations_at.is_none() || labelled_at.is_none() {
        if t0.elapsed() > Duration::from_secs(600) {
            return Err("initial sync: not within 600 s".into());
        }
        if relations_at.is_none() {
            let r = rules.get(&rule_name).await?;
            if r.data["status"]["relations"].as_u64() == Some(expected) {
                relations_at = Some(t0.elapsed());
            }
        }
        if labelled_at.is_none() {
            let n = pool_all
                .list_metadata(&ListParams::default().labels("lien.dev/in-use=true"))
                .await?
                .items
                .len();
            if n == used {
                labelled_at = Some(t0.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lien_pid = child_of(time_pid).ok_or("lien's pid")?;
    let after_sync = rss(lien_pid);
    println!(
        "initial sync: status.relations = {expected} after {:.2} s, all {used} used pools labelled after {:.2} s; RSS after sync (VmRSS, VmHWM) = {:?} KiB",
        relations_at.unwrap_or_default().as_secs_f64(),
        labelled_at.unwrap_or_default().as_secs_f64(),
        after_sync
    );

    // 4. Protection in force after a PV is created, and released after it is deleted.
    let mut protect = Vec::new();
    let mut release = Vec::new();
    let unconfirmed = std::cell::Cell::new(0usize);
    for i in 0..a.samples {
        let pool = used + i % a.spare;
        let ns = namespace_of(pool, a.namespaces);
        let pool_name = format!("pool-{pool}");
        let pools: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &pool_resource());
        let name = format!("probe-{i}");
        let mut object = pv(&name, &ns, &pool_name);
        // No pv-protection finalizer: nothing here plays the PV controller that removes it.
        object["metadata"]["finalizers"] = json!([]);
        pvs_api
            .create(&PostParams::default(), &serde_json::from_value(object)?)
            .await?;
        protect.push(
            wait_until("protection", Duration::from_secs(30), || async {
                Ok(dry_delete(&pools, &pool_name).await? == 409)
            })
            .await?,
        );
        pvs_api.delete(&name, &DeleteParams::default()).await?;
        release.push(
            wait_until("release", Duration::from_secs(30), || async {
                let code = dry_delete(&pools, &pool_name).await?;
                unconfirmed.set(unconfirmed.get() + usize::from(code == 500));
                Ok(code == 200)
            })
            .await?,
        );
    }
    protect.sort();
    release.sort();
    println!(
        "protection in force after a PV create ({} samples): p50 {} p99 {} max {}",
        protect.len(),
        ms(percentile(&protect, 0.50)),
        ms(percentile(&protect, 0.99)),
        ms(percentile(&protect, 1.0))
    );
    println!(
        "released after the PV's delete: p50 {} p99 {} max {}; answered 500 (unconfirmed stale label) {} times",
        ms(percentile(&release, 0.50)),
        ms(percentile(&release, 0.99)),
        ms(percentile(&release, 1.0)),
        unconfirmed.get()
    );

    // 5. Memory, then stop.
    println!(
        "lien RSS at the end (VmRSS, VmHWM): {:?} KiB",
        rss(lien_pid)
    );
    std::process::Command::new("kill")
        .args(["-TERM", &lien_pid.to_string()])
        .status()?;
    let out = lien.wait_with_output().await?;
    let report = String::from_utf8_lossy(&out.stderr);
    for line in report.lines().filter(|l| {
        l.contains("Maximum resident")
            || l.contains("Elapsed")
            || l.contains("User time")
            || l.contains("System time")
    }) {
        println!("/usr/bin/time: {}", line.trim());
    }
    Ok(())
}

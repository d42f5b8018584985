//! The rule packs of `examples/rules/`, applied as shipped (read from the repository at test
//! time) to a sandbox running Lien: every relation of the Rook-Ceph pack is held, released when
//! its dependent goes (a refused DELETE replayed) and moved by updates; seed 002's bundle is
//! deleted with one real `kubectl delete -f`, in the worst order, and converges in the seed's
//! order; the core pack protects what a Deployment, a Pod, a StatefulSet, a DaemonSet, a Job
//! and a CronJob reference.
//!
//! The packs' rules, Rook's CRDs and seed 002's objects have fixed names, so each test runs in a
//! sandbox of its own; against `LIEN_E2E_KUBECONFIG` (one shared cluster, without Rook) run them
//! one at a time (`--test-threads 1`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::harness::*;

/// A file of the repository.
pub(crate) fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

/// Every document of a YAML file of the repository, as JSON.
pub(crate) fn load(rel: &str) -> Vec<Value> {
    let path = repo_file(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Applies every document of a pack; returns the names of its DependencyRules.
async fn apply_pack(env: &mut Env, rel: &str) -> Vec<String> {
    let mut rules = vec![];
    for doc in load(rel) {
        if doc["kind"] == "DependencyRule" {
            rules.push(doc["metadata"]["name"].as_str().expect("a name").to_owned());
        }
        env.create(doc).await;
    }
    rules
}

/// The API of `object`'s kind, in its namespace if it has one.
fn api_of(env: &Env, object: &Value) -> Api<DynamicObject> {
    let ar = api_resource(object);
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(env.client.clone(), ns, &ar),
        None => Api::all_with(env.client.clone(), &ar),
    }
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().expect("a name")
}

/// How a denial names `object`: `group/Kind ns/name`, `Kind name` in the core group.
fn described(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let kind = match api_version.rsplit_once('/') {
        Some((group, _)) => format!("{group}/{kind}"),
        None => kind.to_owned(),
    };
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{}", name_of(object)),
        None => format!("{kind} {}", name_of(object)),
    }
}

/// A minimal CRD serving `kind` (v1) with free-form `spec`, as `api_resource` names its plural.
fn crd(api_version: &str, kind: &str, namespaced: bool) -> Value {
    let ar = api_resource(&json!({"apiVersion": api_version, "kind": kind}));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{}", ar.plural, ar.group)},
        "spec": {
            "group": ar.group,
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "names": {"plural": ar.plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": ar.version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}
            }]
        }
    })
}

const ROOK: &str = "ceph.rook.io/v1";

/// The Rook kinds the pack names (all namespaced).
const ROOK_KINDS: &[&str] = &[
    "CephCluster",
    "CephBlockPool",
    "CephFilesystem",
    "CephObjectStore",
    "CephObjectStoreUser",
    "CephNFS",
    "CephClient",
    "CephRBDMirror",
    "CephFilesystemMirror",
    "CephObjectRealm",
    "CephObjectZoneGroup",
    "CephObjectZone",
];

/// Installs Rook's kinds and ObjectBucket (cluster-scoped), and waits until they are served.
async fn install_rook(env: &mut Env) {
    let mut kinds: Vec<(&str, &str, bool)> = ROOK_KINDS.iter().map(|k| (ROOK, *k, true)).collect();
    kinds.push(("objectbucket.io/v1alpha1", "ObjectBucket", false));
    for (api_version, kind, namespaced) in &kinds {
        env.create(crd(api_version, kind, *namespaced)).await;
    }
    for (api_version, kind, _) in kinds {
        let ar = api_resource(&json!({"apiVersion": api_version, "kind": kind}));
        let api: Api<DynamicObject> = Api::all_with(env.client.clone(), &ar);
        wait_for(&format!("{kind} to be served"), DEADLINE, || async {
            api.list(&Default::default()).await.ok().map(drop)
        })
        .await;
    }
}

fn rook(kind: &str, ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": ROOK, "kind": kind,
           "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// A PersistentVolume provisioned by Rook's CSI driver `driver` with `attributes`.
fn pv(name: &str, driver: &str, attributes: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
    "metadata": {"name": name},
    "spec": {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Delete",
        "csi": {"driver": driver, "volumeHandle": format!("0001-0009-{name}"),
                "volumeAttributes": attributes}
    }})
}

/// One relation of a pack: `rule` makes `dependent` use `provider`.
struct Relation {
    rule: &'static str,
    provider: Value,
    dependent: Value,
}

/// Every relation of the Rook pack, each in namespace `ns(i)` of its own (no relation reaches
/// into another one's namespace); PVs and ObjectBuckets (cluster-scoped) are named `cluster(s)`.
fn rook_relations(ns: &dyn Fn(usize) -> String, cluster: &dyn Fn(&str) -> String) -> Vec<Relation> {
    let mut out = vec![];
    let mut add = |rule: &'static str,
                   provider: &dyn Fn(&str) -> Value,
                   dependent: &dyn Fn(&str) -> Value| {
        let n = ns(out.len());
        out.push(Relation {
            rule,
            provider: provider(&n),
            dependent: dependent(&n),
        });
    };
    // 1. CephCluster <- every other Rook kind of its namespace (no keys).
    let cluster_users: &[(&'static str, &str)] = &[
        ("rook-cephcluster-used-by-blockpool", "CephBlockPool"),
        ("rook-cephcluster-used-by-filesystem", "CephFilesystem"),
        ("rook-cephcluster-used-by-objectstore", "CephObjectStore"),
        (
            "rook-cephcluster-used-by-objectstoreuser",
            "CephObjectStoreUser",
        ),
        ("rook-cephcluster-used-by-nfs", "CephNFS"),
        ("rook-cephcluster-used-by-client", "CephClient"),
        ("rook-cephcluster-used-by-rbdmirror", "CephRBDMirror"),
        (
            "rook-cephcluster-used-by-filesystemmirror",
            "CephFilesystemMirror",
        ),
        ("rook-cephcluster-used-by-objectrealm", "CephObjectRealm"),
        (
            "rook-cephcluster-used-by-objectzonegroup",
            "CephObjectZoneGroup",
        ),
        ("rook-cephcluster-used-by-objectzone", "CephObjectZone"),
    ];
    for (rule, kind) in cluster_users {
        add(
            rule,
            &|ns| {
                rook(
                    "CephCluster",
                    ns,
                    "rook-ceph",
                    json!({"dataDirHostPath": "/var/lib/rook"}),
                )
            },
            &|ns| rook(kind, ns, "user", json!({})),
        );
    }
    // 2. Pools <- CephNFS (spec.rados.pool) and CephClient (`pool=` in a cap).
    let nfs = |ns: &str, pool: &str| {
        rook(
            "CephNFS",
            ns,
            "nfs",
            json!({"rados": {"pool": pool, "namespace": "nfs-ns"}, "server": {"active": 1}}),
        )
    };
    let client = |ns: &str, caps: Value| rook("CephClient", ns, "client", json!({"caps": caps}));
    // A CephBlockPool's pool is spec.name when set.
    add(
        "rook-blockpool-used-by-nfs",
        &|ns| {
            rook(
                "CephBlockPool",
                ns,
                "builtin-nfs",
                json!({"name": ".nfs", "replicated": {"size": 3}}),
            )
        },
        &|ns| nfs(ns, ".nfs"),
    );
    add(
        "rook-blockpool-used-by-client",
        &|ns| {
            rook(
                "CephBlockPool",
                ns,
                "replicapool",
                json!({"replicated": {"size": 3}}),
            )
        },
        &|ns| {
            client(
                ns,
                json!({"mon": "profile rbd", "osd": "profile rbd pool=replicapool"}),
            )
        },
    );
    // A CephFilesystem's pools: <fs>-metadata, <fs>-<dataPool name> or <fs>-data<i>.
    let fs = |ns: &str| {
        rook(
            "CephFilesystem",
            ns,
            "myfs",
            json!({
                "metadataPool": {"replicated": {"size": 3}},
                "dataPools": [{"name": "replicated", "replicated": {"size": 3}}, {"replicated": {"size": 2}}]
            }),
        )
    };
    add("rook-filesystem-used-by-nfs", &fs, &|ns| {
        nfs(ns, "myfs-replicated")
    });
    add("rook-filesystem-used-by-client", &fs, &|ns| {
        client(
            ns,
            json!({"mds": "allow rw", "osd": "allow rw tag cephfs pool=myfs-data1"}),
        )
    });
    // A CephObjectStore's (and CephObjectZone's) pools: <name>.rgw.*.
    let store = |ns: &str| {
        rook(
            "CephObjectStore",
            ns,
            "my-store",
            json!({"gateway": {"port": 80}}),
        )
    };
    add("rook-objectstore-used-by-nfs", &store, &|ns| {
        nfs(ns, "my-store.rgw.meta")
    });
    add("rook-objectstore-used-by-client", &store, &|ns| {
        client(
            ns,
            json!({"osd": "allow rwx pool=my-store.rgw.buckets.data"}),
        )
    });
    let zone = |ns: &str| {
        rook(
            "CephObjectZone",
            ns,
            "zone-a",
            json!({"zoneGroup": "zonegroup-a"}),
        )
    };
    add("rook-objectzone-used-by-nfs", &zone, &|ns| {
        nfs(ns, "zone-a.rgw.log")
    });
    add("rook-objectzone-used-by-client", &zone, &|ns| {
        client(ns, json!({"osd": "allow rw pool=zone-a.rgw.control"}))
    });
    // 3. PersistentVolumes of Rook's CSI drivers: clusterID is the provider's namespace.
    add(
        "rook-blockpool-used-by-pv",
        &|ns| {
            rook(
                "CephBlockPool",
                ns,
                "replicapool",
                json!({"replicated": {"size": 3}}),
            )
        },
        &|ns| {
            pv(
                &cluster("rbd"),
                "rook-ceph.rbd.csi.ceph.com",
                json!({
                    "clusterID": ns, "pool": "replicapool", "imageFeatures": "layering",
                    "imageName": "csi-vol-1"
                }),
            )
        },
    );
    add(
        "rook-filesystem-used-by-pv",
        &|ns| {
            rook(
                "CephFilesystem",
                ns,
                "myfs",
                json!({"dataPools": [{"name": "replicated"}]}),
            )
        },
        &|ns| {
            pv(
                &cluster("cephfs"),
                "rook-ceph.cephfs.csi.ceph.com",
                json!({
                    "clusterID": ns, "fsName": "myfs", "pool": "myfs-replicated",
                    "subvolumeName": "csi-vol-2"
                }),
            )
        },
    );
    // 4. Object store users and buckets.
    add("rook-objectstore-used-by-objectstoreuser", &store, &|ns| {
        rook(
            "CephObjectStoreUser",
            ns,
            "my-user",
            json!({"store": "my-store", "displayName": "me"}),
        )
    });
    add("rook-objectstore-used-by-objectbucket", &store, &|ns| {
        json!({"apiVersion": "objectbucket.io/v1alpha1", "kind": "ObjectBucket",
            "metadata": {"name": cluster("obc")},
            "spec": {"endpoint": {"bucketHost": format!("rook-ceph-rgw-my-store.{ns}.svc"),
                                  "bucketPort": 80, "bucketName": "ceph-bkt-1"}}})
    });
    // 5. Mirror daemons <- what has mirroring enabled.
    add(
        "rook-rbdmirror-used-by-blockpool",
        &|ns| rook("CephRBDMirror", ns, "my-rbd-mirror", json!({"count": 1})),
        &|ns| {
            rook(
                "CephBlockPool",
                ns,
                "mirrored",
                json!({"mirroring": {"enabled": true, "mode": "image"}}),
            )
        },
    );
    add(
        "rook-filesystemmirror-used-by-filesystem",
        &|ns| rook("CephFilesystemMirror", ns, "my-fs-mirror", json!({})),
        &|ns| {
            rook(
                "CephFilesystem",
                ns,
                "mirrored-fs",
                json!({"mirroring": {"enabled": true}}),
            )
        },
    );
    // 6. Multi-site: realm <- zone group <- zone <- store.
    add(
        "rook-objectrealm-used-by-objectzonegroup",
        &|ns| rook("CephObjectRealm", ns, "realm-a", json!({})),
        &|ns| {
            rook(
                "CephObjectZoneGroup",
                ns,
                "zonegroup-a",
                json!({"realm": "realm-a"}),
            )
        },
    );
    add(
        "rook-objectzonegroup-used-by-objectzone",
        &|ns| {
            rook(
                "CephObjectZoneGroup",
                ns,
                "zonegroup-a",
                json!({"realm": "realm-a"}),
            )
        },
        &|ns| {
            rook(
                "CephObjectZone",
                ns,
                "zone-a",
                json!({"zoneGroup": "zonegroup-a"}),
            )
        },
    );
    add("rook-objectzone-used-by-objectstore", &zone, &|ns| {
        rook(
            "CephObjectStore",
            ns,
            "zone-store",
            json!({"zone": {"name": "zone-a"}}),
        )
    });
    out
}

/// Waits until a (dry-run) DELETE of `provider` is refused naming `dependent` and `rule`;
/// returns the message.
async fn wait_held(env: &Env, provider: &Value, dependent: &Value, rule: &str) -> String {
    let needle = format!(
        "in use by {} (DependencyRule {rule}: ",
        described(dependent)
    );
    let what = format!("held by {} ({rule})", described(dependent));
    wait_refused_where(&api_of(env, provider), name_of(provider), &what, |m| {
        m.contains(&needle)
    })
    .await
}

/// Waits until a (dry-run) DELETE of `object` is allowed.
async fn wait_free(env: &Env, object: &Value) {
    let api = api_of(env, object);
    let name = name_of(object);
    wait_for(
        &format!("{} to be free", described(object)),
        DEADLINE,
        || async {
            api.delete(name, &DeleteParams::default().dry_run())
                .await
                .ok()
                .map(drop)
        },
    )
    .await;
}

async fn wait_object_gone(env: &Env, object: &Value) {
    let api = api_of(env, object);
    let name = name_of(object);
    wait_for(
        &format!("{} to be gone", described(object)),
        DEADLINE,
        || async { gone(&api.get_opt(name).await).then_some(()) },
    )
    .await;
}

/// A (real) DELETE of `object` is refused with 409; with replay on, it is recorded.
async fn delete_refused(env: &Env, object: &Value, why: &str) {
    let err = api_of(env, object)
        .delete(name_of(object), &DeleteParams::default())
        .await
        .expect_err("in use");
    let (code, message) = api_error(err);
    assert_eq!(code, 409, "{why}: {message}");
}

/// Held: a DELETE of the provider is refused (409) naming the dependent and the rule. Released:
/// once the dependent is deleted, the refused DELETE is replayed and the provider goes.
async fn held_then_replayed(env: &Env, relation: &Relation) {
    let Relation {
        rule,
        provider,
        dependent,
    } = relation;
    let message = wait_held(env, provider, dependent, rule).await;
    assert!(
        message.contains(&format!("cannot delete {}: ", described(provider))),
        "{message}"
    );
    delete_refused(env, provider, rule).await;
    api_of(env, dependent)
        .delete(name_of(dependent), &DeleteParams::default())
        .await
        .unwrap_or_else(|e| panic!("{rule}: the dependent deletes: {e}"));
    wait_object_gone(env, provider).await;
}

/// Every relation of the pack (`rook_relations`), each in a namespace of its own named after
/// `tag` and its place; cluster-scoped dependents named after the scenario's namespace.
fn rook_relations_of(env: &Env, tag: &str) -> Vec<Relation> {
    let prefix = env.ns.clone();
    rook_relations(
        &|i| env.another_namespace_name(&format!("{tag}{i}")),
        &|s| format!("{prefix}-{s}"),
    )
}

/// Creates `relation`'s namespace, provider and dependent.
async fn create_relation(env: &mut Env, relation: &Relation) {
    let ns = relation.provider["metadata"]["namespace"]
        .as_str()
        .expect("Rook providers are namespaced");
    env.namespace(ns).await;
    env.create(relation.provider.clone()).await;
    env.create(relation.dependent.clone()).await;
}

/// A sandbox serving Rook's kinds, with the Rook pack applied.
async fn rook_env(name: &str) -> Env {
    let mut env = Env::start(name).await;
    install_rook(&mut env).await;
    let rules = apply_pack(&mut env, "examples/rules/rook-ceph.yaml").await;
    assert_eq!(rules.len(), 28, "the Rook pack's rules");
    env
}

#[tokio::test]
async fn every_relation_of_the_rook_pack_is_held_and_released_by_replay() {
    let mut env = rook_env("packs-rook").await;
    let relations = rook_relations_of(&env, "r");
    // Every rule of the pack is covered by exactly one relation here.
    let mut covered: Vec<&str> = relations.iter().map(|r| r.rule).collect();
    covered.sort_unstable();
    let mut rules: Vec<String> = load("examples/rules/rook-ceph.yaml")
        .iter()
        .filter(|d| d["kind"] == "DependencyRule")
        .map(|d| name_of(d).to_owned())
        .collect();
    rules.sort_unstable();
    assert_eq!(covered, rules, "one relation per rule of the pack");
    for r in &relations {
        create_relation(&mut env, r).await;
    }
    // Each rule derives exactly its one relation here: nothing more (no rule reaches into
    // another relation's namespace, nor matches what it should not).
    let rules_api: Api<lien_api::DependencyRule> = Api::all(env.client.clone());
    join_all(relations.iter().map(|r| {
        let api = &rules_api;
        async move {
            let what = format!("{}: Ready with exactly 1 relation", r.rule);
            wait_for(&what, DEADLINE, || async {
                let status = api.get(r.rule).await.ok()?.status?;
                let ready = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                (ready && status.relations == 1 && status.evaluation_errors == 0).then_some(())
            })
            .await
        }
    }))
    .await;
    join_all(relations.iter().map(|r| held_then_replayed(&env, r))).await;
    env.finish().await;
}

#[tokio::test]
async fn a_rook_cluster_names_every_dependent_of_its_namespace_and_goes_after_the_last() {
    let mut env = rook_env("packs-rook-cluster").await;
    let ns = env.ns.clone();
    let cluster = rook("CephCluster", &ns, "rook-ceph", json!({}));
    env.create(cluster.clone()).await;
    // A CephCluster of another namespace holds none of these.
    let other_ns = env.another_namespace_name("other");
    env.namespace(&other_ns).await;
    let other = rook("CephCluster", &other_ns, "rook-ceph", json!({}));
    env.create(other.clone()).await;
    let users: Vec<Value> = ["CephBlockPool", "CephNFS", "CephObjectRealm"]
        .iter()
        .map(|k| rook(k, &ns, "user", json!({})))
        .collect();
    for u in &users {
        env.create(u.clone()).await;
    }
    let message = wait_held(
        &env,
        &cluster,
        &users[2],
        "rook-cephcluster-used-by-objectrealm",
    )
    .await;
    for u in &users {
        assert!(message.contains(&described(u)), "{message}");
    }
    assert!(message.contains("it is in use by 3 objects."), "{message}");
    wait_free(&env, &other).await;
    delete_refused(&env, &cluster, "the cluster").await;
    // Each dependent released on its own; the cluster goes after the last one.
    for (i, u) in users.iter().enumerate() {
        api_of(&env, u)
            .delete("user", &DeleteParams::default())
            .await
            .expect("a dependent deletes");
        if let Some(next) = users.get(i + 1) {
            let gone = described(u);
            let what = format!("released by {gone}");
            let rest = wait_refused_where(&api_of(&env, &cluster), "rook-ceph", &what, |m| {
                !m.contains(&gone)
            })
            .await;
            assert!(rest.contains(&described(next)), "{rest}");
        }
    }
    wait_object_gone(&env, &cluster).await;
    env.finish().await;
}

/// Which side of a relation an update changes.
#[derive(Clone, Copy)]
enum Side {
    Provider,
    Dependent,
}

/// How an update moves one relation of the pack: `patch` (a merge patch) is applied to `side`;
/// afterwards `to` (another provider, created beside the first) is held instead, or, with no
/// `to`, nothing holds the provider any more.
struct Move {
    side: Side,
    patch: Value,
    to: Option<Value>,
}

/// The update that moves `relation`, keyed by its rule. `None` where no update can move it:
/// a rule without keys relates every object of a namespace (an object cannot change namespace),
/// and a CephFS PersistentVolume is matched by `fsName`, which, like every field of a PV's
/// volume source, Kubernetes does not let change after creation.
fn move_of(relation: &Relation) -> Option<Move> {
    let ns = relation.provider["metadata"]["namespace"]
        .as_str()
        .expect("Rook providers are namespaced")
        .to_owned();
    let dependent = |patch: Value, to: Value| {
        Some(Move {
            side: Side::Dependent,
            patch,
            to: Some(to),
        })
    };
    let released_by = |side: Side, patch: Value| {
        Some(Move {
            side,
            patch,
            to: None,
        })
    };
    let pool = || rook("CephBlockPool", &ns, "other-pool", json!({}));
    let fs = || {
        rook(
            "CephFilesystem",
            &ns,
            "otherfs",
            json!({"dataPools": [{"name": "replicated"}]}),
        )
    };
    let store = || rook("CephObjectStore", &ns, "other-store", json!({}));
    let zone = || {
        rook(
            "CephObjectZone",
            &ns,
            "zone-b",
            json!({"zoneGroup": "zonegroup-a"}),
        )
    };
    let nfs_pool = |pool: &str| json!({"spec": {"rados": {"pool": pool}}});
    let osd_cap = |cap: &str| json!({"spec": {"caps": {"osd": cap}}});
    match relation.rule {
        "rook-blockpool-used-by-nfs" => dependent(nfs_pool("other-pool"), pool()),
        "rook-blockpool-used-by-client" => {
            dependent(osd_cap("profile rbd pool=other-pool"), pool())
        }
        "rook-filesystem-used-by-nfs" => dependent(nfs_pool("otherfs-replicated"), fs()),
        // The provider's side: the data pool the client names is removed from the filesystem.
        "rook-filesystem-used-by-client" => released_by(
            Side::Provider,
            json!({"spec": {"dataPools": [{"name": "replicated", "replicated": {"size": 3}}]}}),
        ),
        "rook-objectstore-used-by-nfs" => dependent(nfs_pool("other-store.rgw.meta"), store()),
        "rook-objectstore-used-by-client" => dependent(
            osd_cap("allow rwx pool=other-store.rgw.buckets.data"),
            store(),
        ),
        "rook-objectzone-used-by-nfs" => dependent(nfs_pool("zone-b.rgw.log"), zone()),
        "rook-objectzone-used-by-client" => {
            dependent(osd_cap("allow rw pool=zone-b.rgw.control"), zone())
        }
        // The provider's side: the pool is renamed (`spec.name`); the PV's pool is not its own.
        "rook-blockpool-used-by-pv" => {
            released_by(Side::Provider, json!({"spec": {"name": "renamed-pool"}}))
        }
        "rook-objectstore-used-by-objectstoreuser" => {
            dependent(json!({"spec": {"store": "other-store"}}), store())
        }
        "rook-objectstore-used-by-objectbucket" => dependent(
            json!({"spec": {"endpoint": {
                "bucketHost": format!("rook-ceph-rgw-other-store.{ns}.svc")}}}),
            store(),
        ),
        "rook-rbdmirror-used-by-blockpool" | "rook-filesystemmirror-used-by-filesystem" => {
            released_by(
                Side::Dependent,
                json!({"spec": {"mirroring": {"enabled": false}}}),
            )
        }
        "rook-objectrealm-used-by-objectzonegroup" => dependent(
            json!({"spec": {"realm": "realm-b"}}),
            rook("CephObjectRealm", &ns, "realm-b", json!({})),
        ),
        "rook-objectzonegroup-used-by-objectzone" => dependent(
            json!({"spec": {"zoneGroup": "zonegroup-b"}}),
            rook(
                "CephObjectZoneGroup",
                &ns,
                "zonegroup-b",
                json!({"realm": "realm-a"}),
            ),
        ),
        "rook-objectzone-used-by-objectstore" => {
            dependent(json!({"spec": {"zone": {"name": "zone-b"}}}), zone())
        }
        _ => None,
    }
}

/// Every relation of the pack that an update can move: held as created, a DELETE of the
/// provider refused, then one update (of the dependent, or of the provider) moves the hold to
/// another provider or releases it, and the refused DELETE is replayed.
#[tokio::test]
async fn every_rook_relation_moves_or_is_released_by_an_update_of_either_side() {
    let mut env = rook_env("packs-rook-moves").await;
    let moves: Vec<(Relation, Move)> = rook_relations_of(&env, "m")
        .into_iter()
        .filter_map(|r| move_of(&r).map(|m| (r, m)))
        .collect();
    // Every keyed or conditional rule of the pack but the CephFS PV one; both sides updated.
    assert_eq!(moves.len(), 16, "the rules an update can move");
    assert!(moves.iter().any(|(_, m)| matches!(m.side, Side::Provider)));
    for (r, m) in &moves {
        create_relation(&mut env, r).await;
        if let Some(to) = &m.to {
            env.create(to.clone()).await;
        }
    }
    join_all(moves.iter().map(|(r, m)| {
        let env = &env;
        async move {
            wait_held(env, &r.provider, &r.dependent, r.rule).await;
            if let Some(to) = &m.to {
                wait_free(env, to).await;
            }
        }
    }))
    .await;
    join_all(moves.iter().map(|(r, m)| {
        let env = &env;
        async move {
            // A refused DELETE of the provider (recorded: the pack replays) ...
            delete_refused(env, &r.provider, r.rule).await;
            let target = match m.side {
                Side::Provider => &r.provider,
                Side::Dependent => &r.dependent,
            };
            api_of(env, target)
                .patch(
                    name_of(target),
                    &PatchParams::default(),
                    &Patch::Merge(m.patch.clone()),
                )
                .await
                .unwrap_or_else(|e| panic!("{}: the update applies: {e}", r.rule));
            if let Some(to) = &m.to {
                wait_held(env, to, &r.dependent, r.rule).await;
            }
            // ... goes through by itself once the update has released it.
            wait_object_gone(env, &r.provider).await;
        }
    }))
    .await;
    env.finish().await;
}

// ---- Seed 002: the critical service ---------------------------------------------------------

const FINALIZER: &str = "my.crd.group/super-important";

/// The test's stand-in for the finalizer controller the Deployment runs: while the Deployment
/// exists, it removes the finalizer from every CoolResource being deleted.
pub(crate) async fn finalizer_controller(client: kube::Client, deployment: Api<DynamicObject>) {
    let ar = api_resource(&json!({"apiVersion": "my.crd.group/v1", "kind": "CoolResource"}));
    let cool: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    loop {
        match deployment.get_opt("finalizer-deployment").await {
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(_) => {}
        }
        if let Ok(list) = cool.list(&ListParams::default()).await {
            for item in list.items {
                let meta = &item.metadata;
                let finalizers = meta.finalizers.clone().unwrap_or_default();
                if meta.deletion_timestamp.is_none() || !finalizers.iter().any(|f| f == FINALIZER) {
                    continue;
                }
                let rest: Vec<String> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
                let api: Api<DynamicObject> = Api::namespaced_with(
                    client.clone(),
                    meta.namespace.as_deref().unwrap_or_default(),
                    &ar,
                );
                let _ = api
                    .patch(
                        meta.name.as_deref().unwrap_or_default(),
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {
                            "resourceVersion": meta.resource_version, "finalizers": rest}})),
                    )
                    .await;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs the machine's kubectl with the scenario's kubeconfig (`dir/kubeconfig`); (success,
/// stdout, stderr).
pub(crate) async fn kubectl(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let run = tokio::process::Command::new("kubectl")
        .args(args)
        .arg(format!("--cache-dir={}", dir.join("cache").display()))
        .arg("--request-timeout=30s")
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("kubectl finishes within 60 s")
        .expect("kubectl runs (is it on PATH?)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The kinds of seed 002's bundle this test deletes, and the order in which the seed says they
/// go. The Namespace, when listed, goes last: its DELETE is refused while the Deployment in it
/// is used from outside, and replayed once nothing in it is.
const BUNDLE: [&str; 3] = ["Deployment", "CustomResourceDefinition", "CoolResource"];
const SEEDS_ORDER: [&str; 4] = [
    "CoolResource",
    "CustomResourceDefinition",
    "Deployment",
    "Namespace",
];

/// Seed 002: the bundle deleted by one `kubectl delete -f` listing its objects in each of
/// `orders` (in turn, the bundle created again each time), while the test plays the finalizer
/// controller. Each time, everything goes within 30 s, in the seed's order.
async fn seed_002(orders: &[&[&str]]) {
    let mut env = Env::start("packs-seed-002").await;
    let rules = apply_pack(&mut env, "examples/rules/critical-service.yaml").await;
    assert_eq!(rules, ["super-important-finalizer-needs-its-controller"]);
    let bundle = load("examples/critical-service-bundle.yaml");
    let find = |kind: &str| {
        bundle
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("the bundle has a {kind}"))
            .clone()
    };
    assert_eq!(
        bundle.len(),
        4,
        "the seed's bundle: namespace, deployment, CRD, instance"
    );
    let namespace = find("Namespace");
    let with_namespace = orders.iter().any(|o| o.contains(&"Namespace"));
    if !with_namespace {
        env.create(namespace.clone()).await;
    }
    let (deployment, crd, cool) = (
        find("Deployment"),
        find("CustomResourceDefinition"),
        find("CoolResource"),
    );
    let dir = std::env::temp_dir().join(format!("lien-packs-{}", env.ns));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    env.write_kubeconfig(&dir.join("kubeconfig"));
    let usage = load("examples/rules/critical-service.yaml")
        .into_iter()
        .find(|d| d["kind"] == "ClusterUsage")
        .expect("the pack's ClusterUsage");
    for (round, listed) in orders.iter().enumerate() {
        if round > 0 {
            // The ClusterUsage went with its user, the CRD (Lien's owner reference): the bundle
            // comes back with the pack applied again, as a user would.
            wait_object_gone(&env, &usage).await;
            env.create(usage.clone()).await;
        }
        if with_namespace {
            // Gone with the previous round (or never created): the bundle brings it back.
            wait_object_gone(&env, &namespace).await;
            env.create(namespace.clone()).await;
        }
        for o in [&deployment, &crd] {
            env.create(o.clone()).await;
        }
        let cool_api = api_of(&env, &cool);
        wait_for("CoolResources to be served", DEADLINE, || async {
            cool_api.list(&Default::default()).await.ok().map(drop)
        })
        .await;
        env.create(cool.clone()).await;
        // The Deployment is held by the CoolResource (it carries the finalizer: the rule) and
        // by the CRD (the ClusterUsage).
        wait_held(
            &env,
            &deployment,
            &cool,
            "super-important-finalizer-needs-its-controller",
        )
        .await;
        let message = wait_for("the CRD to hold the Deployment", DEADLINE, || async {
            match api_of(&env, &deployment)
                .delete("finalizer-deployment", &DeleteParams::default().dry_run())
                .await
            {
                Err(kube::Error::Api(s))
                    if s.code == 409
                        && s.message.contains(
                            "in use by apiextensions.k8s.io/CustomResourceDefinition \
                             coolresources.my.crd.group (ClusterUsage \
                             coolresources-crd-needs-finalizer-controller",
                        ) =>
                {
                    Some(s.message)
                }
                _ => None,
            }
        })
        .await;
        assert!(message.contains("it is in use by 2 objects."), "{message}");

        // The test plays the finalizer controller while its Deployment exists.
        let controller = tokio::spawn(finalizer_controller(
            env.new_client().await,
            api_of(&env, &deployment),
        ));
        // Who disappears when.
        let order: Arc<Mutex<Vec<String>>> = Arc::default();
        let observer = {
            let watched: Vec<&Value> = if with_namespace {
                vec![&cool, &crd, &deployment, &namespace]
            } else {
                vec![&cool, &crd, &deployment]
            };
            let mut left: Vec<(String, Api<DynamicObject>, String)> = watched
                .iter()
                .map(|o| {
                    (
                        o["kind"].as_str().unwrap_or_default().to_owned(),
                        api_of(&env, o),
                        name_of(o).to_owned(),
                    )
                })
                .collect();
            let order = order.clone();
            tokio::spawn(async move {
                while !left.is_empty() {
                    // Looked at last to first: an object seen gone after an earlier one was
                    // seen present would otherwise be recorded first only because the two
                    // went between the two reads. What goes within one round is recorded in
                    // the listed order.
                    let mut gone = vec![false; left.len()];
                    for i in (0..left.len()).rev() {
                        let (_, api, name) = &left[i];
                        gone[i] = crate::harness::gone(&api.get_opt(name).await);
                    }
                    let mut still = vec![];
                    for ((kind, api, name), gone) in left.into_iter().zip(gone) {
                        if gone {
                            order.lock().expect("order").push(kind);
                        } else {
                            still.push((kind, api, name));
                        }
                    }
                    left = still;
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            })
        };

        let manifests: Vec<String> = listed
            .iter()
            .map(|kind| serde_yaml_ng::to_string(&find(kind)).expect("yaml"))
            .collect();
        let file = dir.join(format!("bundle-{round}.yaml"));
        std::fs::write(&file, manifests.join("---\n")).expect("write the bundle");
        let started = tokio::time::Instant::now();
        let (_, stdout, stderr) =
            kubectl(&dir, &["delete", "-f", file.to_str().expect("utf-8")]).await;
        if listed[0] == "Namespace" {
            // Listed first, the Namespace is refused: the Deployment in it is used from outside.
            assert!(
                stderr.contains("finalizer-namespace") && stderr.contains("(Conflict)"),
                "{listed:?}\nstdout: {stdout}\nstderr: {stderr}"
            );
        }
        if listed[0] == "Deployment" {
            // Listed first, the Deployment is refused (in use); Lien replays it later.
            assert!(
                stderr.contains(
                    "cannot delete apps/Deployment finalizer-namespace/finalizer-deployment: \
                     it is in use by 2 objects."
                ) && stderr.contains("\nheld by:\n  "),
                "{listed:?}\nstdout: {stdout}\nstderr: {stderr}"
            );
        }
        assert!(
            stdout.contains(
                "customresourcedefinition.apiextensions.k8s.io \"coolresources.my.crd.group\" deleted"
            ),
            "{listed:?}\nstdout: {stdout}\nstderr: {stderr}"
        );
        if tokio::time::timeout(scaled(Duration::from_secs(30)), observer)
            .await
            .is_err()
        {
            panic!(
                "{listed:?}: the bundle did not converge in {:?}; gone so far: {:?}",
                scaled(Duration::from_secs(30)),
                order.lock().expect("order")
            );
        }
        let took = started.elapsed();
        eprintln!("seed 002, {listed:?}: converged {took:?} after kubectl started");
        let order = order.lock().expect("order").clone();
        let expected = &SEEDS_ORDER[..if with_namespace { 4 } else { 3 }];
        assert_eq!(
            order, expected,
            "{listed:?}: the seed's order (converged in {took:?})"
        );
        tokio::time::timeout(scaled(DEADLINE), controller)
            .await
            .expect("the finalizer controller stops with its Deployment")
            .expect("the finalizer controller");
    }
    let _ = std::fs::remove_dir_all(&dir);
    env.finish().await;
}

/// The worst order: the Deployment first, then the CRD. The Deployment can only go by Lien's
/// replay of kubectl's refused DELETE, once the CoolResource is finalized and the CRD is gone.
#[tokio::test]
async fn seed_002_the_bundle_deleted_by_one_kubectl_in_the_worst_order_converges_in_order() {
    seed_002(&[&["Deployment", "CustomResourceDefinition", "CoolResource"]]).await;
}

/// The whole bundle, its Namespace listed first: the Namespace DELETE is refused up front (the
/// Deployment in it is used from outside) and replayed last, once nothing in it is.
#[tokio::test]
async fn seed_002_the_bundle_with_its_namespace_first_converges_with_the_namespace_last() {
    seed_002(&[&[
        "Namespace",
        "Deployment",
        "CustomResourceDefinition",
        "CoolResource",
    ]])
    .await;
}

/// "In any order": every order of the bundle's objects, one after the other.
#[tokio::test]
async fn seed_002_every_order_of_the_bundle_converges_in_the_seeds_order() {
    let [a, b, c] = BUNDLE;
    seed_002(&[
        &[a, b, c],
        &[a, c, b],
        &[b, a, c],
        &[b, c, a],
        &[c, a, b],
        &[c, b, a],
    ])
    .await;
}

// ---- The core pack ----------------------------------------------------------------------------

/// A sandbox with the core pack applied.
async fn core_env(name: &str) -> Env {
    let mut env = Env::start(name).await;
    let rules = apply_pack(&mut env, "examples/rules/core.yaml").await;
    assert_eq!(rules.len(), 24);
    env
}

/// A core (`v1`) object of `kind` in namespace `ns`, metadata only.
fn core_object(ns: &str, kind: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": ns}})
}

#[tokio::test]
async fn the_core_pack_protects_what_a_deployment_references_until_it_is_gone() {
    let mut env = core_env("packs-core").await;
    let ns = env.ns.clone();
    let object = |kind: &str, name: &str| core_object(&ns, kind, name);
    let configmap = object("ConfigMap", "settings");
    let secret = object("Secret", "tls");
    let pull = object("Secret", "registry");
    let sa = object("ServiceAccount", "runner");
    let mut pvc = object("PersistentVolumeClaim", "data");
    pvc["spec"] =
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
    let unused = object("ConfigMap", "unused");
    for o in [&configmap, &secret, &pull, &sa, &pvc, &unused] {
        env.create(o.clone()).await;
    }
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "namespace": ns},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "serviceAccountName": "runner",
                "imagePullSecrets": [{"name": "registry"}],
                "containers": [{"name": "web", "image": "nginx",
                    "envFrom": [{"configMapRef": {"name": "settings"}}]}],
                "volumes": [
                    {"name": "tls", "secret": {"secretName": "tls"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
                ]
            }
        }
    }});
    env.create(deployment.clone()).await;
    let held = [
        (&configmap, "configmap-used-by-deployment"),
        (&secret, "secret-used-by-deployment"),
        (&pull, "secret-used-by-deployment"),
        (&sa, "serviceaccount-used-by-deployment"),
        (&pvc, "persistentvolumeclaim-used-by-deployment"),
    ];
    join_all(
        held.iter()
            .map(|(o, rule)| wait_held(&env, o, &deployment, rule)),
    )
    .await;
    for (o, _) in &held {
        let err = api_of(&env, o)
            .delete(name_of(o), &DeleteParams::default())
            .await
            .expect_err("in use");
        assert_eq!(api_error(err).0, 409, "{}", described(o));
    }
    wait_free(&env, &unused).await;
    // The rules over Deployments count what they hold (one ConfigMap, two Secrets, one PVC,
    // one ServiceAccount).
    let rules_api: Api<lien_api::DependencyRule> = Api::all(env.client.clone());
    for (rule, relations) in [
        ("configmap-used-by-deployment", 1),
        ("secret-used-by-deployment", 2),
        ("persistentvolumeclaim-used-by-deployment", 1),
        ("serviceaccount-used-by-deployment", 1),
    ] {
        let api = &rules_api;
        wait_for(
            &format!("{rule}: Ready, {relations} relations"),
            DEADLINE,
            || async move {
                let status = api.get(rule).await.ok()?.status?;
                let ready = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True");
                (ready && status.relations == relations).then_some(())
            },
        )
        .await;
    }

    api_of(&env, &deployment)
        .delete("web", &DeleteParams::default())
        .await
        .expect("the Deployment deletes");
    // No replay in the core pack: each DELETE is allowed again, and done by the user.
    for (o, _) in &held {
        wait_free(&env, o).await;
        api_of(&env, o)
            .delete(name_of(o), &DeleteParams::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", described(o)));
    }
    env.finish().await;
}

/// A pod spec referencing, for workload `w`: ConfigMap `cm-<w>` (env `valueFrom` in an init
/// container, and a projected volume), Secret `secret-<w>` (a volume), PVC `pvc-<w>` and
/// ServiceAccount `sa-<w>`. The paths differ from the Deployment's test on purpose.
fn pod_spec(w: &str) -> Value {
    json!({
        "serviceAccountName": format!("sa-{w}"),
        "restartPolicy": if matches!(w, "job" | "cronjob") { "Never" } else { "Always" },
        "initContainers": [{"name": "init", "image": "busybox",
            "env": [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": format!("cm-{w}"), "key": "mode"}}}]}],
        "containers": [{"name": "main", "image": "busybox"}],
        "volumes": [
            {"name": "cfg", "projected": {"sources": [{"configMap": {"name": format!("cm-{w}")}}]}},
            {"name": "tls", "secret": {"secretName": format!("secret-{w}")}},
            {"name": "data", "persistentVolumeClaim": {"claimName": format!("pvc-{w}")}}
        ]
    })
}

#[tokio::test]
async fn the_core_pack_protects_what_pods_statefulsets_daemonsets_jobs_and_cronjobs_reference() {
    let mut env = core_env("packs-core-workloads").await;
    let ns = env.ns.clone();
    let object = |kind: &str, name: String| core_object(&ns, kind, &name);
    let labels = |w: &str| json!({"app": w});
    let workloads: Vec<(&str, Value)> = vec![
        (
            "pod",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "w-pod", "namespace": ns}, "spec": pod_spec("pod")}),
        ),
        (
            "statefulset",
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "w-statefulset", "namespace": ns},
            "spec": {"serviceName": "w", "selector": {"matchLabels": labels("statefulset")},
                "template": {"metadata": {"labels": labels("statefulset")}, "spec": pod_spec("statefulset")}}}),
        ),
        (
            "daemonset",
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "w-daemonset", "namespace": ns},
            "spec": {"selector": {"matchLabels": labels("daemonset")},
                "template": {"metadata": {"labels": labels("daemonset")}, "spec": pod_spec("daemonset")}}}),
        ),
        (
            "job",
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "w-job", "namespace": ns},
            "spec": {"template": {"spec": pod_spec("job")}}}),
        ),
        (
            "cronjob",
            json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "w-cronjob", "namespace": ns},
            "spec": {"schedule": "0 3 * * *",
                "jobTemplate": {"spec": {"template": {"spec": pod_spec("cronjob")}}}}}),
        ),
    ];
    let mut held: Vec<(Value, &Value, String)> = Vec::new();
    for (w, workload) in &workloads {
        let mut cm = object("ConfigMap", format!("cm-{w}"));
        cm["data"] = json!({"mode": "fast"});
        let mut pvc = object("PersistentVolumeClaim", format!("pvc-{w}"));
        pvc["spec"] = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        for (o, kind) in [
            (cm, "configmap"),
            (object("Secret", format!("secret-{w}")), "secret"),
            (pvc, "persistentvolumeclaim"),
            (
                object("ServiceAccount", format!("sa-{w}")),
                "serviceaccount",
            ),
        ] {
            env.create(o.clone()).await;
            held.push((o, workload, format!("{kind}-used-by-{w}")));
        }
    }
    for (_, workload) in &workloads {
        env.create(workload.clone()).await;
    }
    join_all(
        held.iter()
            .map(|(o, workload, rule)| wait_held(&env, o, workload, rule)),
    )
    .await;
    for (o, ..) in &held {
        let err = api_of(&env, o)
            .delete(name_of(o), &DeleteParams::default())
            .await
            .expect_err("in use");
        assert_eq!(api_error(err).0, 409, "{}", described(o));
    }
    // Each workload's own objects are free once it is gone, and not before.
    for (i, (w, workload)) in workloads.iter().enumerate() {
        api_of(&env, workload)
            .delete(name_of(workload), &DeleteParams::background())
            .await
            .unwrap_or_else(|e| panic!("{w}: {e}"));
        for (o, owner, _) in held.iter().filter(|(_, owner, _)| *owner == workload) {
            wait_free(&env, o).await;
            api_of(&env, o)
                .delete(name_of(o), &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("{} after {}: {e}", described(o), described(owner)));
        }
        // The objects of the workloads still there (those of the earlier ones are deleted).
        let remaining = &workloads[i + 1..];
        for (o, ..) in held
            .iter()
            .filter(|(_, owner, _)| remaining.iter().any(|(_, r)| r == *owner))
        {
            let err = api_of(&env, o)
                .delete(name_of(o), &DeleteParams::default().dry_run())
                .await
                .expect_err("still in use");
            assert_eq!(api_error(err).0, 409, "{}", described(o));
        }
    }
    env.finish().await;
}

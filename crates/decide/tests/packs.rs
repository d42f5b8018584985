//! The rule packs of `examples/rules/`, proven without a cluster: every rule compiles, and its
//! CEL, evaluated over realistic objects (`tests/fixtures/`) and joined by a join held in a
//! `lien_core::RelationIndex` (attached, as the controller's are once listed), derives exactly
//! the relations the pack promises — held, none where there should be none, and moved or
//! released by updates.

use std::collections::BTreeSet;
use std::path::PathBuf;

use lien_api::{ClusterUsage, DependencyRule, DependencyScope};
use lien_core::{GroupKind, JoinId, ObjectKey, RelationIndex, RuleConfig, RuleScope, Source};
use lien_decide::program::DependencyProgram;
use serde::Deserialize;
use serde_json::Value;

fn repo_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Every document of a YAML file, as JSON.
fn load(rel: &str) -> Vec<Value> {
    let path = repo_path(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn group_kind(object: &Value) -> GroupKind {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    GroupKind::new(group, object["kind"].as_str().unwrap_or_default())
}

fn key_of(object: &Value) -> ObjectKey {
    let gk = group_kind(object);
    ObjectKey::new(
        gk.group,
        gk.kind,
        object["metadata"]["namespace"].as_str(),
        object["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

fn short(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{} {ns}/{}", key.kind, key.name),
        None => format!("{} {}", key.kind, key.name),
    }
}

/// One rule of a pack: its compiled CEL and its join (in the pack's index).
struct Rule {
    name: String,
    program: DependencyProgram,
    join: JoinId,
}

/// A pack fed objects as the controller would feed it: each object's keys (and `when`) are
/// evaluated by `lien-cel` and handed to every rule whose `of` or `by` kind it is.
struct Pack {
    rules: Vec<Rule>,
    index: RelationIndex,
}

impl Pack {
    fn load(rel: &str) -> Pack {
        let mut index = RelationIndex::new();
        let rules = load(rel)
            .into_iter()
            .filter(|doc| doc["kind"] == "DependencyRule")
            .map(|doc| {
                let rule: DependencyRule = serde_json::from_value(doc)
                    .unwrap_or_else(|e| panic!("{rel}: not a DependencyRule: {e}"));
                let name = rule.metadata.name.clone().unwrap_or_default();
                let program = DependencyProgram::compile(&rule.spec).unwrap_or_else(|errors| {
                    panic!(
                        "{rel}: rule {name} does not compile: {}",
                        errors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                });
                let spec = &rule.spec;
                let config = RuleConfig {
                    source: Source::rule(name.clone()),
                    of: GroupKind::new(spec.of.group(), &spec.of.kind),
                    by: GroupKind::new(spec.by.group(), &spec.by.kind),
                    scope: match spec.scope {
                        DependencyScope::SameNamespace => RuleScope::SameNamespace,
                        DependencyScope::Cluster => RuleScope::Cluster,
                    },
                    keyed: program.keyed(),
                    reason: spec.reason.clone(),
                    replay: spec.replay_deletion,
                    warn: spec.enforcement == lien_api::Enforcement::Warn,
                };
                let join = index.add_join(config).expect("add_join");
                // Attached from the start: every update below changes the index itself.
                index
                    .join_mut(join)
                    .expect("the join")
                    .attach()
                    .expect("attach");
                Rule {
                    name,
                    program,
                    join,
                }
            })
            .collect::<Vec<_>>();
        let names: BTreeSet<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names.len(), rules.len(), "{rel}: rule names must be unique");
        Pack { rules, index }
    }

    /// Creates or updates an object in every rule it takes part in; evaluation must succeed.
    fn apply(&mut self, object: &Value) {
        let gk = group_kind(object);
        let key = key_of(object);
        let uid = object["metadata"]["uid"].as_str();
        for rule in &self.rules {
            let config = self.config(rule).clone();
            let mut join = self.index.join_mut(rule.join).expect("the join");
            if config.of == gk {
                let keys = rule.program.keys_of(object).unwrap_or_else(|e| {
                    panic!("{}: spec.keys.of on {}: {e}", rule.name, short(&key))
                });
                join.upsert_of(&key, uid, Some(keys)).expect("upsert_of");
            }
            if config.by == gk {
                let keys = rule.program.keys_by(object).unwrap_or_else(|e| {
                    panic!("{}: spec.keys.by on {}: {e}", rule.name, short(&key))
                });
                let when = rule
                    .program
                    .when(object)
                    .unwrap_or_else(|e| panic!("{}: spec.when on {}: {e}", rule.name, short(&key)));
                join.upsert_by(&key, uid, Some(keys), when)
                    .expect("upsert_by");
            }
        }
    }

    /// Every relation in the index, as `rule: Of ns/name <- By ns/name`; each rule's join
    /// derives exactly the relations the index holds for it.
    fn relations(&self) -> BTreeSet<String> {
        let show = |rule: &Rule, r: &lien_core::Relation| {
            let by = r.by.as_ref().map(short).unwrap_or_default();
            format!("{}: {} <- {by}", rule.name, short(&r.of))
        };
        let mut all = BTreeSet::new();
        for rule in &self.rules {
            let source = Source::rule(rule.name.clone());
            let indexed: BTreeSet<String> = self
                .index
                .relations_of_source(&source)
                .map(|r| show(rule, &r.to_relation()))
                .collect();
            let joined: BTreeSet<String> = self
                .index
                .join(rule.join)
                .expect("the join")
                .relations()
                .map(|r| show(rule, &r))
                .collect();
            assert_eq!(
                indexed, joined,
                "{}: the index holds the join's relations",
                rule.name
            );
            all.extend(indexed);
        }
        all
    }

    /// The rule's configuration, as its join holds it.
    fn config(&self, rule: &Rule) -> &RuleConfig {
        self.index.join(rule.join).expect("the join").config()
    }

    fn rule(&self, name: &str) -> &Rule {
        self.rules
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no rule {name}"))
    }
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the fixtures"))
}

/// Asserts the relations equal `expected`, printing both differences.
fn assert_relations(pack: &Pack, expected: &BTreeSet<String>) {
    let got = pack.relations();
    let missing: Vec<_> = expected.difference(&got).collect();
    let extra: Vec<_> = got.difference(expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing relations: {missing:#?}\nunexpected relations: {extra:#?}"
    );
}

// ---- Rook-Ceph ------------------------------------------------------------------------------

const ROOK_KINDS: &[&str] = &[
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

fn rook_expected(objects: &[Value]) -> BTreeSet<String> {
    // CephCluster <- every other Rook object of its namespace (a brute-force statement of it).
    let mut expected: BTreeSet<String> = objects
        .iter()
        .filter(|o| o["metadata"]["namespace"] == "rook-ceph")
        .filter_map(|o| {
            let kind = o["kind"].as_str()?;
            ROOK_KINDS.contains(&kind).then(|| {
                format!(
                    "rook-cephcluster-used-by-{}: CephCluster rook-ceph/rook-ceph <- {kind} rook-ceph/{}",
                    kind[4..].to_lowercase(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
        })
        .collect();
    assert_eq!(
        expected.len(),
        19,
        "every Rook object of rook-ceph but the cluster"
    );
    expected.extend(set(&[
        // CephNFS by spec.rados.pool; nfs-c has no rados pool and uses none.
        "rook-blockpool-used-by-nfs: CephBlockPool rook-ceph/replicapool <- CephNFS rook-ceph/nfs-b",
        "rook-filesystem-used-by-nfs: CephFilesystem rook-ceph/myfs <- CephNFS rook-ceph/nfs-a",
        "rook-objectstore-used-by-nfs: CephObjectStore rook-ceph/my-store <- CephNFS rook-ceph/nfs-d",
        // CephClient by `pool=` in any cap; `.mgr` is builtin-mgr's spec.name; zone-store has
        // no pools of its own (it has a zone), so pool=zone-store.rgw.meta holds nothing.
        "rook-blockpool-used-by-client: CephBlockPool rook-ceph/replicapool <- CephClient rook-ceph/glance",
        "rook-blockpool-used-by-client: CephBlockPool rook-ceph/builtin-mgr <- CephClient rook-ceph/cinder",
        "rook-objectzone-used-by-client: CephObjectZone rook-ceph/zone-a <- CephClient rook-ceph/glance",
        // PVs: clusterID is the provider's namespace; pool or journalPool; the other cluster's
        // replicapool is another pool; an RBD PV naming a filesystem pool holds nothing.
        "rook-blockpool-used-by-pv: CephBlockPool rook-ceph/replicapool <- PersistentVolume pvc-rbd-1",
        "rook-blockpool-used-by-pv: CephBlockPool rook-ceph/replicapool <- PersistentVolume pvc-rbd-2",
        "rook-blockpool-used-by-pv: CephBlockPool rook-ceph/mirrored-pool <- PersistentVolume pvc-rbd-2",
        "rook-blockpool-used-by-pv: CephBlockPool other-ns/replicapool <- PersistentVolume pvc-rbd-other-cluster",
        "rook-filesystem-used-by-pv: CephFilesystem rook-ceph/myfs <- PersistentVolume pvc-cephfs-1",
        "rook-filesystem-used-by-pv: CephFilesystem rook-ceph/otherfs <- PersistentVolume pvc-cephfs-2",
        // Object store users and buckets.
        "rook-objectstore-used-by-objectstoreuser: CephObjectStore rook-ceph/my-store <- CephObjectStoreUser rook-ceph/my-user",
        "rook-objectstore-used-by-objectbucket: CephObjectStore rook-ceph/my-store <- ObjectBucket obc-default-ceph-bucket",
        // Mirrors: only what has mirroring enabled (builtin-mgr says false, otherfs nothing).
        "rook-rbdmirror-used-by-blockpool: CephRBDMirror rook-ceph/my-rbd-mirror <- CephBlockPool rook-ceph/mirrored-pool",
        "rook-filesystemmirror-used-by-filesystem: CephFilesystemMirror rook-ceph/my-fs-mirror <- CephFilesystem rook-ceph/myfs",
        // Multi-site.
        "rook-objectrealm-used-by-objectzonegroup: CephObjectRealm rook-ceph/realm-a <- CephObjectZoneGroup rook-ceph/zonegroup-a",
        "rook-objectzonegroup-used-by-objectzone: CephObjectZoneGroup rook-ceph/zonegroup-a <- CephObjectZone rook-ceph/zone-a",
        "rook-objectzone-used-by-objectstore: CephObjectZone rook-ceph/zone-a <- CephObjectStore rook-ceph/zone-store",
    ]));
    expected
}

#[test]
fn the_rook_pack_compiles_and_derives_every_relation_of_seed_003() {
    let mut pack = Pack::load("../../examples/rules/rook-ceph.yaml");
    assert_eq!(pack.rules.len(), 28);
    assert!(
        pack.rules.iter().all(|r| pack.config(r).replay),
        "every Rook rule replays refused deletions"
    );
    let objects = load("tests/fixtures/rook.yaml");
    for o in &objects {
        pack.apply(o);
    }
    assert_relations(&pack, &rook_expected(&objects));
}

#[test]
fn the_rook_pack_names_the_pools_as_rook_does() {
    let pack = Pack::load("../../examples/rules/rook-ceph.yaml");
    let objects = load("tests/fixtures/rook.yaml");
    let keys = |rule: &str, kind: &str, name: &str| {
        pack.rule(rule)
            .program
            .keys_of(find(&objects, kind, name))
            .expect("evaluates")
    };
    assert_eq!(
        keys("rook-blockpool-used-by-nfs", "CephBlockPool", "builtin-mgr"),
        [".mgr"]
    );
    assert_eq!(
        keys("rook-filesystem-used-by-nfs", "CephFilesystem", "myfs"),
        ["myfs-metadata", "myfs-replicated", "myfs-data1"]
    );
    assert_eq!(
        keys(
            "rook-objectstore-used-by-nfs",
            "CephObjectStore",
            "my-store"
        ),
        [
            "my-store.rgw.control",
            "my-store.rgw.meta",
            "my-store.rgw.log",
            "my-store.rgw.buckets.index",
            "my-store.rgw.buckets.non-ec",
            "my-store.rgw.otp",
            "my-store.rgw.buckets.data"
        ]
    );
    assert!(
        keys(
            "rook-objectstore-used-by-nfs",
            "CephObjectStore",
            "zone-store"
        )
        .is_empty()
    );
    assert_eq!(
        keys("rook-filesystem-used-by-pv", "CephFilesystem", "otherfs"),
        [
            "rook-ceph/otherfs-metadata",
            "rook-ceph/otherfs-data0",
            "rook-ceph/fsName=otherfs"
        ]
    );
    let client = pack
        .rule("rook-blockpool-used-by-client")
        .program
        .keys_by(find(&objects, "CephClient", "cinder"))
        .expect("evaluates");
    assert_eq!(client, [".mgr", "zone-store.rgw.meta"]);
}

#[test]
fn rook_relations_follow_updates() {
    let mut pack = Pack::load("../../examples/rules/rook-ceph.yaml");
    let objects = load("tests/fixtures/rook.yaml");
    for o in &objects {
        pack.apply(o);
    }
    let mut expected = rook_expected(&objects);

    // A changed spec.rados.pool moves the hold from the block pool to the filesystem whose
    // unnamed second data pool it now names.
    let mut nfs = find(&objects, "CephNFS", "nfs-b").clone();
    nfs["spec"]["rados"]["pool"] = "myfs-data1".into();
    pack.apply(&nfs);
    expected.remove("rook-blockpool-used-by-nfs: CephBlockPool rook-ceph/replicapool <- CephNFS rook-ceph/nfs-b");
    expected.insert(
        "rook-filesystem-used-by-nfs: CephFilesystem rook-ceph/myfs <- CephNFS rook-ceph/nfs-b"
            .into(),
    );
    assert_relations(&pack, &expected);

    // Mirroring turned off releases the mirror; turned on again, it holds again.
    let mut pool = find(&objects, "CephBlockPool", "mirrored-pool").clone();
    pool["spec"]["mirroring"]["enabled"] = false.into();
    pack.apply(&pool);
    let mirror = "rook-rbdmirror-used-by-blockpool: CephRBDMirror rook-ceph/my-rbd-mirror <- CephBlockPool rook-ceph/mirrored-pool";
    expected.remove(mirror);
    assert_relations(&pack, &expected);
    let mut fs = find(&objects, "CephFilesystem", "otherfs").clone();
    fs["spec"]["mirroring"] = serde_json::json!({"enabled": true});
    pack.apply(&fs);
    expected.insert(
        "rook-filesystemmirror-used-by-filesystem: CephFilesystemMirror rook-ceph/my-fs-mirror <- CephFilesystem rook-ceph/otherfs".into(),
    );
    assert_relations(&pack, &expected);

    // Renaming a block pool's Ceph pool (spec.name) moves its PVs' and clients' holds away.
    let mut pool = find(&objects, "CephBlockPool", "replicapool").clone();
    pool["spec"]["name"] = "renamed".into();
    pack.apply(&pool);
    for r in [
        "rook-blockpool-used-by-client: CephBlockPool rook-ceph/replicapool <- CephClient rook-ceph/glance",
        "rook-blockpool-used-by-pv: CephBlockPool rook-ceph/replicapool <- PersistentVolume pvc-rbd-1",
        "rook-blockpool-used-by-pv: CephBlockPool rook-ceph/replicapool <- PersistentVolume pvc-rbd-2",
    ] {
        assert!(expected.remove(r), "{r}");
    }
    assert_relations(&pack, &expected);

    // A zone-backed store pointed at another zone leaves zone-a.
    let mut store = find(&objects, "CephObjectStore", "zone-store").clone();
    store["spec"]["zone"]["name"] = "zone-b".into();
    pack.apply(&store);
    expected.remove("rook-objectzone-used-by-objectstore: CephObjectZone rook-ceph/zone-a <- CephObjectStore rook-ceph/zone-store");
    assert_relations(&pack, &expected);
}

// ---- CriticalService ------------------------------------------------------------------------

#[test]
fn the_critical_service_pack_holds_the_finalizer_controller_while_the_finalizer_is_carried() {
    let docs = load("../../examples/rules/critical-service.yaml");
    let usage = docs
        .iter()
        .find(|d| d["kind"] == "ClusterUsage")
        .expect("a ClusterUsage");
    let usage: ClusterUsage = serde_json::from_value(usage.clone()).expect("a valid ClusterUsage");
    assert_eq!(usage.spec.of.kind, "Deployment");
    assert_eq!(
        usage.spec.by.as_ref().map(|b| b.kind.as_str()),
        Some("CustomResourceDefinition")
    );
    assert!(usage.spec.replay_deletion);

    let mut pack = Pack::load("../../examples/rules/critical-service.yaml");
    let objects = load("tests/fixtures/critical-service.yaml");
    for o in &objects {
        pack.apply(o);
    }
    // Only the named Deployment, only by the object still carrying the finalizer.
    let held = "super-important-finalizer-needs-its-controller: Deployment finalizer-namespace/finalizer-deployment <- CoolResource default/some-instance";
    assert_relations(&pack, &set(&[held]));

    // The finalizer controller removes its finalizer: the Deployment is released.
    let mut cr = find(&objects, "CoolResource", "some-instance").clone();
    cr["metadata"]["finalizers"] = serde_json::json!(["example.org/other"]);
    pack.apply(&cr);
    assert_relations(&pack, &BTreeSet::new());
    // A new object carrying it holds it again.
    let mut other = find(&objects, "CoolResource", "other-finalizer").clone();
    other["metadata"]["finalizers"] = serde_json::json!(["my.crd.group/super-important"]);
    pack.apply(&other);
    assert_relations(
        &pack,
        &set(&[
            "super-important-finalizer-needs-its-controller: Deployment finalizer-namespace/finalizer-deployment <- CoolResource team-b/other-finalizer",
        ]),
    );
}

#[test]
fn the_critical_service_bundle_is_the_seeds_story() {
    let bundle = load("../../examples/critical-service-bundle.yaml");
    let kinds: Vec<String> = bundle.iter().map(|d| short(&key_of(d))).collect();
    assert_eq!(
        kinds,
        [
            "Namespace finalizer-namespace",
            "Deployment finalizer-namespace/finalizer-deployment",
            "CustomResourceDefinition coolresources.my.crd.group",
            "CoolResource default/some-instance"
        ]
    );
    let cr = &bundle[3];
    assert_eq!(
        cr["metadata"]["finalizers"][0],
        "my.crd.group/super-important"
    );
    // The rule's `when` holds for the bundle's instance.
    let pack = Pack::load("../../examples/rules/critical-service.yaml");
    let rule = pack.rule("super-important-finalizer-needs-its-controller");
    assert_eq!(rule.program.when(cr), Ok(true));
    assert_eq!(
        rule.program.keys_of(&bundle[1]),
        Ok(vec!["finalizer-namespace/finalizer-deployment".to_string()])
    );
}

// ---- core -----------------------------------------------------------------------------------

#[test]
fn the_core_pack_derives_what_each_workload_references() {
    let mut pack = Pack::load("../../examples/rules/core.yaml");
    assert_eq!(pack.rules.len(), 24);
    let objects = load("tests/fixtures/core.yaml");
    for o in &objects {
        pack.apply(o);
    }
    assert_relations(
        &pack,
        &set(&[
            // The Pod: volume, projected volumes (the kube-api-access one included), init
            // container envFrom, env secretKeyRef, imagePullSecrets, PVC, service account.
            "configmap-used-by-pod: ConfigMap app/app-config <- Pod app/web",
            "configmap-used-by-pod: ConfigMap app/app-env <- Pod app/web",
            "configmap-used-by-pod: ConfigMap app/kube-root-ca.crt <- Pod app/web",
            "secret-used-by-pod: Secret app/app-tls <- Pod app/web",
            "secret-used-by-pod: Secret app/db-creds <- Pod app/web",
            "secret-used-by-pod: Secret app/projected-secret <- Pod app/web",
            "secret-used-by-pod: Secret app/registry-creds <- Pod app/web",
            "persistentvolumeclaim-used-by-pod: PersistentVolumeClaim app/data <- Pod app/web",
            "serviceaccount-used-by-pod: ServiceAccount app/default <- Pod app/web",
            // The Deployment: envFrom (an optional reference counts), its service account.
            "configmap-used-by-deployment: ConfigMap app/app-config <- Deployment app/api",
            "secret-used-by-deployment: Secret app/db-creds <- Deployment app/api",
            "serviceaccount-used-by-deployment: ServiceAccount app/app-sa <- Deployment app/api",
            // The StatefulSet: env; its volumeClaimTemplates reference no existing claim.
            "secret-used-by-statefulset: Secret app/db-creds <- StatefulSet app/db",
            // The Job: an optional configMap volume.
            "configmap-used-by-job: ConfigMap app/app-config <- Job app/migrate",
            // The CronJob, through its job template.
            "secret-used-by-cronjob: Secret app/db-creds <- CronJob app/backup",
            "persistentvolumeclaim-used-by-cronjob: PersistentVolumeClaim app/data <- CronJob app/backup",
            "serviceaccount-used-by-cronjob: ServiceAccount app/app-sa <- CronJob app/backup",
            // Nothing for the DaemonSet (it references nothing), nothing across namespaces
            // (other/stray names app's objects), nothing for the unused objects.
        ]),
    );

    // An update that drops a reference releases it; one that adds a reference holds it.
    let mut api = find(&objects, "Deployment", "api").clone();
    api["spec"]["template"]["spec"]["containers"][0]["envFrom"] =
        serde_json::json!([{"configMapRef": {"name": "unused-config"}}]);
    pack.apply(&api);
    let got = pack.relations();
    assert!(got.contains(
        "configmap-used-by-deployment: ConfigMap app/unused-config <- Deployment app/api"
    ));
    assert!(
        !got.contains(
            "configmap-used-by-deployment: ConfigMap app/app-config <- Deployment app/api"
        )
    );
    assert!(!got.contains("secret-used-by-deployment: Secret app/db-creds <- Deployment app/api"));
}

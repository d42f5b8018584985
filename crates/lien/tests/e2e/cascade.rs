//! CascadeRule (issue 9, seed 001): a namespaced claim references a cluster-scoped composite,
//! which owns cluster-scoped composed resources (`blockOwnerDeletion`) whose finalizers an
//! "external API" removes a while after their deletion starts. Deleting the claim deletes the
//! composite with the claim's policy and holds the claim until the composite is gone.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::harness::*;

const EXTERNAL: &str = "example.org/external";
/// How long the "external API" takes to delete a composed resource.
const LATENCY: Duration = Duration::from_millis(1500);

/// The scenario's kinds: `Claim` (namespaced), `Composite` and `Composed` (cluster-scoped), in
/// a group of its own.
struct World {
    group: String,
    claims: Api<DynamicObject>,
    composites: Api<DynamicObject>,
    composed: Api<DynamicObject>,
    rules: Api<lien_api::CascadeRule>,
    rule: String,
}

pub(crate) fn ar(group: &str, kind: &str, plural: &str) -> ApiResource {
    let mut ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, "v1", kind));
    ar.plural = plural.into();
    ar
}

pub(crate) async fn crd(env: &mut Env, group: &str, kind: &str, plural: &str, namespaced: bool) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    let api: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    api.create(&PostParams::default(), &crd)
        .await
        .expect("CRD created");
    let name = format!("{plural}.{group}");
    wait_for(&format!("CRD {name} established"), DEADLINE, || async {
        let c = api.get(&name).await.ok()?;
        c.status?
            .conditions?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
}

/// The CRDs and the CascadeRule of seed 001's claim shape.
async fn world(env: &mut Env) -> World {
    let group = format!("{}.example.org", env.ns);
    crd(env, &group, "Claim", "claims", true).await;
    crd(env, &group, "Composite", "composites", false).await;
    crd(env, &group, "Composed", "composeds", false).await;
    let rule = env.cluster_name("claims");
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "CascadeRule",
        "metadata": {"name": rule},
        "spec": {"parent": {"apiVersion": format!("{group}/v1"), "kind": "Claim"},
                 "children": "[self.spec.resourceRef]",
                 // Crossplane's binding: a composite names its claim back.
                 "childKinds": [{"apiVersion": format!("{group}/v1"), "kind": "Composite",
                                 "backReference": "has(self.spec.claimRef) ? self.spec.claimRef : null"}],
                 "propagationPolicyExpression":
                    "has(self.spec.compositeDeletePolicy) ? self.spec.compositeDeletePolicy : 'Background'"}}))
        .await;
    World {
        claims: Api::namespaced_with(env.client.clone(), &env.ns, &ar(&group, "Claim", "claims")),
        composites: Api::all_with(env.client.clone(), &ar(&group, "Composite", "composites")),
        composed: Api::all_with(env.client.clone(), &ar(&group, "Composed", "composeds")),
        rules: Api::all(env.client.clone()),
        group,
        rule,
    }
}

impl World {
    /// A composite's spec naming claim `name` of the scenario's namespace back.
    fn bound_to(&self, env: &Env, name: &str) -> Value {
        json!({"claimRef": {"apiVersion": format!("{}/v1", self.group), "kind": "Claim",
                            "name": name, "namespace": env.ns}})
    }

    /// A claim referencing a composite with `policy`, then the composite (naming the claim back)
    /// with `n` composed resources (owner reference with `blockOwnerDeletion`, finalizer
    /// [`EXTERNAL`]) — in Crossplane's order: the claim first, its composite made for it. (A
    /// composite older than its claim names an earlier claim of the same name as much as this
    /// one, and its uid-less `claimRef` never has it deleted: issue 28, finding 4.)
    async fn tree(&self, env: &mut Env, name: &str, n: usize, policy: Option<&str>) -> Value {
        let composite = env.cluster_name(name);
        let mut spec = json!({"resourceRef": {"apiVersion": format!("{}/v1", self.group),
            "kind": "Composite", "name": composite}});
        if let Some(p) = policy {
            spec["compositeDeletePolicy"] = json!(p);
        }
        let ns = env.ns.clone();
        env.create(
            json!({"apiVersion": format!("{}/v1", self.group), "kind": "Claim",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}),
        )
        .await;
        let xr = env
            .create(
                json!({"apiVersion": format!("{}/v1", self.group), "kind": "Composite",
                "metadata": {"name": composite}, "spec": self.bound_to(env, name)}),
            )
            .await;
        for i in 0..n {
            env.create(
                json!({"apiVersion": format!("{}/v1", self.group), "kind": "Composed",
                "metadata": {"name": format!("{composite}-{i}"), "finalizers": [EXTERNAL],
                    "ownerReferences": [{"apiVersion": format!("{}/v1", self.group),
                        "kind": "Composite", "name": composite, "uid": xr.metadata.uid,
                        "controller": true, "blockOwnerDeletion": true}]},
                "spec": {}}),
            )
            .await;
        }
        json!(composite)
    }

    /// Waits until Lien holds the claim (its finalizer and, when `children` > 0, the recorded
    /// UIDs).
    async fn adopted(&self, name: &str, children: usize) -> DynamicObject {
        wait_for(&format!("claim {name} adopted"), DEADLINE, || async {
            let c = self.claims.get(name).await.ok()?;
            let record = c.annotations().get("lien.dev/cascade-children").cloned();
            let n = record
                .and_then(|r| serde_json::from_str::<Value>(&r).ok())
                .and_then(|r| r["children"].as_array().map(Vec::len))
                .unwrap_or(0);
            (c.finalizers()
                .iter()
                .any(|f| f == lien_api::CASCADE_FINALIZER)
                && n == children)
                .then_some(c)
        })
        .await
    }
}

/// The "external API": removes [`EXTERNAL`] from each composed resource `latency` after its
/// deletion started (never, with `None`).
fn external_api(api: Api<DynamicObject>, latency: Option<Duration>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(latency) = latency else { return };
        let mut seen: HashMap<String, Instant> = HashMap::new();
        loop {
            if let Ok(list) = api.list(&Default::default()).await {
                for o in list.items {
                    if o.metadata.deletion_timestamp.is_none()
                        || !o.finalizers().iter().any(|f| f == EXTERNAL)
                    {
                        continue;
                    }
                    let at = *seen.entry(o.name_any()).or_insert_with(Instant::now);
                    if at.elapsed() >= latency {
                        let _ = api
                            .patch(
                                &o.name_any(),
                                &PatchParams::default(),
                                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
                            )
                            .await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// Records when each watched object is first seen gone.
fn gone_times(
    targets: Vec<(Api<DynamicObject>, String)>,
) -> (
    Arc<Mutex<HashMap<String, Instant>>>,
    tokio::task::JoinHandle<()>,
) {
    let gone = Arc::new(Mutex::new(HashMap::new()));
    let record = gone.clone();
    let task = tokio::spawn(async move {
        loop {
            for (api, name) in &targets {
                if record.lock().contains_key(name) {
                    continue;
                }
                if let Ok(None) = api.get_opt(name).await {
                    record.lock().insert(name.clone(), Instant::now());
                }
            }
            if record.lock().len() == targets.len() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    (gone, task)
}

async fn teardown_in_order(name: &str, policy: &str) {
    let mut env = Env::start(name).await;
    let w = world(&mut env).await;
    let composite = w.tree(&mut env, "db", 3, Some(policy)).await;
    let composite = composite.as_str().expect("name").to_owned();
    w.adopted("db", 1).await;
    let external = external_api(w.composed.clone(), Some(LATENCY));
    // Leaves first, so that within one sweep an ancestor is checked after its descendants: an
    // ancestor seen gone while a descendant was seen present is a real inversion.
    let mut targets: Vec<(Api<DynamicObject>, String)> = (0..3)
        .map(|i| (w.composed.clone(), format!("{composite}-{i}")))
        .collect();
    targets.push((w.composites.clone(), composite.clone()));
    targets.push((w.claims.clone(), "db".to_owned()));
    let (gone, watcher) = gone_times(targets);
    let start = Instant::now();
    w.claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    // The composite is deleted with the claim's policy: under Foreground it waits for its
    // composed resources (`foregroundDeletion`), under Background it goes at once.
    if policy == "Foreground" {
        let xr = wait_for("the composite's deletion to start", DEADLINE, || async {
            w.composites
                .get(&composite)
                .await
                .ok()
                .filter(|x| x.metadata.deletion_timestamp.is_some())
        })
        .await;
        assert!(
            xr.finalizers().iter().any(|f| f == "foregroundDeletion"),
            "the composite was deleted with Foreground: {:?}",
            xr.finalizers()
        );
        let claim = w.claims.get("db").await.expect("the claim waits");
        assert!(claim.metadata.deletion_timestamp.is_some());
    }
    tokio::time::timeout(scaled(DEADLINE), watcher)
        .await
        .expect("everything goes")
        .expect("watcher");
    let gone = gone.lock().clone();
    let claim_gone = gone["db"];
    let xr_gone = gone[&composite];
    let leaves: Vec<Instant> = (0..3).map(|i| gone[&format!("{composite}-{i}")]).collect();
    let last_leaf = leaves.iter().max().copied().expect("leaves");
    println!(
        "cascade {policy}: composed gone after {:?}, composite {:?}, claim {:?}",
        last_leaf - start,
        xr_gone - start,
        claim_gone - start
    );
    assert!(claim_gone >= xr_gone, "the claim went before the composite");
    assert!(
        last_leaf - start >= LATENCY,
        "the composed resources went at once"
    );
    if policy == "Background" {
        assert!(
            xr_gone < last_leaf,
            "Background: the composite goes at once, its composed resources after"
        );
    } else {
        assert!(
            xr_gone >= last_leaf,
            "Foreground: the composite went before its composed resources"
        );
        // And the claim with it: bounded by the children's own finalization.
        assert!(
            claim_gone - last_leaf < Duration::from_secs(3),
            "the claim was released {:?} after the last composed resource",
            claim_gone - last_leaf
        );
    }
    external.abort();
    env.finish().await;
}

#[tokio::test]
async fn cascade_foreground_claim_waits_for_composite_which_waits_for_composed() {
    teardown_in_order("cascade-fg", "Foreground").await;
}

#[tokio::test]
async fn cascade_background_claim_waits_for_composite() {
    teardown_in_order("cascade-bg", "Background").await;
}

/// A composed resource whose external deletion never finishes: the claim is reported waiting,
/// naming the composite, the composed resource and its finalizer, then as stuck; the rule's
/// status lists it. Once the finalizer goes, so does everything.
#[tokio::test]
async fn cascade_child_that_never_finishes_is_reported_on_the_parent() {
    let mut env = Env::start("cascade-stuck").await;
    let w = world(&mut env).await;
    let composite = w.tree(&mut env, "db", 1, Some("Foreground")).await;
    let composite = composite.as_str().expect("name").to_owned();
    w.adopted("db", 1).await;
    w.claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    let leaf = format!("{composite}-0");
    let note = wait_for(
        "a report naming the composed resource",
        DEADLINE,
        || async {
            env.events("Claim", "db", "CascadeWaiting")
                .await
                .into_iter()
                .chain(env.events("Claim", "db", "CascadeStuck").await)
                .filter_map(|e| e.note)
                .find(|n| n.contains(&leaf))
        },
    )
    .await;
    assert!(note.contains(&format!("Composite {composite}")), "{note}");
    assert!(note.contains(EXTERNAL), "{note}");
    assert!(note.contains("foregroundDeletion"), "{note}");
    let stuck = env.wait_events("Claim", "db", "CascadeStuck").await;
    assert!(
        stuck
            .iter()
            .filter_map(|e| e.note.as_deref())
            .any(|n| n.contains(&format!("{composite} is stuck"))),
        "{stuck:?}"
    );
    let status = wait_for(
        "the rule's status lists the waiting claim",
        DEADLINE,
        || async {
            let r = w.rules.get(&w.rule).await.ok()?;
            let s = r.status?;
            (s.waiting == 1 && s.waiting_parents.first()?.children.first()?.stuck).then_some(s)
        },
    )
    .await;
    let parent = &status.waiting_parents[0];
    assert_eq!(
        (parent.namespace.as_str(), parent.name.as_str()),
        (env.ns.as_str(), "db")
    );
    assert_eq!(parent.children[0].name, composite);
    assert!(parent.children[0].held_by.contains("foregroundDeletion"));
    // The external deletion finishes at last.
    w.composed
        .patch(
            &leaf,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed");
    wait_gone(&w.claims, "db", DEADLINE).await;
    wait_gone(&w.composites, &composite, DEADLINE).await;
    env.finish().await;
}

/// A claim referencing a composite that does not exist is released at once, with a Warning.
#[tokio::test]
async fn cascade_dangling_reference_releases_the_parent_with_a_warning() {
    let mut env = Env::start("cascade-dangling").await;
    let w = world(&mut env).await;
    let ns = env.ns.clone();
    env.create(
        json!({"apiVersion": format!("{}/v1", w.group), "kind": "Claim",
        "metadata": {"name": "lost", "namespace": ns},
        "spec": {"resourceRef": {"apiVersion": format!("{}/v1", w.group), "kind": "Composite",
                                 "name": "never-created"}}}),
    )
    .await;
    w.adopted("lost", 0).await;
    w.claims
        .delete("lost", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    wait_gone(&w.claims, "lost", DEADLINE).await;
    let events = env
        .wait_events("Claim", "lost", "CascadeDanglingReference")
        .await;
    assert!(
        events[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("Composite never-created does not exist")),
        "{events:?}"
    );
    env.finish().await;
}

/// The composite is deleted and re-created under the same name before the claim is deleted:
/// the new composite (another UID) is not deleted, and the claim is released.
#[tokio::test]
async fn cascade_re_created_child_is_not_deleted() {
    let mut env = Env::start("cascade-recreated").await;
    let w = world(&mut env).await;
    let composite = w.tree(&mut env, "db", 0, None).await;
    let composite = composite.as_str().expect("name").to_owned();
    w.adopted("db", 1).await;
    w.composites
        .delete(&composite, &DeleteParams::default())
        .await
        .expect("composite DELETE");
    wait_gone(&w.composites, &composite, DEADLINE).await;
    let again = w
        .composites
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": format!("{}/v1", w.group),
                "kind": "Composite", "metadata": {"name": composite}, "spec": w.bound_to(&env, "db")}))
            .expect("object"),
        )
        .await
        .expect("re-created");
    // A barrier: Lien records a new tree's composite only once its watch has delivered it, and
    // a watch delivers composites in order, so Lien has then seen the re-created one too. (On
    // kube-apiserver the watch may lag the create: deleting the claim at once, Lien could still
    // see no composite, and release the claim without a word.)
    w.tree(&mut env, "barrier", 0, None).await;
    w.adopted("barrier", 1).await;
    w.claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    wait_gone(&w.claims, "db", DEADLINE).await;
    let now = w.composites.get(&composite).await.expect("still there");
    assert_eq!(now.uid(), again.uid());
    assert!(
        now.metadata.deletion_timestamp.is_none(),
        "the new composite was deleted"
    );
    let events = env
        .wait_events("Claim", "db", "CascadeChildRecreated")
        .await;
    assert!(format!("{events:?}").contains("re-created"));
    env.finish().await;
}

/// The rule is deleted while a claim waits: the waiting claim is released (deleted at once),
/// every other claim loses Lien's finalizer, then the rule goes.
#[tokio::test]
async fn cascade_rule_deleted_while_a_parent_waits_releases_every_parent() {
    let mut env = Env::start("cascade-rule-gone").await;
    let w = world(&mut env).await;
    let composite = w.tree(&mut env, "db", 1, Some("Foreground")).await;
    let composite = composite.as_str().expect("name").to_owned();
    w.tree(&mut env, "other", 0, None).await;
    w.adopted("db", 1).await;
    w.adopted("other", 1).await;
    wait_for("the rule's finalizer", DEADLINE, || async {
        let r = w.rules.get(&w.rule).await.ok()?;
        r.finalizers()
            .iter()
            .any(|f| f == lien_api::CASCADE_FINALIZER)
            .then_some(())
    })
    .await;
    w.claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    wait_for("the composite's deletion to start", DEADLINE, || async {
        w.composites
            .get(&composite)
            .await
            .ok()?
            .metadata
            .deletion_timestamp
    })
    .await;
    w.rules
        .delete(&w.rule, &DeleteParams::default())
        .await
        .expect("rule DELETE");
    wait_gone(&w.claims, "db", DEADLINE).await;
    wait_gone(&w.rules, &w.rule, DEADLINE).await;
    let other = w.claims.get("other").await.expect("the other claim lives");
    assert!(
        !other
            .finalizers()
            .iter()
            .any(|f| f == lien_api::CASCADE_FINALIZER),
        "{:?}",
        other.finalizers()
    );
    assert!(
        !other
            .annotations()
            .contains_key("lien.dev/cascade-children")
    );
    // The composite is still held by its composed resource: releasing the claim deleted
    // nothing more.
    assert!(
        w.composites
            .get_opt(&composite)
            .await
            .expect("GET")
            .is_some()
    );
    env.finish().await;
}

/// Lien stops while a claim waits; meanwhile the composite finishes and another composite is
/// created under the same name. The restarted Lien releases the claim from its record and does
/// not delete the newcomer.
#[tokio::test]
async fn cascade_lien_restarted_while_a_parent_waits_picks_up_where_it_left_off() {
    let mut env = Env::start("cascade-restart").await;
    if !env.is_local() {
        env.finish().await;
        return;
    }
    let w = world(&mut env).await;
    let composite = w.tree(&mut env, "db", 1, Some("Foreground")).await;
    let composite = composite.as_str().expect("name").to_owned();
    w.adopted("db", 1).await;
    w.claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    wait_for("the composite's deletion to start", DEADLINE, || async {
        w.composites
            .get(&composite)
            .await
            .ok()?
            .metadata
            .deletion_timestamp
    })
    .await;
    assert!(env.stop_lien().await);
    // Lien is down: the external deletion finishes, the composite goes, a new one comes.
    w.composed
        .patch(
            &format!("{composite}-0"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed");
    wait_gone(&w.composites, &composite, DEADLINE).await;
    let newcomer = w
        .composites
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": format!("{}/v1", w.group),
                "kind": "Composite", "metadata": {"name": composite}, "spec": w.bound_to(&env, "db")}))
            .expect("object"),
        )
        .await
        .expect("re-created");
    let claim = w.claims.get("db").await.expect("the claim waits for Lien");
    assert!(
        claim
            .finalizers()
            .iter()
            .any(|f| f == lien_api::CASCADE_FINALIZER)
    );
    env.start_lien().await;
    wait_gone(&w.claims, "db", DEADLINE).await;
    let now = w
        .composites
        .get(&composite)
        .await
        .expect("the newcomer stays");
    assert_eq!(now.uid(), newcomer.uid());
    assert!(now.metadata.deletion_timestamp.is_none());
    env.finish().await;
}

/// A composite in use (a ClusterUsage protects it): its DELETE is refused by Lien's webhook;
/// the claim reports the refusal, naming the Usage, and is released once the protection is
/// lifted and the retried DELETE goes through.
#[tokio::test]
async fn cascade_child_in_use_is_reported_and_retried() {
    let mut env = Env::start("cascade-in-use").await;
    let w = world(&mut env).await;
    let composite = w.tree(&mut env, "db", 0, None).await;
    let composite = composite.as_str().expect("name").to_owned();
    let usage = env.cluster_name("keep");
    let object = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "ClusterUsage",
        "metadata": {"name": usage},
        "spec": {"of": {"apiVersion": format!("{}/v1", w.group), "kind": "Composite",
                        "resourceRef": {"name": composite}},
                 "reason": "the database holds production data"}});
    // Lien's webhook learns of the new CRD from a watch: until then it refuses the Usage.
    let end = Instant::now() + scaled(DEADLINE);
    while let Err(e) = env.try_create(object.clone()).await {
        assert!(Instant::now() < end, "the ClusterUsage is refused: {e}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    w.adopted("db", 1).await;
    wait_for("the composite to be in use", DEADLINE, || async {
        let x = w.composites.get(&composite).await.ok()?;
        (x.labels().get(LABEL).map(String::as_str) == Some("true")).then_some(())
    })
    .await;
    w.claims
        .delete("db", &DeleteParams::default())
        .await
        .expect("claim DELETE");
    let note = wait_for("a report of the refusal", DEADLINE, || async {
        env.events("Claim", "db", "CascadeWaiting")
            .await
            .into_iter()
            .filter_map(|e| e.note)
            .find(|n| n.contains("DELETE refused"))
    })
    .await;
    assert!(
        note.contains(&usage),
        "the refusal names the ClusterUsage: {note}"
    );
    // And at once, as its own event, naming the child and who refused.
    let refused = env.wait_events("Claim", "db", "CascadeChildRefused").await;
    let note = refused[0].note.clone().unwrap_or_default();
    assert!(
        note.contains(&composite) && note.contains(&usage),
        "the refusal event names the composite and the ClusterUsage: {note}"
    );
    assert!(w.claims.get_opt("db").await.expect("GET").is_some());
    Api::<lien_api::ClusterUsage>::all(env.client.clone())
        .delete(&usage, &DeleteParams::default())
        .await
        .expect("protection lifted");
    wait_gone(&w.composites, &composite, DEADLINE).await;
    wait_gone(&w.claims, "db", DEADLINE).await;
    env.finish().await;
}

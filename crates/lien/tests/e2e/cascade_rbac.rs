//! A CascadeRule never makes Lien a confused deputy (issue 18): a tenant who may write claims
//! in one namespace, and delete nothing else, deletes a claim naming objects it could not
//! delete itself. Lien deletes only children of the kinds the rule lists that name the claim
//! back; everything else stays, with a Warning on the claim and an entry in the rule's status.
//! Runs under `--authorization-mode=RBAC` with the tenant as a non-admin user.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use lien_sandbox::apiserver::Authorization;
use serde_json::{Value, json};

use crate::cascade::{ar, crd};
use crate::harness::*;
use crate::packs::kubectl;

/// The scenario's kinds and its tenant.
struct Tenancy {
    group: String,
    /// Another namespace, standing for `kube-system`: the tenant has no rights there.
    system: String,
    tenant: kube::Client,
    claims: Api<DynamicObject>,
    composites: Api<DynamicObject>,
    rule: String,
}

/// Claims (namespaced) whose children are Composites (cluster-scoped) and Buckets
/// (namespaced), each naming its claim back in `spec.claimRef`; a tenant who may manage
/// Claims in the scenario's namespace and nothing else.
async fn tenancy(env: &mut Env) -> Tenancy {
    let group = format!("{}.example.org", env.ns);
    crd(env, &group, "Claim", "claims", true).await;
    crd(env, &group, "Composite", "composites", false).await;
    crd(env, &group, "Bucket", "buckets", true).await;
    let system = env.another_namespace_name("system");
    env.namespace(&system).await;
    let rule = env.cluster_name("claims");
    let back = "has(self.spec.claimRef) ? self.spec.claimRef : null";
    // The admin writes the rule (and may delete every Claim, Composite and Bucket).
    env.create(json!({"apiVersion": "lien.dev/v1alpha1", "kind": "CascadeRule",
        "metadata": {"name": rule},
        "spec": {"parent": {"apiVersion": format!("{group}/v1"), "kind": "Claim"},
                 "children": "[self.spec.resourceRef]",
                 "childKinds": [
                    {"apiVersion": format!("{group}/v1"), "kind": "Composite", "backReference": back},
                    {"apiVersion": format!("{group}/v1"), "kind": "Bucket", "backReference": back}]}}))
        .await;
    let tenant_name = format!("tenant-{}", env.ns);
    let ns = env.ns.clone();
    grant(
        env,
        &ns,
        "claims",
        &tenant_name,
        json!([{"apiGroups": [group], "resources": ["claims"],
                "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]}]),
    )
    .await;
    let tenant = env.client_as(&tenant_name, &["system:authenticated"]).await;
    Tenancy {
        claims: Api::namespaced_with(tenant.clone(), &env.ns, &ar(&group, "Claim", "claims")),
        composites: Api::all_with(env.client.clone(), &ar(&group, "Composite", "composites")),
        tenant,
        group,
        system,
        rule,
    }
}

impl Tenancy {
    fn claim_ref(&self, ns: &str, name: &str) -> Value {
        json!({"apiVersion": format!("{}/v1", self.group), "kind": "Claim",
               "name": name, "namespace": ns})
    }

    /// The tenant creates claim `name` referencing `target` (`{apiVersion, kind, name,
    /// namespace?}`).
    async fn claim(&self, env: &Env, name: &str, target: Value) {
        let claim = json!({"apiVersion": format!("{}/v1", self.group), "kind": "Claim",
            "metadata": {"name": name, "namespace": env.ns},
            "spec": {"resourceRef": target}});
        // RBAC on a real cluster applies a new binding within moments, not at once.
        wait_for("the tenant may create claims", DEADLINE, || async {
            self.claims
                .create(
                    &PostParams::default(),
                    &serde_json::from_value(claim.clone()).expect("claim"),
                )
                .await
                .ok()
        })
        .await;
    }

    /// Waits until Lien holds the claim (its finalizer).
    async fn adopted(&self, name: &str) {
        wait_for(&format!("claim {name} adopted"), DEADLINE, || async {
            let c = self.claims.get(name).await.ok()?;
            c.finalizers()
                .iter()
                .any(|f| f == lien_api::CASCADE_FINALIZER)
                .then_some(())
        })
        .await;
    }

    /// The Warning on the claim naming `child`, said while the claim lives.
    async fn warned(&self, env: &Env, claim: &str, child: &str, why: &str) -> String {
        wait_for(
            &format!("a CascadeChildNotAllowed event on {claim} naming {child}"),
            DEADLINE,
            || async {
                env.events("Claim", claim, "CascadeChildNotAllowed")
                    .await
                    .into_iter()
                    .filter_map(|e| e.note)
                    .find(|n| n.contains(child) && n.contains(why))
            },
        )
        .await
    }

    /// The tenant deletes the claim: it goes (nothing holds it) and `target` stays.
    async fn delete_and_keep(&self, claim: &str, target: &Api<DynamicObject>, name: &str) {
        let before = target.get(name).await.expect("the target exists");
        self.claims
            .delete(claim, &DeleteParams::default())
            .await
            .expect("the tenant deletes its claim");
        // Lien releases a claim in the decision that would otherwise delete its children: once
        // the claim is gone, that decision was made.
        wait_gone(&self.claims, claim, DEADLINE).await;
        let after = target.get(name).await.expect("the target is still there");
        assert_eq!(after.uid(), before.uid());
        assert!(
            after.metadata.deletion_timestamp.is_none(),
            "Lien started deleting {name}"
        );
    }
}

fn rbac() -> Options {
    Options {
        authorization: Authorization::Rbac,
        ..Options::default()
    }
}

/// The scenario, and each way a tenant could point a claim at what it may not delete:
/// another namespace's ConfigMap (a kind outside the rule), a cluster-scoped composite that
/// does not name the claim, one that names another claim, a namespaced child of a listed kind
/// in another namespace. None is deleted; each is named on the claim and in the rule's status.
/// A composite that names the claim back is deleted (the rule still works).
#[tokio::test]
async fn a_tenant_cannot_make_lien_delete_what_the_rule_does_not_bind() {
    let mut env = Env::start_with("cascade-rbac", rbac()).await;
    let t = tenancy(&mut env).await;
    let system = t.system.clone();
    let v = format!("{}/v1", t.group);

    // The tenant itself may not delete any of the targets.
    let tenant_cms: Api<DynamicObject> = Api::namespaced_with(
        t.tenant.clone(),
        &system,
        &ar("", "ConfigMap", "configmaps"),
    );
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "crown-jewels", "namespace": system}, "data": {"k": "v"}}))
        .await;
    let (code, _) = api_error(
        tenant_cms
            .delete("crown-jewels", &DeleteParams::default())
            .await
            .expect_err("the tenant may not delete it"),
    );
    assert_eq!(code, 403);

    let unbound = env.cluster_name("unbound");
    env.create(
        json!({"apiVersion": v, "kind": "Composite", "metadata": {"name": unbound},
        "spec": {}}),
    )
    .await;
    let others = env.cluster_name("others");
    env.create(
        json!({"apiVersion": v, "kind": "Composite", "metadata": {"name": others},
        "spec": {"claimRef": t.claim_ref(&env.ns, "someone-elses")}}),
    )
    .await;
    env.create(json!({"apiVersion": v, "kind": "Bucket",
        "metadata": {"name": "data", "namespace": system}, "spec": {}}))
        .await;
    // Created after its claim, as Crossplane makes a claim's composite (one older than its
    // claim is never deleted through a uid-less claimRef: issue 28, finding 4).
    let bound = env.cluster_name("bound");
    let tenant_composites: Api<DynamicObject> =
        Api::all_with(t.tenant.clone(), &ar(&t.group, "Composite", "composites"));
    assert_eq!(
        api_error(
            tenant_composites
                .delete(&bound, &DeleteParams::default())
                .await
                .expect_err("the tenant may not delete composites")
        )
        .0,
        403
    );

    let ns = env.ns.clone();
    let cases = [
        (
            "jewels",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "crown-jewels", "namespace": system}),
            format!("ConfigMap {system}/crown-jewels"),
            "spec.childKinds",
        ),
        (
            "unbound",
            json!({"apiVersion": v, "kind": "Composite", "name": unbound}),
            format!("Composite {unbound}"),
            "does not name this parent back",
        ),
        (
            "others",
            json!({"apiVersion": v, "kind": "Composite", "name": others}),
            format!("Composite {others}"),
            "does not name this parent back",
        ),
        (
            "bucket",
            json!({"apiVersion": v, "kind": "Bucket", "name": "data", "namespace": system}),
            format!("Bucket {system}/data"),
            "does not name this parent back",
        ),
    ];
    for (claim, target, _, _) in &cases {
        t.claim(&env, claim, target.clone()).await;
    }
    t.claim(
        &env,
        "mine",
        json!({"apiVersion": v, "kind": "Composite", "name": bound}),
    )
    .await;
    env.create(
        json!({"apiVersion": v, "kind": "Composite", "metadata": {"name": bound},
        "spec": {"claimRef": t.claim_ref(&env.ns, "mine")}}),
    )
    .await;
    for (claim, _, child, why) in &cases {
        t.adopted(claim).await;
        let note = t.warned(&env, claim, child, why).await;
        assert!(note.contains("is not deleted"), "{note}");
    }
    // The rule's status names them too.
    let rules: Api<lien_api::CascadeRule> = Api::all(env.client.clone());
    let status = wait_for(
        "the rule's status to list the refusals",
        DEADLINE,
        || async {
            let s = rules.get(&t.rule).await.ok()?.status?;
            (s.refused_children == cases.len() as u64).then_some(s)
        },
    )
    .await;
    for (claim, _, child, _) in &cases {
        assert!(
            status
                .refused
                .iter()
                .any(|r| r.parent_name == *claim && r.parent_namespace == ns && r.child == *child),
            "{child} for {claim} in {:?}",
            status.refused
        );
    }
    assert!(
        status
            .refused
            .iter()
            .any(|r| r.parent_name == "jewels" && r.reason == "KindNotAllowed")
    );

    let configmaps = Api::namespaced_with(
        env.client.clone(),
        &system,
        &ar("", "ConfigMap", "configmaps"),
    );
    let buckets = Api::namespaced_with(
        env.client.clone(),
        &system,
        &ar(&t.group, "Bucket", "buckets"),
    );
    t.delete_and_keep("jewels", &configmaps, "crown-jewels")
        .await;
    t.delete_and_keep("unbound", &t.composites, &unbound).await;
    t.delete_and_keep("others", &t.composites, &others).await;
    t.delete_and_keep("bucket", &buckets, "data").await;

    // The bound composite goes with its claim.
    t.adopted("mine").await;
    t.claims
        .delete("mine", &DeleteParams::default())
        .await
        .expect("the tenant deletes its claim");
    wait_gone(&t.composites, &bound, DEADLINE).await;
    wait_gone(&t.claims, "mine", DEADLINE).await;
    // Nothing else went meanwhile.
    for (api, name) in [
        (&t.composites, unbound.as_str()),
        (&t.composites, others.as_str()),
        (&configmaps, "crown-jewels"),
        (&buckets, "data"),
    ] {
        assert!(
            api.get_opt(name).await.expect("GET").is_some(),
            "{name} went"
        );
    }
    env.finish().await;
}

/// Claims written while Lien was down: Lien decides from the child's back reference when the
/// claim is deleted, not from when the claim was written, so a claim created with Lien down
/// and naming an unbound composite deletes nothing, and one naming a bound composite still
/// deletes it.
#[tokio::test]
async fn a_claim_written_while_lien_was_down_deletes_only_what_names_it_back() {
    let mut env = Env::start_with("cascade-rbac-down", rbac()).await;
    if !env.is_local() {
        // Stopping Lien needs the local sandbox.
        env.finish().await;
        return;
    }
    let t = tenancy(&mut env).await;
    let v = format!("{}/v1", t.group);
    let unbound = env.cluster_name("unbound");
    env.create(
        json!({"apiVersion": v, "kind": "Composite", "metadata": {"name": unbound},
        "spec": {}}),
    )
    .await;
    let bound = env.cluster_name("bound");
    assert!(env.stop_lien().await, "Lien was running");
    t.claim(
        &env,
        "forged",
        json!({"apiVersion": v, "kind": "Composite", "name": unbound}),
    )
    .await;
    t.claim(
        &env,
        "bound",
        json!({"apiVersion": v, "kind": "Composite", "name": bound}),
    )
    .await;
    // Its composite, made for it (after it, as Crossplane does).
    env.create(
        json!({"apiVersion": v, "kind": "Composite", "metadata": {"name": bound},
        "spec": {"claimRef": t.claim_ref(&env.ns, "bound")}}),
    )
    .await;
    // Written by hand while Lien was away: a record claiming the composite was recorded and
    // the deletion had started. The record is an annotation the tenant can write; it binds
    // nothing.
    let composite_uid = t.composites.get(&unbound).await.expect("GET").uid();
    let record = json!({"deleting": "Background", "children": [{"apiVersion": v,
        "kind": "Composite", "name": unbound, "uid": composite_uid}]});
    t.claims
        .patch(
            "forged",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations":
                {"lien.dev/cascade-children": record.to_string()}}})),
        )
        .await
        .expect("the tenant writes the annotation");
    env.start_lien().await;
    t.adopted("forged").await;
    t.adopted("bound").await;
    t.warned(
        &env,
        "forged",
        &format!("Composite {unbound}"),
        "does not name this parent back",
    )
    .await;
    t.delete_and_keep("forged", &t.composites, &unbound).await;
    t.claims
        .delete("bound", &DeleteParams::default())
        .await
        .expect("the tenant deletes its claim");
    wait_gone(&t.composites, &bound, DEADLINE).await;
    wait_gone(&t.claims, "bound", DEADLINE).await;
    assert!(t.composites.get_opt(&unbound).await.expect("GET").is_some());
    env.finish().await;
}

/// The rule's author consents to the child kinds: a user who may delete every Claim but not
/// every Composite cannot create a rule that deletes Composites (403 naming
/// `spec.childKinds[0]`), and can once granted.
#[tokio::test]
async fn a_cascade_rule_needs_its_author_to_be_allowed_to_delete_its_child_kinds() {
    let mut env = Env::start_with("cascade-rbac-author", rbac()).await;
    let group = format!("{}.example.org", env.ns);
    crd(&mut env, &group, "Claim", "claims", true).await;
    crd(&mut env, &group, "Composite", "composites", false).await;
    let author = format!("author-{}", env.ns);
    let role = |name: &str, resources: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{"apiGroups": [group], "resources": resources, "verbs": ["delete"]},
                      {"apiGroups": ["lien.dev"], "resources": ["cascaderules"],
                       "verbs": ["create", "get"]}]})
    };
    let binding = |name: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": author}]})
    };
    let claims_role = env.cluster_name("claims-deleter");
    env.create(role(&claims_role, json!(["claims"]))).await;
    env.create(binding(&claims_role)).await;
    let client = env.client_as(&author, &["system:authenticated"]).await;
    let rule = json!({"apiVersion": "lien.dev/v1alpha1", "kind": "CascadeRule",
        "metadata": {"name": env.cluster_name("by-author")},
        "spec": {"parent": {"apiVersion": format!("{group}/v1"), "kind": "Claim"},
                 "children": "[self.spec.resourceRef]",
                 "childKinds": [{"apiVersion": format!("{group}/v1"), "kind": "Composite",
                                 "backReference": "self.spec.claimRef"}]}});
    let rules: Api<DynamicObject> = Api::all_with(client, &api_resource(&rule));
    let create = || async {
        rules
            .create(
                &PostParams::default(),
                &serde_json::from_value(rule.clone()).expect("rule"),
            )
            .await
    };
    let message = wait_for(
        "the author's rule to be refused by Lien",
        DEADLINE,
        || async {
            match create().await {
                Err(e) => {
                    let (code, m) = api_error(e);
                    (code == 403 && m.contains("spec.childKinds[0]")).then_some(m)
                }
                Ok(_) => {
                    panic!("a rule deleting Composites was admitted for an author who may not")
                }
            }
        },
    )
    .await;
    for part in [
        format!("user {author:?} may not delete every object of composites.{group}"),
        "(or remove the kind from spec.childKinds)".to_owned(),
    ] {
        assert!(message.contains(&part), "{part:?} in {message}");
    }
    let composites_role = env.cluster_name("composites-deleter");
    env.create(role(&composites_role, json!(["composites"])))
        .await;
    env.create(binding(&composites_role)).await;
    let created = wait_for("the rule to be admitted once granted", DEADLINE, || async {
        create().await.ok()
    })
    .await;
    Api::<lien_api::CascadeRule>::all(env.client.clone())
        .delete(&created.name_any(), &DeleteParams::default())
        .await
        .expect("the rule is removed");
    env.finish().await;
}

/// The scenario as a user types it, on `examples/cascade-rule.yaml` with the real
/// kubectl: the example works as its comments say (the claim's composite goes with it), and a
/// tenant who may only manage DatabaseClaims in its namespace creates a claim naming
/// `ConfigMap <system>/crown-jewels` (which `kubectl auth can-i` says it may not delete) and
/// deletes the claim: crown-jewels stays, and the claim carried a Warning naming it and why.
#[tokio::test]
async fn the_example_cascade_rule_deletes_its_composite_and_never_the_crown_jewels() {
    let mut env = Env::start_with("cascade-example", rbac()).await;
    if !env.is_local() {
        // The example's names are fixed (CRDs, a claim in `default`): a sandbox of its own only.
        env.finish().await;
        return;
    }
    let dir = std::env::temp_dir().join(format!("lien-{}", env.ns));
    std::fs::create_dir_all(&dir).expect("temp dir");
    env.write_kubeconfig(&dir.join("kubeconfig"));
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/cascade-rule.yaml"
    );
    // "twice: the CRDs must be established first"
    wait_for(
        "kubectl apply -f examples/cascade-rule.yaml",
        DEADLINE,
        || async {
            let (ok, _, _) = kubectl(&dir, &["apply", "-f", example]).await;
            ok.then_some(())
        },
    )
    .await;
    let claim_finalizers = || async {
        kubectl(
            &dir,
            &[
                "get",
                "databaseclaim",
                "my-db",
                "-n",
                "default",
                "-o",
                "jsonpath={.metadata.finalizers}",
            ],
        )
        .await
        .1
    };
    wait_for("the example's claim to be adopted", DEADLINE, || async {
        claim_finalizers()
            .await
            .contains(lien_api::CASCADE_FINALIZER)
            .then_some(())
    })
    .await;

    // The tenant: DatabaseClaims in its namespace, nothing else.
    let ns = env.ns.clone();
    let system = env.another_namespace_name("system");
    env.namespace(&system).await;
    env.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "crown-jewels", "namespace": system}, "data": {"k": "v"}}))
        .await;
    let tenant = format!("tenant-{ns}");
    grant(
        &mut env,
        &ns,
        "claims",
        &tenant,
        json!([{"apiGroups": ["example.org"], "resources": ["databaseclaims"],
                "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]}]),
    )
    .await;
    let as_tenant = format!("--as={tenant}");
    let (_, can, _) = kubectl(
        &dir,
        &[
            "auth",
            "can-i",
            "delete",
            "configmaps",
            "-n",
            &system,
            &as_tenant,
        ],
    )
    .await;
    assert_eq!(can.trim(), "no");
    let claim = dir.join("claim.yaml");
    std::fs::write(
        &claim,
        format!(
            "apiVersion: example.org/v1\nkind: DatabaseClaim\nmetadata: {{name: sneaky, namespace: {ns}}}\n\
             spec:\n  resourceRef: {{apiVersion: v1, kind: ConfigMap, name: crown-jewels, namespace: {system}}}\n"
        ),
    )
    .expect("claim file");
    let claim = claim.to_str().expect("utf-8").to_owned();
    wait_for("the tenant's claim to be created", DEADLINE, || async {
        let (ok, _, _) = kubectl(&dir, &["apply", "-f", &claim, &as_tenant]).await;
        ok.then_some(())
    })
    .await;
    let note = wait_for(
        "a Warning on the claim naming crown-jewels",
        DEADLINE,
        || async {
            env.events("DatabaseClaim", "sneaky", "CascadeChildNotAllowed")
                .await
                .into_iter()
                .filter_map(|e| e.note)
                .find(|n| n.contains(&format!("ConfigMap {system}/crown-jewels")))
        },
    )
    .await;
    assert!(note.contains("spec.childKinds"), "{note}");
    let (ok, _, err) = kubectl(
        &dir,
        &["delete", "databaseclaim", "sneaky", "-n", &ns, &as_tenant],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(
        &dir,
        &[
            "get",
            "configmap",
            "crown-jewels",
            "-n",
            &system,
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    )
    .await;
    assert!(ok, "crown-jewels is gone: {err}");
    assert_eq!(out, "", "crown-jewels is being deleted");

    // The example's own claim: "kubectl delete databaseclaim my-db --wait=false", then
    // "kubectl get databaseclaim,xdatabase" finds nothing.
    let (ok, _, err) = kubectl(
        &dir,
        &[
            "delete",
            "databaseclaim",
            "my-db",
            "-n",
            "default",
            "--wait=false",
        ],
    )
    .await;
    assert!(ok, "{err}");
    wait_for(
        "the claim and its composite to be gone",
        DEADLINE,
        || async {
            let (ok, out, _) = kubectl(
                &dir,
                &["get", "databaseclaim,xdatabase", "-A", "-o", "name"],
            )
            .await;
            (ok && out.trim().is_empty()).then_some(())
        },
    )
    .await;
    let (_, out, _) = kubectl(&dir, &["get", "configmap", "crown-jewels", "-n", &system]).await;
    assert!(out.contains("crown-jewels"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
    env.finish().await;
}

/// Issue 28, finding 4: names are reused. A composite left over from an earlier claim `db`
/// still names `db` in its `claimRef`, which carries no uid (as Crossplane writes it). The
/// tenant's new claim `db` naming that composite must not make Lien delete it: it is older
/// than the claim, so nothing shows it is this claim's. The Warning and the rule's status say
/// so, and the rule's status warns that its back reference yields no uid.
#[tokio::test]
async fn a_new_claim_reusing_a_name_does_not_delete_the_old_claims_leftover() {
    let mut env = Env::start_with("cascade-rbac-reuse", rbac()).await;
    let t = tenancy(&mut env).await;
    let v = format!("{}/v1", t.group);
    let leftover = env.cluster_name("leftover");
    let old = env
        .create(
            json!({"apiVersion": v, "kind": "Composite", "metadata": {"name": leftover},
            "spec": {"claimRef": t.claim_ref(&env.ns, "db")}}),
        )
        .await;
    // creationTimestamp has a second's resolution: the new claim is made in a later second.
    let made = old
        .metadata
        .creation_timestamp
        .clone()
        .expect("creationTimestamp")
        .0;
    wait_for("a later second", DEADLINE, || async {
        (jiff::Timestamp::now().as_second() > made.as_second()).then_some(())
    })
    .await;
    t.claim(
        &env,
        "db",
        json!({"apiVersion": v, "kind": "Composite", "name": leftover}),
    )
    .await;
    t.adopted("db").await;
    let note = t
        .warned(
            &env,
            "db",
            &format!("Composite {leftover}"),
            "created before this parent",
        )
        .await;
    assert!(note.contains("is not deleted"), "{note}");
    let rules: Api<lien_api::CascadeRule> = Api::all(env.client.clone());
    let warning = wait_for("the rule's status warns", DEADLINE, || async {
        let s = rules.get(&t.rule).await.ok()?.status?;
        s.conditions
            .into_iter()
            .find(|c| c.type_ == "BackReferenceUID" && c.status == "False")
    })
    .await;
    assert!(
        warning
            .message
            .contains("spec.childKinds[0].backReference (Composite) yields no uid"),
        "{}",
        warning.message
    );
    t.delete_and_keep("db", &t.composites, &leftover).await;
    env.finish().await;
}

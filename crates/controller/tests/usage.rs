//! Usages against the sandbox: labels, selectors, finalizers, owners, status, cycles.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use lien_api::{USAGE_FINALIZER, Usage};
use serde_json::json;

#[tokio::test]
async fn reason_only_usage_labels_its_object_and_goes_at_once_when_deleted() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let cm = create_cm(&client, "default", "db", json!({})).await;
    protect_cm(&client, "default", "protect-db", "db", "production data").await;
    wait_label(&client, "default", "db", true).await;
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    let u = wait_for("status Ready and InUse", DEADLINE, || async {
        let u = usages.get("protect-db").await.ok()?;
        (condition(&u, "Ready") == Some(("True".into(), "Resolved".into()))
            && condition(&u, "InUse") == Some(("True".into(), "InUse".into())))
        .then_some(u)
    })
    .await;
    let status = u.status.clone().expect("status");
    let of = status.of.expect("of matched");
    assert_eq!(of.count, 1);
    assert_eq!(of.objects[0].uid, cm.metadata.uid.clone().expect("uid"));
    assert_eq!(status.observed_generation, u.metadata.generation);
    // Lien's finalizer, so that deleting its namespace does not lift it (issue 27)...
    wait_for("the Usage's finalizer", DEADLINE, || async {
        let u = usages.get("protect-db").await.ok()?;
        u.metadata
            .finalizers?
            .iter()
            .any(|f| f == USAGE_FINALIZER)
            .then_some(())
    })
    .await;
    // ...which Lien removes at once when a person deletes it: the Usage goes, its protection
    // and the label with it.
    usages
        .delete("protect-db", &DeleteParams::default())
        .await
        .expect("delete usage");
    wait_for("the Usage to go", DEADLINE, || async {
        usages
            .get_opt("protect-db")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    wait_label(&client, "default", "db", false).await;
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn selector_matches_every_object_continuously() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    for n in ["a", "b", "c"] {
        create_cm(&client, "default", n, json!({"tier": "db"})).await;
    }
    create_cm(&client, "default", "other", json!({"tier": "web"})).await;
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "dbs"}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceSelector": {"matchLabels": {"tier": "db"}}},
            "reason": "databases"}}),
    )
    .await;
    for n in ["a", "b", "c"] {
        wait_label(&client, "default", n, true).await;
    }
    // A new matching object is protected too.
    create_cm(&client, "default", "d", json!({"tier": "db"})).await;
    wait_label(&client, "default", "d", true).await;
    // Relabelling one takes it out of the selection, and its label goes.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "retired"}}})),
    )
    .await
    .expect("relabel");
    wait_label(&client, "default", "b", false).await;
    let other = cms.get("other").await.expect("other");
    assert!(!in_use(&other));
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    wait_for("status lists a, c, d", DEADLINE, || async {
        let u = usages.get("dbs").await.ok()?;
        let of = u.status?.of?;
        let names: Vec<String> = of.objects.iter().map(|o| o.name.clone()).collect();
        (of.count == 3 && names == ["a", "c", "d"]).then_some(())
    })
    .await;
    // Removing the label by hand does not stick: it is derived from the index.
    cms.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"lien.dev/in-use": null}}})),
    )
    .await
    .expect("strip label");
    wait_label(&client, "default", "a", true).await;
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn match_controller_ref_selects_only_siblings() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let parent = create_cm(&client, "default", "parent", json!({})).await;
    let stranger = create_cm(&client, "default", "stranger", json!({})).await;
    let owner = |cm: &ConfigMap| {
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": cm.metadata.name,
                "uid": cm.metadata.uid, "controller": true}])
    };
    create_cm_with(
        &client,
        "default",
        "sibling",
        json!({"labels": {"app": "x"}, "ownerReferences": owner(&parent)}),
    )
    .await;
    create_cm_with(
        &client,
        "default",
        "foreign",
        json!({"labels": {"app": "x"}, "ownerReferences": owner(&stranger)}),
    )
    .await;
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "composed", "ownerReferences": owner(&parent)}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap",
                   "resourceSelector": {"matchLabels": {"app": "x"}, "matchControllerRef": true}},
            "reason": "composed together"}}),
    )
    .await;
    wait_label(&client, "default", "sibling", true).await;
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    wait_for("status counts one match", DEADLINE, || async {
        let u = usages.get("composed").await.ok()?;
        (u.status?.of?.count == 1).then_some(())
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(!in_use(&cms.get("foreign").await.expect("foreign")));
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn usage_with_by_holds_a_finalizer_is_owned_and_goes_with_its_user() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    create_cm(&client, "default", "cluster", json!({})).await;
    let release = create_cm(&client, "default", "release", json!({})).await;
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "release-uses-cluster"}, "spec": {
            "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "cluster"}},
            "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": "release"}}}}),
    )
    .await;
    wait_label(&client, "default", "cluster", true).await;
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    let release_uid = release.metadata.uid.clone().expect("uid");
    // The finalizer and owner reference are one write, the status another: wait for both.
    let by = wait_for(
        "finalizer, owner reference and status",
        DEADLINE,
        || async {
            let u = usages.get("release-uses-cluster").await.ok()?;
            let fin = u.metadata.finalizers.clone().unwrap_or_default();
            let owners = u.metadata.owner_references.clone().unwrap_or_default();
            let by = u.status.and_then(|s| s.by)?;
            (fin.iter().any(|f| f == USAGE_FINALIZER)
                && owners
                    .iter()
                    .any(|o| o.uid == release_uid && o.controller != Some(true)))
            .then_some(by)
        },
    )
    .await;
    assert_eq!(by.count, 1);
    assert_eq!(by.objects[0].uid, release_uid);
    // The user goes: the garbage collector deletes the usage, the controller releases its
    // finalizer, and the label goes.
    Api::<ConfigMap>::namespaced(client.clone(), "default")
        .delete("release", &DeleteParams::default())
        .await
        .expect("delete release");
    wait_for("the usage to be gone", DEADLINE, || async {
        matches!(usages.get_opt("release-uses-cluster").await, Ok(None)).then_some(())
    })
    .await;
    wait_label(&client, "default", "cluster", false).await;
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn objects_that_use_each_other_are_a_cycle() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    create_cm(&client, "default", "a", json!({})).await;
    create_cm(&client, "default", "b", json!({})).await;
    for (name, of, by) in [("a-uses-b", "b", "a"), ("b-uses-a", "a", "b")] {
        create_usage(
            &client,
            "default",
            json!({"metadata": {"name": name}, "spec": {
                "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": of}},
                "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": by}}}}),
        )
        .await;
    }
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    for name in ["a-uses-b", "b-uses-a"] {
        wait_for(&format!("{name} Ready=False Cycle"), DEADLINE, || async {
            let u = usages.get(name).await.ok()?;
            (condition(&u, "Ready") == Some(("False".into(), "Cycle".into()))).then_some(())
        })
        .await;
    }
    ctl.stop().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn unknown_kind_and_missing_object_are_reported() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "ghost"}, "spec": {
            "of": {"apiVersion": "nope.example.io/v1", "kind": "Ghost", "resourceRef": {"name": "x"}},
            "reason": "r"}}),
    )
    .await;
    protect_cm(&client, "default", "missing", "nothing", "r").await;
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    for (name, reason) in [("ghost", "UnknownKind"), ("missing", "NotFound")] {
        wait_for(
            &format!("{name} Ready=False {reason}"),
            DEADLINE,
            || async {
                let u = usages.get(name).await.ok()?;
                (condition(&u, "Ready") == Some(("False".into(), reason.into()))).then_some(())
            },
        )
        .await;
    }
    ctl.stop().await;
    sandbox.shutdown().await;
}

/// The controller restarts after the garbage collector stripped the Usage's reference to its
/// (deleted) parent: the UID recorded in status keeps `matchControllerRef` selecting the
/// parent's children, so the used object stays protected while its user exists.
#[tokio::test]
async fn a_restarted_controller_keeps_selecting_by_the_recorded_controller() {
    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let parent = create_cm(&client, "default", "parent", json!({})).await;
    let owned = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
        "uid": parent.metadata.uid, "controller": true}]);
    for (name, role) in [("used", "used"), ("using", "using")] {
        create_cm_with(
            &client,
            "default",
            name,
            json!({"labels": {"role": role}, "ownerReferences": owned}),
        )
        .await;
    }
    let selector = |role: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "resourceSelector": {"matchLabels": {"role": role}, "matchControllerRef": true}})
    };
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "composed", "ownerReferences": owned},
               "spec": {"of": selector("used"), "by": selector("using")}}),
    )
    .await;
    wait_label(&client, "default", "used", true).await;
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    let recorded = wait_for("the controller UID in status", DEADLINE, || async {
        usages.get("composed").await.ok()?.status?.controller_uid
    })
    .await;
    assert_eq!(Some(recorded), parent.metadata.uid);
    ctl.stop().await;
    // While Lien is down, the parent's reference goes from the Usage (as the garbage collector
    // strips it when the parent is deleted and Lien's owner, the user, remains).
    let u = usages.get("composed").await.expect("the usage");
    let kept: Vec<_> = u
        .metadata
        .owner_references
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o.controller != Some(true))
        .collect();
    usages
        .patch(
            "composed",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"ownerReferences": kept}})),
        )
        .await
        .expect("reference removed");
    let ctl = start(&client, test_config());
    // A second child of the parent appears: the restarted controller counts it with the first,
    // which it can only do by the UID recorded in status.
    create_cm_with(
        &client,
        "default",
        "using-2",
        json!({"labels": {"role": "using"}, "ownerReferences": owned}),
    )
    .await;
    let u = wait_for("both users counted after the restart", DEADLINE, || async {
        let u = usages.get("composed").await.ok()?;
        (u.status.as_ref()?.by.as_ref()?.count == 2).then_some(u)
    })
    .await;
    assert_eq!(condition(&u, "Ready").map(|(s, _)| s), Some("True".into()));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    assert!(
        in_use(&cms.get("used").await.expect("used")),
        "still protected"
    );
    ctl.stop().await;
    sandbox.shutdown().await;
}

/// Lien's owner-reference write carries the resourceVersion it decided on: when the garbage
/// collector (or anyone) changed the references meanwhile, the write is refused (409) instead
/// of undoing that change.
#[tokio::test]
async fn the_owner_reference_write_never_clobbers_a_concurrent_change() {
    let (sandbox, client) = sandbox().await;
    let user = create_cm(&client, "default", "user", json!({})).await;
    let other = create_cm(&client, "default", "other", json!({})).await;
    let u = create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "u", "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other",
                 "uid": other.metadata.uid}]},
               "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                               "resourceRef": {"name": "other"}},
                        "by": {"apiVersion": "v1", "kind": "ConfigMap",
                               "resourceRef": {"name": "user"}}}}),
    )
    .await;
    // Someone strips the reference after Lien read the Usage.
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    usages
        .patch(
            "u",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"ownerReferences": null}})),
        )
        .await
        .expect("stripped");
    let stale = lien_controller::desired::UsageMetaWrite {
        source: lien_core::Source::usage("default", "u"),
        uid: u.metadata.uid.clone().expect("uid"),
        resource_version: u.metadata.resource_version.clone(),
        finalizers: vec![],
        owner_references: vec![
            u.metadata.owner_references.clone().expect("owners")[0].clone(),
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "user".into(),
                uid: user.metadata.uid.clone().expect("uid"),
                ..Default::default()
            },
        ],
        lien_owners: [user.metadata.uid.clone().expect("uid")].into(),
    };
    let writer = lien_controller::writer::Writer::new(client.clone(), DEADLINE);
    let err = writer.usage_meta(&stale).await.expect_err("a stale write");
    assert!(err.is_stale(), "{err}");
    let now = usages.get("u").await.expect("u");
    assert_eq!(now.metadata.owner_references, None, "the change stands");
    sandbox.shutdown().await;
}

/// A used kind's CRD is deleted (its objects with it) and made again: while it is away the
/// kind is not served and the Usage says so (`UnknownKind`, not a `NotFound` that a retrying
/// watch would leave); once it is back, its objects are listed afresh at once and the new
/// object is in use — at once, not after a watch backoff that grew while the kind was away.
#[tokio::test]
async fn a_used_kind_whose_crd_is_deleted_is_unknown_until_its_crd_is_made_again() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{DynamicObject, PostParams};
    use kube::core::{ApiResource, GroupVersionKind};

    let (sandbox, client) = sandbox().await;
    let ctl = start(&client, test_config());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.t.example"},
        "spec": {"group": "t.example", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd");
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("t.example", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "t.example/v1", "kind": "Widget", "metadata": {"name": "w1"}
    }))
    .expect("widget");
    let usages: Api<Usage> = Api::namespaced(client.clone(), "default");
    let ready = |reason: &'static str| {
        let usages = usages.clone();
        async move {
            wait_for(&format!("the Usage Ready {reason}"), DEADLINE, || async {
                let u = usages.get("widget-in-use").await.ok()?;
                let want = if reason == "Resolved" {
                    "True"
                } else {
                    "False"
                };
                (condition(&u, "Ready") == Some((want.into(), reason.into()))).then_some(())
            })
            .await
        }
    };
    let in_use = || async {
        wait_for("the widget's in-use label", DEADLINE, || async {
            let w = widgets.get("w1").await.ok()?;
            (w.metadata.labels?.get(lien_api::IN_USE_LABEL)? == "true").then_some(())
        })
        .await
    };
    let make = || async {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("crd created");
        wait_for("widgets to be served", DEADLINE, || async {
            widgets.list(&Default::default()).await.ok().map(drop)
        })
        .await;
        widgets
            .create(&PostParams::default(), &widget)
            .await
            .expect("widget created");
    };
    make().await;
    create_usage(
        &client,
        "default",
        json!({"metadata": {"name": "widget-in-use"}, "spec": {
            "of": {"apiVersion": "t.example/v1", "kind": "Widget", "resourceRef": {"name": "w1"}},
            "reason": "r"}}),
    )
    .await;
    ready("Resolved").await;
    in_use().await;
    for _round in 0..3 {
        crds.delete("widgets.t.example", &DeleteParams::default())
            .await
            .expect("crd deleted");
        wait_for("the CRD to go", DEADLINE, || async {
            crds.get_opt("widgets.t.example")
                .await
                .ok()?
                .is_none()
                .then_some(())
        })
        .await;
        ready("UnknownKind").await;
        make().await;
        ready("Resolved").await;
        in_use().await;
    }
    ctl.stop().await;
    sandbox.shutdown().await;
}

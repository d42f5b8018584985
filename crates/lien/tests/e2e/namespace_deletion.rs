//! Issue 27: a lien survives `kubectl delete namespace`. A reason-only Usage in the namespace of
//! the object it protects — the most common way people lose PVCs — makes the Namespace DELETE
//! refuse up front, naming the object, its Usage, the reason and the command that lifts it. If
//! the namespace is deleted anyway (Lien was down; the `namespace-contents.lien.dev` hook fails
//! open), the namespace controller's DELETE of the Usage leaves it `Terminating` under Lien's
//! finalizer, the object is not deleted, the namespace stays `Terminating`, and Lien says why on
//! the Namespace: an Event and a condition `kubectl describe namespace` shows. Each hint is
//! followed as printed, and the object (then the namespace) goes. Typed as a user would, with
//! kubectl.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use lien_controller::NAMESPACE_HELD_REASON;

use super::harness::{
    DEADLINE, Env, Kubectl, run_hint, wait_for, wait_gone, wait_guarded, wait_label,
};

/// A ConfigMap `data` and the reason-only Usage `keep-data` protecting it, in `ns`.
fn manifest(ns: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: data, namespace: {ns}}}\ndata: {{orders: '42'}}\n---\n\
         apiVersion: lien.dev/v1alpha1\nkind: Usage\nmetadata: {{name: keep-data, namespace: {ns}}}\n\
         spec:\n  of: {{apiVersion: v1, kind: ConfigMap, resourceRef: {{name: data}}}}\n  reason: 'never delete: customer data'\n"
    )
}

/// The first command between backquotes after `marker` in `text`.
fn quoted_after(text: &str, marker: &str) -> String {
    let rest = &text[text
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in:\n{text}"))
        + marker.len()..];
    let start = rest.find('`').expect("an opening backquote") + 1;
    let end = start + rest[start..].find('`').expect("a closing backquote");
    rest[start..end].to_owned()
}

/// `ns` with the protected ConfigMap, applied with kubectl; waits until Lien labelled it and
/// put its finalizer on the Usage.
async fn vault(env: &mut Env, k: &Kubectl) -> String {
    let ns = env.another_namespace_name("vault");
    env.namespace(&ns).await;
    let (ok, out, err) = k
        .run_with_stdin(&["apply", "-f", "-"], Some(&manifest(&ns)))
        .await;
    assert!(ok, "{out}{err}");
    wait_label(
        &Api::<ConfigMap>::namespaced(env.client.clone(), &ns),
        "data",
        true,
    )
    .await;
    let usages: Api<lien_api::Usage> = Api::namespaced(env.client.clone(), &ns);
    wait_guarded(&usages, "keep-data").await;
    ns
}

async fn namespace_gone(env: &Env, k: &Kubectl, ns: &str) {
    let namespaces = Api::<Namespace>::all(env.client.clone());
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while namespaces.get_opt(ns).await.expect("get").is_some() {
        if tokio::time::Instant::now() > end {
            let (_, status, _) = k.run(&["get", "namespace", ns, "-o", "yaml"]).await;
            let (_, left, _) = k
                .run(&["get", "configmaps,usages", "-n", ns, "-o", "yaml"])
                .await;
            panic!("namespace {ns} still there after 60 s:\n{status}\n{left}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn deleting_a_namespace_is_refused_while_a_lien_holds_an_object_in_it() {
    let mut env = Env::start("ns-lien").await;
    let k = Kubectl::new(&env);
    let ns = vault(&mut env, &k).await;

    let (ok, _, err) = k.run(&["delete", "configmap", "data", "-n", &ns]).await;
    assert!(!ok && err.contains("(Conflict)"), "{err}");

    // The Namespace DELETE: refused up front, in three lines, naming the object, the Usage, the
    // reason and the command that lifts it.
    let (ok, _, err) = k.run(&["delete", "namespace", &ns, "--wait=false"]).await;
    assert!(!ok, "the namespace deletion is refused");
    assert!(
        err.contains(&format!(
            "cannot delete Namespace {ns}: a lien holds what is in it: ConfigMap {ns}/data is \
             protected (Usage {ns}/keep-data: never delete: customer data).\n"
        )),
        "{err}"
    );
    let lift = quoted_after(&err, "To free it now, lift it: ");
    assert_eq!(
        lift,
        format!("kubectl delete usage.lien.dev/keep-data -n {ns}")
    );
    let namespace = Api::<Namespace>::all(env.client.clone())
        .get(&ns)
        .await
        .expect("the namespace is still there");
    assert!(
        namespace.metadata.deletion_timestamp.is_none(),
        "refused up front: not Terminating"
    );
    let data = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    assert!(data.get_opt("data").await.expect("get").is_some());

    // `kubectl lien why namespace/NS` lists it too, with the same command.
    let (ok, why, err) = k.run(&["lien", "why", &format!("namespace/{ns}")]).await;
    assert!(ok, "{why}{err}");
    assert!(
        why.contains(&format!(
            "1. ConfigMap {ns}/data is protected (Usage {ns}/keep-data: never delete: customer data)\n     to do: {lift}\n"
        )),
        "{why}"
    );

    // The hint, as printed: the protection goes, and the namespace (with the object) with it.
    run_hint(&k, &lift).await;
    wait_for("the namespace deletion to go through", DEADLINE, || async {
        let (ok, _, _) = k.run(&["delete", "namespace", &ns, "--wait=false"]).await;
        ok.then_some(())
    })
    .await;
    namespace_gone(&env, &k, &ns).await;
    drop(k);
    env.finish().await;
}

/// The namespace is deleted while Lien is down (its namespace hook fails open): the lien holds
/// anyway. What the namespace controller's DELETE of the Usage does: the Usage stays
/// `Terminating` (Lien's finalizer) and keeps protecting; the object's DELETE is refused.
#[tokio::test]
async fn a_namespace_deleted_while_lien_is_down_keeps_its_protected_object() {
    let mut env = Env::start("ns-lien-down").await;
    if !env.is_local() {
        // Lien cannot be stopped on an external cluster from here.
        env.finish().await;
        return;
    }
    let k = Kubectl::new(&env);
    let ns = vault(&mut env, &k).await;
    assert!(env.stop_lien().await);
    let (ok, out, err) = k.run(&["delete", "namespace", &ns, "--wait=false"]).await;
    assert!(
        ok,
        "with Lien down the namespace hook fails open: {out}{err}"
    );

    // The namespace controller deletes the Usage: it stays, Terminating, under Lien's finalizer.
    let usages: Api<lien_api::Usage> = Api::namespaced(env.client.clone(), &ns);
    wait_for(
        "the namespace controller's DELETE of the Usage",
        DEADLINE,
        || async {
            let u = usages.get("keep-data").await.ok()?;
            u.metadata.deletion_timestamp.map(drop)
        },
    )
    .await;
    env.start_lien().await;

    // Lien says why on the Namespace: a Warning Event, and a condition describe shows.
    let events = Api::<Event>::all(env.client.clone());
    let note = wait_for(
        "a NamespaceHeld event on the Namespace",
        DEADLINE,
        || async {
            events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some(NAMESPACE_HELD_REASON)
                        && e.regarding.as_ref().is_some_and(|r| {
                            r.kind.as_deref() == Some("Namespace") && r.name.as_deref() == Some(&ns)
                        })
                })
                .and_then(|e| e.note)
        },
    )
    .await;
    assert!(
        note.contains(&format!(
            "ConfigMap {ns}/data is protected (Usage {ns}/keep-data: never delete: customer data) — lift it: `kubectl patch usage.lien.dev/keep-data -n {ns} --type=json"
        )),
        "{note}"
    );
    let described = wait_for(
        "describe namespace to show Lien's condition",
        DEADLINE,
        || async {
            let (_, out, _) = k.run(&["describe", "namespace", &ns]).await;
            (out.contains("LienContentHeld") && out.contains("NamespaceHeld")).then_some(out)
        },
    )
    .await;
    assert!(described.contains("Terminating"), "{described}");
    // The namespace controller tried and was refused: its own condition names Lien's refusal.
    wait_for(
        "the namespace controller's refused DELETE",
        DEADLINE,
        || async {
            let (_, out, _) = k.run(&["describe", "namespace", &ns]).await;
            out.contains("delete.lien.dev").then_some(())
        },
    )
    .await;

    // The object is there, its Usage Terminating and saying why, the namespace Terminating.
    let data = Api::<ConfigMap>::namespaced(env.client.clone(), &ns);
    assert!(
        data.get_opt("data").await.expect("get").is_some(),
        "the lien held"
    );
    let kept = wait_for("the Usage's Kept condition", DEADLINE, || async {
        let u = usages.get("keep-data").await.ok()?;
        u.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Kept" && c.status == "True")
            .map(|c| c.message)
    })
    .await;
    let lift = quoted_after(&kept, "the protection is lifted with ");
    assert!(
        note.contains(&lift),
        "the Event and the condition name the same command"
    );
    // A person deleting the object gets the same command in the 409.
    let (ok, _, err) = k.run(&["delete", "configmap", "data", "-n", &ns]).await;
    assert!(!ok, "still protected");
    assert!(err.contains(&lift), "{err}");

    // The hint, as printed: the Usage goes, then the object, then the namespace.
    run_hint(&k, &lift).await;
    wait_gone(&data, "data", Duration::from_secs(60)).await;
    namespace_gone(&env, &k, &ns).await;
    drop(k);
    env.finish().await;
}

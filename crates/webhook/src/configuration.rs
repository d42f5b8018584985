//! The `ValidatingWebhookConfiguration` Lien manages.
//!
//! # Data model
//!
//! One configuration, eight webhooks, all answered by `/validate`:
//!
//! | webhook | operations | resources | selection | failurePolicy |
//! | --- | --- | --- | --- | --- |
//! | `delete.lien.dev` | DELETE | `*/*`, both scopes | objectSelector `lien.dev/in-use: "true"`; not Namespaces | Fail |
//! | `tamper.lien.dev` | UPDATE | `*/*` | objectSelector `lien.dev/in-use: "true"`; matchConditions: the update removes that label, or the last finalizer of the object being deleted (through a subresource: changes the label) | Fail |
//! | `break-glass.lien.dev` | CREATE, UPDATE | `*/*` | matchConditions: the break-glass annotation is set or changed | Fail |
//! | `usages.lien.dev` | CREATE, UPDATE | `lien.dev` `usages`, `clusterusages` | — | Fail |
//! | `rules.lien.dev` | CREATE, UPDATE | `lien.dev` `dependencyrules`, `cascaderules` | — | Fail |
//! | `namespaces.lien.dev` | DELETE | `namespaces` | objectSelector `lien.dev/in-use: "true"` | Fail |
//! | `namespace-contents.lien.dev` | DELETE | `namespaces` | objectSelector: not `lien.dev/in-use: "true"` | Ignore |
//! | `evictions.lien.dev` | CREATE | `pods/eviction` | — (the object is the Eviction, not the pod) | Fail |
//!
//! The object selector keeps the cluster's cost proportional to what is in use: kube-apiserver
//! only calls Lien for labelled objects. The break-glass hook has no object selector (the
//! annotation may be set before an object is in use, and must be vetted all the same); its CEL
//! match conditions run in the API server, so only writes touching the annotation reach Lien.
//!
//! What fails closed while the webhook is down is kept to what protection needs (the reasons
//! are in `docs/ARCHITECTURE.md`, "When the webhook is down"): the tamper hook only receives
//! updates that remove the in-use label (not every update of an object in use), and a Namespace
//! DELETE fails open unless the Namespace itself is in use — its contents in use are still
//! refused one by one by `delete.lien.dev`, so the worst case is a namespace left Terminating,
//! never an object lost. The two namespace hooks have disjoint object selectors, so a DELETE
//! reaches exactly one.
//!
//! `sideEffects: NoneOnDryRun`: a real denial produces a record (event, replay annotation); a dry
//! run produces nothing.
//!
//! And one `MutatingWebhookConfiguration` ([`mutating_webhook_configuration`]), answered by
//! `/mutate` ([`crate::mutate`]):
//!
//! | webhook | operations | resources | selection | failurePolicy |
//! | --- | --- | --- | --- | --- |
//! | `seal.lien.dev` | UPDATE, CREATE | `*/*` | matchConditions: on the object, an UPDATE with `lien.dev/delete-when-free` set, or `lien.dev/deletion-attempt` added or changed; through a subresource, either annotation added, changed or removed | Fail |
//!
//! | `guard.lien.dev` | CREATE | `lien.dev` `usages`, `clusterusages` | — | Ignore |
//!
//! The seal hook's match conditions keep it off every other write, so with Lien down only
//! deletion requests and record writes fail. The guard adds Lien's finalizer to a Usage in its
//! CREATE ([`crate::guard`]). It fails open: mutating admission runs before the CRD's schema,
//! so a closed guard would hide the schema's error behind "failed calling webhook" while Lien is
//! down — and then `usages.lien.dev` refuses the CREATE anyway, after the schema.
//!
//! # Subresources: `*/*`
//!
//! Every hook that guards metadata (tamper, break-glass, seal) matches subresources too. A rule
//! `*` matches main resources only, and kube-apiserver keeps metadata written through a
//! subresource wherever the subresource's strategy resets only spec (v1.32
//! `pkg/registry/<group>/<resource>/strategy.go`): `pods/status` (all but `ownerReferences`),
//! `namespaces/status`, `services/status`, `persistentvolumeclaims/status`, `nodes/status`,
//! the workloads' statuses, `customresourcedefinitions/status` and more; `namespaces/finalize`
//! keeps metadata too, and `pods/binding` (a CREATE) copies the Binding's annotations onto the
//! Pod. With `*`, whoever may write such a subresource but not delete the object could strip
//! the in-use label, arm break-glass, or write a replay record, unseen. kube-apiserver sends a
//! subresource's review with `subResource` set and, for `status`, the whole object as `object`
//! and `oldObject`; the webhook refuses any change of Lien's label or annotations made that
//! way, whoever asks (`validate::write`, `mutate`). A Scale, an Eviction or a TokenRequest
//! carries none of them, so the match conditions (evaluated in kube-apiserver) keep those off
//! Lien. `sideEffects: None`: sealing only answers a patch, so dry runs are sealed alike (and
//! show what would be stored).

use serde_json::{Value, json};

use crate::validate::BREAK_GLASS_ANNOTATION;

/// How kube-apiserver reaches the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientConfig {
    /// An `https://` URL (out-of-cluster, tests).
    Url(String),
    /// A Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: u16,
    },
}

/// The path kube-apiserver POSTs mutating reviews to.
pub const MUTATE_PATH: &str = "/mutate";
/// The path of validating reviews.
pub const VALIDATE_PATH: &str = "/validate";

/// What the configuration is built from.
#[derive(Debug, Clone)]
pub struct ConfigurationOptions {
    /// `metadata.name` of the configuration.
    pub name: String,
    /// Where the webhook is. For [`ClientConfig::Url`] give the full URL of `/validate`; the
    /// mutating configuration uses the same URL with `/mutate` in its place.
    pub client: ClientConfig,
    /// `timeoutSeconds` (1–30).
    pub timeout_seconds: u8,
    /// A namespace label that, set to `"true"`, takes the namespace out of every hook (a
    /// `namespaceSelector`); `None` excludes nothing. Lien's own writes are not excluded: they go
    /// through the hooks and are decided by state like anyone's (Lien never removes the in-use
    /// label while a relation holds).
    pub ignore_namespaces_label: Option<String>,
}

impl ConfigurationOptions {
    /// Defaults: name `lien`, 5 s timeout (Lien answers from memory in microseconds; its live
    /// and access checks give up after 3 s; a hung webhook stalls each write no longer than
    /// this).
    pub fn new(client: ClientConfig) -> Self {
        Self {
            name: "lien".to_owned(),
            client,
            timeout_seconds: 5,
            ignore_namespaces_label: None,
        }
    }
}

/// The webhook names, as kube-apiserver prefixes denials: `admission webhook "<name>" denied
/// the request: …`.
pub mod names {
    /// DELETE of objects in use.
    pub const DELETE: &str = "delete.lien.dev";
    /// UPDATE removing the in-use label.
    pub const TAMPER: &str = "tamper.lien.dev";
    /// Writes setting the break-glass annotation.
    pub const BREAK_GLASS: &str = "break-glass.lien.dev";
    /// Usage / ClusterUsage CREATE and UPDATE.
    pub const USAGES: &str = "usages.lien.dev";
    /// DependencyRule / CascadeRule CREATE and UPDATE (CEL compiles, creator consents).
    pub const RULES: &str = "rules.lien.dev";
    /// DELETE of a Namespace that is itself in use (fails closed).
    pub const NAMESPACES: &str = "namespaces.lien.dev";
    /// DELETE of a Namespace that is not itself in use, for its contents used from outside
    /// (fails open).
    pub const NAMESPACE_CONTENTS: &str = "namespace-contents.lien.dev";
    /// CREATE of `pods/eviction` (the Eviction API, which admits no DELETE).
    pub const EVICTIONS: &str = "evictions.lien.dev";
    /// The mutating hook: deletion requests sealed, hand-written replay records refused.
    pub const SEAL: &str = "seal.lien.dev";
    /// The mutating hook adding Lien's finalizer to a Usage in its CREATE.
    pub const GUARD: &str = "guard.lien.dev";
}

fn client_config(client: &ClientConfig, ca_bundle: &str, path: &str) -> Value {
    match client {
        ClientConfig::Url(url) => {
            let url = match url.strip_suffix(VALIDATE_PATH) {
                Some(base) => format!("{base}{path}"),
                None if path == VALIDATE_PATH => url.clone(),
                None => format!("{}{path}", url.trim_end_matches('/')),
            };
            json!({"url": url, "caBundle": ca_bundle})
        }
        ClientConfig::Service {
            namespace,
            name,
            port,
        } => json!({
            "service": {"namespace": namespace, "name": name, "port": port, "path": path},
            "caBundle": ca_bundle,
        }),
    }
}

/// The `MutatingWebhookConfiguration` (same name as the validating one), with `ca_bundle`: one
/// hook, `seal.lien.dev` (see the module docs).
pub fn mutating_webhook_configuration(opts: &ConfigurationOptions, ca_bundle: &str) -> Value {
    use lien_core::seams::{DELETE_WHEN_FREE_ANNOTATION as W, DELETION_ATTEMPT_ANNOTATION as R};
    let mut hook = json!({
        "name": names::SEAL,
        "clientConfig": client_config(&opts.client, ca_bundle, MUTATE_PATH),
        // CREATE for `pods/binding`, which copies its annotations onto the Pod; a CREATE of an
        // object itself is kept off by the match condition (a record there names no UID yet).
        "rules": [{
            "operations": ["UPDATE", "CREATE"],
            "apiGroups": ["*"],
            "apiVersions": ["*"],
            "resources": ["*/*"],
            "scope": "*",
        }],
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": opts.timeout_seconds,
        "admissionReviewVersions": ["v1"],
        // Lien's patch never makes another mutating webhook's input differ in a way it needs
        // to see again, nor does Lien need to see theirs.
        "reinvocationPolicy": "Never",
        "matchConditions": [{
            "name": "requests-or-writes-a-deletion-record",
            // Removing the record from the object itself is never sent: it cancels a pending
            // replay, and anyone who may update the object may do that. Through a subresource
            // every change of either annotation is sent (and refused).
            "expression": format!(
                "(!{sub} && request.operation == 'UPDATE' && ({} || ({} && {}))) || ({sub} && ({} || {}))",
                has_annotation("object", W),
                has_annotation("object", R),
                annotation_changed(R),
                annotation_changed(W),
                annotation_changed(R),
                sub = THROUGH_SUBRESOURCE,
            ),
        }],
    });
    if let Some(label) = &opts.ignore_namespaces_label {
        hook["namespaceSelector"] = json!({"matchExpressions": [
            {"key": label, "operator": "NotIn", "values": ["true"]}
        ]});
    }
    // The finalizer in the Usage's CREATE (`crate::guard`). `Ignore`: mutating admission runs
    // before the CRD's schema is checked, so failing closed here would answer a malformed
    // Usage with "failed calling webhook" instead of the schema's error naming the field,
    // while Lien is down — and then `usages.lien.dev` (after the schema) refuses the CREATE
    // anyway: no Usage is stored unguarded because this hook was skipped. `IfNeeded`: a
    // mutating webhook called after this one may rewrite `metadata.finalizers`; the guard's
    // answer is idempotent, so a second call costs one round trip and nothing else.
    let mut guard = json!({
        "name": names::GUARD,
        "clientConfig": client_config(&opts.client, ca_bundle, MUTATE_PATH),
        "rules": [{
            "operations": ["CREATE"],
            "apiGroups": [lien_api::GROUP],
            "apiVersions": ["*"],
            "resources": crate::guard::GUARDED_RESOURCES,
            "scope": "*",
        }],
        "failurePolicy": "Ignore",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": opts.timeout_seconds,
        "admissionReviewVersions": ["v1"],
        "reinvocationPolicy": "IfNeeded",
    });
    if opts.ignore_namespaces_label.is_some() {
        guard["namespaceSelector"] = hook["namespaceSelector"].clone();
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": opts.name, "labels": {"app.kubernetes.io/managed-by": "lien"}},
        "webhooks": [hook, guard],
    })
}

/// CEL: the write goes through a subresource. kube-apiserver's `request` omits an empty
/// `subResource` (omitempty): reading it on a main resource's write is an error, which under
/// `failurePolicy: Fail` refuses the write, so its presence is tested first.
const THROUGH_SUBRESOURCE: &str = "(has(request.subResource) && request.subResource != '')";

/// CEL: `o` (`object` or `oldObject`) has annotation `a`. Safe on a null `oldObject` (a CREATE)
/// and on an object without metadata (a subresource's request body), where a failed evaluation
/// would refuse the write under `failurePolicy: Fail`.
fn has_annotation(o: &str, a: &str) -> String {
    format!(
        "({o} != null && has({o}.metadata) && has({o}.metadata.annotations) && '{a}' in {o}.metadata.annotations)"
    )
}

/// CEL: annotation `a` is added, removed or changed by the write.
fn annotation_changed(a: &str) -> String {
    let (new, old) = (has_annotation("object", a), has_annotation("oldObject", a));
    format!(
        "({new} != {old} || ({new} && {old} && object.metadata.annotations['{a}'] != oldObject.metadata.annotations['{a}']))"
    )
}

/// The configuration, with `ca_bundle` (base64 of the PEM bundle, see
/// [`CertManager::ca_bundle_base64`](crate::tls::CertManager::ca_bundle_base64)).
pub fn validating_webhook_configuration(opts: &ConfigurationOptions, ca_bundle: &str) -> Value {
    let in_use = json!({"matchLabels": {lien_api::IN_USE_LABEL: "true"}});
    let hook = |name: &str, rules: Value| {
        json!({
            "name": name,
            "clientConfig": client_config(&opts.client, ca_bundle, VALIDATE_PATH),
            "rules": rules,
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "NoneOnDryRun",
            "timeoutSeconds": opts.timeout_seconds,
            "admissionReviewVersions": ["v1"],
        })
    };
    let rule = |ops: &[&str], groups: &[&str], resources: &[&str], scope: &str| {
        json!({
            "operations": ops,
            "apiGroups": groups,
            "apiVersions": ["*"],
            "resources": resources,
            "scope": scope,
        })
    };
    let mut delete = hook(
        names::DELETE,
        json!([rule(&["DELETE"], &["*"], &["*/*"], "*")]),
    );
    delete["objectSelector"] = in_use.clone();
    // A Namespace is answered by the namespaces hook, which also checks its own relations;
    // reaching both would refuse (and record, and audit) one DELETE twice.
    delete["matchConditions"] = json!([{
        "name": "not-a-namespace",
        "expression": "!(request.resource.group == '' && request.resource.resource == 'namespaces')",
    }]);
    // `*/*`: a label or annotation written through a subresource is kept by kube-apiserver for
    // many kinds (the module docs).
    let mut tamper = hook(
        names::TAMPER,
        json!([rule(&["UPDATE"], &["*"], &["*/*"], "*")]),
    );
    tamper["objectSelector"] = in_use.clone();
    // Only updates that remove the label (through a subresource: that change it): every other
    // update of an object in use (a scale, a status write) then never waits on Lien, nor fails
    // while Lien is down. Arming break-glass is the break-glass hook's.
    let l = lien_api::IN_USE_LABEL;
    let labelled = |o: &str| {
        format!(
            "({o} != null && has({o}.metadata) && has({o}.metadata.labels) && '{l}' in {o}.metadata.labels && {o}.metadata.labels['{l}'] == 'true')"
        )
    };
    // Or updates that remove the last finalizer of an object in use being deleted: that
    // completes a deletion Lien refuses (`validate::write`).
    let completes = "(has(object.metadata.deletionTimestamp) && \
         has(oldObject.metadata.finalizers) && size(oldObject.metadata.finalizers) > 0 && \
         (!has(object.metadata.finalizers) || size(object.metadata.finalizers) == 0))";
    tamper["matchConditions"] = json!([{
        "name": "removes-in-use-label-or-last-finalizer",
        "expression": format!(
            "({old} && (!{new} || {completes})) || ({sub} && {old} != {new})",
            old = labelled("oldObject"),
            new = labelled("object"),
            sub = THROUGH_SUBRESOURCE,
        ),
    }]);
    let mut break_glass = hook(
        names::BREAK_GLASS,
        json!([rule(&["CREATE", "UPDATE"], &["*"], &["*/*"], "*")]),
    );
    let a = BREAK_GLASS_ANNOTATION;
    let (new, old) = (has_annotation("object", a), has_annotation("oldObject", a));
    break_glass["matchConditions"] = json!([{
        "name": "sets-break-glass",
        "expression": format!(
            "{new} && (!{old} || oldObject.metadata.annotations['{a}'] != object.metadata.annotations['{a}'])"
        ),
    }]);
    let usages = hook(
        names::USAGES,
        json!([rule(
            &["CREATE", "UPDATE"],
            &[lien_api::GROUP],
            &["usages", "clusterusages"],
            "*"
        )]),
    );
    // Fails closed like the Usage hook: a rule admitted unchecked could pin every object of a
    // kind (or delete children) on behalf of someone without the right.
    let rules = hook(
        names::RULES,
        json!([rule(
            &["CREATE", "UPDATE"],
            &[lien_api::GROUP],
            &["dependencyrules", "cascaderules"],
            "*"
        )]),
    );
    let namespace_rule = json!([rule(&["DELETE"], &[""], &["namespaces"], "Cluster")]);
    let mut in_use_namespaces = hook(names::NAMESPACES, namespace_rule.clone());
    in_use_namespaces["objectSelector"] = in_use;
    let mut namespaces = hook(names::NAMESPACE_CONTENTS, namespace_rule);
    namespaces["objectSelector"] = json!({"matchExpressions": [
        {"key": lien_api::IN_USE_LABEL, "operator": "NotIn", "values": ["true"]}
    ]});
    // Lien down: deleting a namespace not itself in use goes ahead. Its objects in use are
    // still refused one by one (`delete.lien.dev` fails closed), so at worst the namespace
    // stays Terminating until their users go — nothing is lost, and the cluster's namespace
    // churn (CI, previews) does not stop with Lien.
    namespaces["failurePolicy"] = json!("Ignore");
    // The Eviction API deletes a pod without admitting a DELETE; its CREATE carries the
    // Eviction, whose labels are not the pod's, so no object selector can narrow it: every
    // eviction comes here and is decided from the index (`validate::evict`). It fails closed:
    // an eviction let through while Lien is down would delete a pod in use, and a drain then
    // waits for Lien as it waits for a PodDisruptionBudget. Nothing is recorded.
    let mut evictions = hook(
        names::EVICTIONS,
        json!([{
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }]),
    );
    evictions["sideEffects"] = json!("None");
    let mut webhooks = vec![
        delete,
        tamper,
        break_glass,
        usages,
        rules,
        in_use_namespaces,
        namespaces,
        evictions,
    ];
    if let Some(label) = &opts.ignore_namespaces_label {
        let selector = json!({"matchExpressions": [
            {"key": label, "operator": "NotIn", "values": ["true"]}
        ]});
        for hook in &mut webhooks {
            hook["namespaceSelector"] = selector.clone();
        }
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": opts.name, "labels": {"app.kubernetes.io/managed-by": "lien"}},
        "webhooks": webhooks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_hooks_failing_closed_where_protection_needs_it() {
        let opts = ConfigurationOptions::new(ClientConfig::Service {
            namespace: "lien-system".into(),
            name: "lien-webhook".into(),
            port: 443,
        });
        let c = validating_webhook_configuration(&opts, "Q0E=");
        let hooks = c["webhooks"].as_array().expect("webhooks");
        let names: Vec<&str> = hooks.iter().filter_map(|h| h["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                names::DELETE,
                names::TAMPER,
                names::BREAK_GLASS,
                names::USAGES,
                names::RULES,
                names::NAMESPACES,
                names::NAMESPACE_CONTENTS,
                names::EVICTIONS
            ]
        );
        for h in hooks {
            let open = h["name"] == names::NAMESPACE_CONTENTS;
            assert_eq!(h["failurePolicy"], if open { "Ignore" } else { "Fail" });
            let records = h["name"] != names::EVICTIONS;
            assert_eq!(
                h["sideEffects"],
                if records { "NoneOnDryRun" } else { "None" }
            );
            assert_eq!(h["admissionReviewVersions"], json!(["v1"]));
            assert_eq!(h["clientConfig"]["caBundle"], "Q0E=");
            assert_eq!(h["clientConfig"]["service"]["path"], "/validate");
        }
        assert_eq!(
            hooks[0]["objectSelector"],
            json!({"matchLabels": {"lien.dev/in-use": "true"}})
        );
        assert_eq!(hooks[0]["rules"][0]["resources"], json!(["*/*"]));
        assert!(
            hooks[0]["matchConditions"][0]["expression"]
                .as_str()
                .is_some_and(|e| e.contains("request.resource.resource == 'namespaces'"))
        );
        assert_eq!(
            hooks[4]["rules"][0]["resources"],
            json!(["dependencyrules", "cascaderules"])
        );
        assert_eq!(hooks[5]["objectSelector"], hooks[0]["objectSelector"]);
        assert_eq!(
            hooks[6]["objectSelector"]["matchExpressions"][0]["operator"],
            "NotIn"
        );
        assert!(
            hooks[1]["matchConditions"][0]["expression"]
                .as_str()
                .is_some_and(|e| e.contains("!(object != null && has(object.metadata)")
                    && e.contains(THROUGH_SUBRESOURCE))
        );
        // The hooks that guard Lien's label and annotations see subresources: kube-apiserver
        // keeps metadata written through `pods/status`, `namespaces/status`… (the module docs).
        for h in &hooks[..3] {
            assert_eq!(h["rules"][0]["resources"], json!(["*/*"]), "{}", h["name"]);
        }
        assert!(
            hooks[2]["matchConditions"][0]["expression"]
                .as_str()
                .is_some_and(|e| e.contains("lien.dev/break-glass"))
        );
        // Evictions: the subresource only, and every one of them (no object selector).
        assert_eq!(hooks[7]["rules"][0]["resources"], json!(["pods/eviction"]));
        assert_eq!(hooks[7]["rules"][0]["operations"], json!(["CREATE"]));
        assert!(hooks[7].get("objectSelector").is_none());
    }

    #[test]
    fn mutating_hooks_for_deletion_requests_records_and_usage_creates_only() {
        let opts = ConfigurationOptions::new(ClientConfig::Service {
            namespace: "lien-system".into(),
            name: "lien-webhook".into(),
            port: 443,
        });
        let c = mutating_webhook_configuration(&opts, "Q0E=");
        assert_eq!(c["kind"], "MutatingWebhookConfiguration");
        assert_eq!(c["metadata"]["name"], "lien");
        let hooks = c["webhooks"].as_array().expect("webhooks");
        assert_eq!(hooks.len(), 2);
        let guard = &hooks[1];
        assert_eq!(guard["name"], names::GUARD);
        assert_eq!(guard["failurePolicy"], "Ignore");
        assert_eq!(guard["rules"][0]["operations"], json!(["CREATE"]));
        assert_eq!(guard["rules"][0]["apiGroups"], json!(["lien.dev"]));
        assert_eq!(
            guard["rules"][0]["resources"],
            json!(["usages", "clusterusages"])
        );
        assert_eq!(guard["clientConfig"]["service"]["path"], "/mutate");
        assert!(guard.get("matchConditions").is_none());
        let h = &hooks[0];
        assert_eq!(h["name"], names::SEAL);
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["sideEffects"], "None");
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["timeoutSeconds"], 5);
        assert_eq!(h["rules"][0]["operations"], json!(["UPDATE", "CREATE"]));
        assert_eq!(h["rules"][0]["resources"], json!(["*/*"]));
        assert_eq!(h["clientConfig"]["service"]["path"], "/mutate");
        assert_eq!(h["clientConfig"]["caBundle"], "Q0E=");
        let e = h["matchConditions"][0]["expression"]
            .as_str()
            .expect("expression");
        assert!(
            e.contains("'lien.dev/delete-when-free' in object.metadata.annotations"),
            "{e}"
        );
        assert!(e.contains("object.metadata.annotations['lien.dev/deletion-attempt'] != oldObject.metadata.annotations['lien.dev/deletion-attempt']"), "{e}");
        assert!(e.contains(THROUGH_SUBRESOURCE), "{e}");
        // Never read where kube-apiserver leaves it out (a main resource's write).
        assert!(
            !e.replace(THROUGH_SUBRESOURCE, "").contains("subResource"),
            "{e}"
        );
        let url =
            ConfigurationOptions::new(ClientConfig::Url("https://127.0.0.1:9/validate".into()));
        assert_eq!(
            mutating_webhook_configuration(&url, "")["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9/mutate"
        );
        assert_eq!(
            validating_webhook_configuration(&url, "")["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9/validate"
        );
    }
}

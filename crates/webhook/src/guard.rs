//! Lien's finalizer on a Usage from its first write (hook `guard.lien.dev`, answered by
//! `/mutate`).
//!
//! # Why at admission
//!
//! The controller adds `lien.dev/usage` to a Usage in its write pass, after it has labelled the
//! objects the Usage protects (from then on their DELETE is refused). Between the label and the
//! finalizer — milliseconds, more under load — the Usage is not guarded: deleted then (say, by
//! the garbage collector, its owner deleted together with what it protects) it goes at once,
//! and its protection with it, as if it had never been created. Added by the API server's own
//! CREATE, the finalizer is there before anything can see the Usage: the controller's later
//! write finds it and leaves it, and it goes only as the controller decides
//! (`lien_decide::desired::usage_meta`).
//!
//! # Decision (pure)
//!
//! Which Usages carry the finalizer is the controller's rule, applied here to the new object:
//! every (namespaced) Usage; a ClusterUsage only with `spec.by` (without a user, nothing would
//! keep it). Already there → no patch. The hook fails open (`Ignore`): mutating admission runs
//! before the CRD's schema, and a guard failing closed would answer a malformed Usage with
//! "failed calling webhook" rather than the schema's error naming the field while Lien is down;
//! the validating hook `usages.lien.dev`, after the schema, refuses the CREATE anyway, so no
//! Usage is stored unguarded for it.
//!
//! A forged review POSTed here gets a patch nobody applies: a finalizer on nothing. With a
//! client CA the caller is refused before this is reached (`crate::server`).

use lien_api::{GROUP, USAGE_FINALIZER};
use serde::Deserialize;

use crate::mutate::Mutation;
use crate::review::{Operation, Request, Status};

/// The resources the guard adds its finalizer to (group [`GROUP`]).
pub const GUARDED_RESOURCES: [&str; 2] = ["usages", "clusterusages"];

#[derive(Deserialize)]
struct Body {
    request: BodyRequest,
}

#[derive(Deserialize)]
struct BodyRequest {
    #[serde(default)]
    object: Option<NewObject>,
}

#[derive(Deserialize, Default)]
struct NewObject {
    #[serde(default)]
    metadata: NewMetadata,
    #[serde(default)]
    spec: Option<NewSpec>,
}

#[derive(Deserialize, Default)]
struct NewMetadata {
    #[serde(default)]
    finalizers: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
struct NewSpec {
    #[serde(default)]
    by: Option<serde::de::IgnoredAny>,
}

/// Whether `req` is a write the guard decides: the CREATE of a Usage or ClusterUsage itself
/// (not through a subresource).
pub fn guards(req: &Request<'_>) -> bool {
    req.operation == Operation::Create
        && req.subresource().is_none()
        && req.resource.group == GROUP
        && GUARDED_RESOURCES.contains(&req.resource.resource.as_ref())
}

/// The guard's answer to a Usage's CREATE: a JSON Patch adding [`USAGE_FINALIZER`] where the
/// controller's rule wants it and it is missing; otherwise nothing to do. `body` is the whole
/// review (the borrowed [`Request`] keeps neither the finalizers' names nor `spec`; Usage
/// CREATEs are rare, so the second read costs nothing that matters).
pub fn guard_usage(req: &Request<'_>, body: &[u8]) -> Mutation {
    let parsed: Body = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => {
            return Mutation::Deny(Status {
                code: 400,
                reason: "BadRequest",
                message: format!("request.object: {e}"),
            });
        }
    };
    let object = parsed.request.object.unwrap_or_default();
    let cluster_scoped = req.resource.resource == "clusterusages";
    let has_user = object.spec.as_ref().is_some_and(|s| s.by.is_some());
    if cluster_scoped && !has_user {
        return Mutation::allow();
    }
    let patch = match &object.metadata.finalizers {
        Some(list) if list.iter().any(|f| f == USAGE_FINALIZER) => return Mutation::allow(),
        Some(_) => serde_json::json!([
            {"op": "add", "path": "/metadata/finalizers/-", "value": USAGE_FINALIZER}
        ]),
        None => serde_json::json!([
            {"op": "add", "path": "/metadata/finalizers", "value": [USAGE_FINALIZER]}
        ]),
    };
    // Serialising strings cannot fail.
    Mutation::Guarded(serde_json::to_vec(&patch).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Review;
    use serde_json::{Value, json};

    fn create(resource: &str, kind: &str, object: Value) -> Vec<u8> {
        let namespace = (resource == "usages").then_some("team-a");
        serde_json::to_vec(&json!({"request": {
            "uid": "u", "operation": "CREATE",
            "kind": {"group": GROUP, "version": "v1alpha1", "kind": kind},
            "resource": {"group": GROUP, "version": "v1alpha1", "resource": resource},
            "name": "u1", "namespace": namespace,
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": null}}))
        .expect("json")
    }

    fn patch_of(m: Mutation) -> Option<Value> {
        match m {
            Mutation::Guarded(p) => Some(serde_json::from_slice(&p).expect("patch is JSON")),
            Mutation::Allow { patch: None, .. } => None,
            other => panic!("unexpected answer {other:?}"),
        }
    }

    fn decide(body: &[u8]) -> Mutation {
        let req = Review::parse(body).expect("parses");
        assert!(guards(&req));
        guard_usage(&req, body)
    }

    #[test]
    fn a_usage_is_created_with_the_finalizer() {
        let body = create(
            "usages",
            "Usage",
            json!({"metadata": {"name": "u1"}, "spec": {"of": {"kind": "ConfigMap"}}}),
        );
        assert_eq!(
            patch_of(decide(&body)),
            Some(
                json!([{"op": "add", "path": "/metadata/finalizers", "value": [USAGE_FINALIZER]}])
            )
        );
    }

    #[test]
    fn other_finalizers_are_kept_and_ours_is_not_added_twice() {
        let body = create(
            "usages",
            "Usage",
            json!({"metadata": {"finalizers": ["example.org/keep"]}, "spec": {}}),
        );
        assert_eq!(
            patch_of(decide(&body)),
            Some(
                json!([{"op": "add", "path": "/metadata/finalizers/-", "value": USAGE_FINALIZER}])
            )
        );
        let body = create(
            "usages",
            "Usage",
            json!({"metadata": {"finalizers": [USAGE_FINALIZER]}, "spec": {}}),
        );
        assert_eq!(patch_of(decide(&body)), None);
    }

    #[test]
    fn a_cluster_usage_is_guarded_only_with_a_user() {
        let with_user = create(
            "clusterusages",
            "ClusterUsage",
            json!({"metadata": {}, "spec": {"of": {}, "by": {"kind": "Namespace", "name": "x"}}}),
        );
        assert!(patch_of(decide(&with_user)).is_some());
        let without = create(
            "clusterusages",
            "ClusterUsage",
            json!({"metadata": {}, "spec": {"of": {}, "reason": "r"}}),
        );
        assert_eq!(patch_of(decide(&without)), None);
        let null_user = create(
            "clusterusages",
            "ClusterUsage",
            json!({"metadata": {}, "spec": {"of": {}, "by": null}}),
        );
        assert_eq!(patch_of(decide(&null_user)), None);
    }

    #[test]
    fn only_a_usage_create_is_guarded() {
        let mut update: Value =
            serde_json::from_slice(&create("usages", "Usage", json!({}))).expect("json");
        update["request"]["operation"] = json!("UPDATE");
        let body = serde_json::to_vec(&update).expect("json");
        assert!(!guards(&Review::parse(&body).expect("parses")));
        update["request"]["operation"] = json!("CREATE");
        update["request"]["resource"]["resource"] = json!("dependencyrules");
        let body = serde_json::to_vec(&update).expect("json");
        assert!(!guards(&Review::parse(&body).expect("parses")));
    }
}

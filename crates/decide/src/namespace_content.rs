//! What Lien deletes in a namespace being deleted, so that the namespace can finish.
//!
//! kube-controller-manager's namespace controller empties a namespace with one `DELETE` of a
//! collection per resource type (`deleteAllContentForGroupVersionResource`), and kube-apiserver
//! deletes a collection's objects in name order with one worker (`--delete-collection-workers`
//! is 1 by default) that **stops at the first object refused**: the objects after it are not
//! even tried, and there is no per-object fallback — the controller retries the whole
//! collection later (5 ms doubling to 60 s), and it stops at the same object again. So when an
//! object in use sorts before its user in the same namespace and resource type (ConfigMap `a`
//! used by ConfigMap `c`), the user is never deleted, the used object is refused forever, and
//! the namespace stays `Terminating` for good. (Found on the real control plane; the sandbox's
//! namespace controller used to delete each object on its own and go on past a refusal.)
//!
//! So, while a namespace is being deleted, Lien deletes what the namespace controller is stuck
//! behind: every object of the namespace that **uses something held in the same namespace**
//! and is **itself free** (no relation holds it: the same decision as the webhook's, so Lien
//! could not be refused) — users first, as the relations order them; once they are gone, what
//! they used is free, and the namespace controller's next pass deletes it. Nothing else: an
//! object held from outside the namespace, or by a protection, stays held (and keeps the
//! namespace, as it should); an object that uses nothing held is left to the namespace
//! controller. Whoever deleted the namespace was allowed to delete all of it; Lien only
//! deletes first what was going anyway. No new incarnation can appear meanwhile (kube-apiserver
//! refuses creations in a namespace being deleted), so a user Lien knows only by name (a
//! rule's user kind is cached only for marked objects) is deleted by name.

use std::collections::{BTreeMap, BTreeSet};

use lien_core::{GroupKind, RelationIndex, decide_delete};

use crate::cache::Caches;
use crate::desired::ObjectTarget;

/// The objects to delete now in the namespaces being deleted (`terminating`): each one free,
/// not yet being deleted, and a user of something held in its own namespace. `uid` is empty
/// when only the name is known.
pub fn namespace_content_deletes(
    index: &RelationIndex,
    caches: &Caches,
    terminating: &BTreeSet<String>,
) -> Vec<ObjectTarget> {
    if terminating.is_empty() {
        return Vec::new();
    }
    let mut out: BTreeMap<(GroupKind, String, String), ObjectTarget> = BTreeMap::new();
    for r in index.relations() {
        let of = r.of();
        let Some(ns) = of.namespace.filter(|ns| terminating.contains(*ns)) else {
            continue;
        };
        let Some(by) = r.by().filter(|by| by.namespace == Some(ns)) else {
            continue;
        };
        let of_key = of.to_key();
        // The relation holds: `of` is refused because of it (a cycle Lien broke does not).
        if index.is_broken(&of_key, &r) {
            continue;
        }
        let gk = GroupKind::new(by.group, by.kind);
        let id = (gk.clone(), ns.to_owned(), by.name.to_owned());
        if out.contains_key(&id) {
            continue;
        }
        let Some(kind) = caches.kind(&gk) else {
            continue;
        };
        let by_key = by.to_key();
        let cached = caches.get(&by_key);
        if cached.is_some_and(|o| o.deleting) {
            continue;
        }
        let uid = cached
            .map(|o| o.uid.clone())
            .or_else(|| r.by_uid().map(|u| u.into_owned()))
            .unwrap_or_default();
        if !decide_delete(
            index,
            &by_key,
            Some(&uid).filter(|u| !u.is_empty()).map(String::as_str),
        )
        .is_allowed()
        {
            continue;
        }
        out.insert(
            id,
            ObjectTarget {
                gk,
                api_version: kind.api_version.clone(),
                plural: kind.plural.clone(),
                namespace: Some(ns.to_owned()),
                name: by.name.to_owned(),
                uid,
                resource_version: None,
            },
        );
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use lien_core::{ObjectKey, Relation, Source};

    use super::*;

    fn cm(ns: &str, name: &str) -> ObjectKey {
        ObjectKey::new("", "ConfigMap", Some(ns), name)
    }

    /// ConfigMaps of `shop` (and one of `other`), `deleting` ones marked.
    fn caches(deleting: &[&str]) -> Caches {
        let gk = GroupKind::new("", "ConfigMap");
        let mut c = Caches::new();
        c.add_kind(gk.clone(), true, "v1", "configmaps");
        let metas: Vec<ObjectMeta> = [("shop", "a"), ("shop", "b"), ("shop", "c"), ("shop", "d")]
            .iter()
            .chain(&[("other", "x")])
            .map(|(ns, n)| ObjectMeta {
                namespace: Some((*ns).into()),
                name: Some((*n).into()),
                uid: Some(format!("uid-{n}")),
                deletion_timestamp: deleting.contains(n).then_some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                    ),
                ),
                ..Default::default()
            })
            .collect();
        c.reset(&gk, &metas);
        c
    }

    fn uses(index: &mut RelationIndex, name: &str, of: ObjectKey, by: ObjectKey) {
        let source = Source::usage(of.namespace.as_deref().unwrap_or_default(), name);
        index
            .apply(&source, [Relation::uses(source.clone(), of, by)])
            .expect("applies");
    }

    fn names(targets: &[ObjectTarget]) -> Vec<String> {
        targets
            .iter()
            .map(|t| {
                format!(
                    "{}/{} {}",
                    t.namespace.as_deref().unwrap_or_default(),
                    t.name,
                    t.uid
                )
            })
            .collect()
    }

    /// `c` uses `b` uses `a`, all in `shop`; `d` is protected by reason; `x` (elsewhere) uses
    /// `d`. Only the free users of what is held in the namespace go, leaf first: `c`, then
    /// (once `c` is gone) `b`; never `a` (the namespace controller's), never `d` (protected)
    /// nor `x` (another namespace).
    #[test]
    fn only_the_free_users_of_what_is_held_in_a_namespace_being_deleted_go() {
        let mut index = RelationIndex::new();
        uses(&mut index, "b-uses-a", cm("shop", "a"), cm("shop", "b"));
        uses(&mut index, "c-uses-b", cm("shop", "b"), cm("shop", "c"));
        uses(&mut index, "x-uses-d", cm("shop", "d"), cm("other", "x"));
        let keep = Source::usage("shop", "keep");
        index
            .apply(
                &keep,
                [Relation::protects(keep.clone(), cm("shop", "d"), "kept")],
            )
            .expect("applies");
        let shop = BTreeSet::from(["shop".to_owned()]);
        assert!(namespace_content_deletes(&index, &caches(&[]), &BTreeSet::new()).is_empty());
        assert_eq!(
            names(&namespace_content_deletes(&index, &caches(&[]), &shop)),
            ["shop/c uid-c"]
        );
        // Already being deleted: nothing to send.
        assert!(namespace_content_deletes(&index, &caches(&["c"]), &shop).is_empty());
        // `c` gone (its Usage with it): `b` is free now.
        index.delete(&Source::usage("shop", "c-uses-b"));
        assert_eq!(
            names(&namespace_content_deletes(&index, &caches(&[]), &shop)),
            ["shop/b uid-b"]
        );
        // The other namespace being deleted: `x` uses `d` across namespaces — not ours.
        let other = BTreeSet::from(["other".to_owned()]);
        assert!(namespace_content_deletes(&index, &caches(&[]), &other).is_empty());
    }
}

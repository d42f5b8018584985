//! Shared by the benchmark and the instruction-count example: a webhook over an index of `n`
//! relations in which the fixtures' Deployments are in use.

#![allow(dead_code)]

use std::sync::Arc;

use lien_core::{ObjectKey, Relation, RelationIndex, Source};
use lien_webhook::Webhook;
use parking_lot::RwLock;

/// (name, file) of the DELETE reviews measured.
pub const FIXTURES: [(&str, &str); 2] = [
    ("5k", "delete-deployment-5k.json"),
    ("20k", "delete-deployment-20k.json"),
];

pub fn fixture(file: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `n` relations: sources of 10 relations each, spread over 100 namespaces; plus three users of
/// each fixture's Deployment.
pub fn index(n: usize) -> RelationIndex {
    let mut idx = RelationIndex::new();
    let per_source = 10;
    for s in 0..n / per_source {
        let ns = format!("team-{:03}", s % 100);
        let source = Source::usage(ns.clone(), format!("usage-{s}"));
        let relations = (0..per_source).map(|r| {
            let of = ObjectKey::new("", "ConfigMap", Some(&ns), format!("cm-{s}-{r}"));
            let by = ObjectKey::new("apps", "Deployment", Some(&ns), format!("app-{s}"));
            Relation::uses(source.clone(), of, by).with_reason("reads its configuration")
        });
        idx.apply(&source, relations).expect("apply");
    }
    for target in ["web-5k", "web-20k"] {
        let of = ObjectKey::new("apps", "Deployment", Some("fixtures"), target);
        for u in 0..3 {
            let source = Source::usage("fixtures", format!("{target}-user-{u}"));
            let by = ObjectKey::new(
                "helm.example.io",
                "Release",
                Some("fixtures"),
                format!("r{u}"),
            );
            idx.apply(
                &source,
                [
                    Relation::uses(source.clone(), of.clone(), by)
                        .with_reason("serves the release"),
                ],
            )
            .expect("apply");
        }
    }
    idx
}

pub fn webhook(n: usize) -> Webhook {
    Webhook::builder(Arc::new(RwLock::new(index(n))))
        .ready(true)
        .build()
}

/// Three Helm releases use the 5 KB fixture's Deployment `fixtures/web-5k`, so that its DELETE
/// review is refused.
pub fn use_web_5k(idx: &mut RelationIndex) -> Result<(), lien_core::IndexError> {
    let of = ObjectKey::new("apps", "Deployment", Some("fixtures"), "web-5k");
    for u in 0..3 {
        let source = Source::usage("fixtures", format!("web-5k-user-{u}"));
        let by = ObjectKey::new(
            "helm.example.io",
            "Release",
            Some("fixtures"),
            format!("r{u}"),
        );
        let relation =
            Relation::uses(source.clone(), of.clone(), by).with_reason("serves the release");
        idx.apply(&source, [relation])?;
    }
    Ok(())
}

//! What the plugin read from the cluster, and the relations derived from it — with the
//! controller's own pure code, so `kubectl lien` and the webhook never disagree about who uses
//! what.
//!
//! # Data model
//!
//! A [`Snapshot`] is one consistent-enough read: every Usage and ClusterUsage (as the
//! controller's [`UsageView`]s), every DependencyRule (as [`RuleView`]s), and the objects of
//! every kind any of them names ([`KindObjects`]: discovery's answer plus the objects). Kinds the
//! API server does not serve are listed in `unknown`.
//!
//! [`derive`] turns it into a [`Graph`]: a [`RelationIndex`] filled exactly as the controller
//! fills its own — usages through [`resolve`] over the same [`Caches`], rules through the same
//! compiled [`Program`]s, [`KindReader::reduce`] and one join per rule, held by the index
//! ([`RelationIndex::add_join`]) until its relations are attached — plus what a
//! person wants to see about each object: its UID, whether it is being deleted, and the refused
//! DELETE Lien recorded on it for replay, if any. Pure: no I/O.

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::api::{DynamicObject, ObjectMeta};
use lien_core::{IndexError, JoinError, ObjectKey, RelationIndex, Source, USAGE_FINALIZER};
use lien_decide::cache::{Caches, GroupKind};
use lien_decide::replay::{DELETION_ATTEMPT_ANNOTATION, DeletionAttempt};
use lien_decide::resolve::{Problem, UsageView, resolve};
use lien_decide::rules::{KindReader, Program, Read, RuleView, SideEval};

/// The objects of one kind, with what discovery said about the kind.
#[derive(Debug, Clone)]
pub struct KindObjects {
    /// The kind.
    pub gk: GroupKind,
    /// Whether it is namespaced.
    pub namespaced: bool,
    /// The served `apiVersion` listed.
    pub api_version: String,
    /// The resource's plural.
    pub plural: String,
    /// The objects (full objects for kinds a rule reads; metadata is enough otherwise).
    pub objects: Vec<DynamicObject>,
}

/// Everything the plugin read.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Usages and ClusterUsages.
    pub usages: Vec<UsageView>,
    /// DependencyRules.
    pub rules: Vec<RuleView>,
    /// The objects of every kind a usage or rule names that the API server serves.
    pub kinds: Vec<KindObjects>,
    /// Kinds a usage or rule names that the API server does not serve.
    pub unknown: Vec<GroupKind>,
}

/// A refused DELETE that Lien recorded on the object (`lien.dev/deletion-attempt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The record.
    pub attempt: DeletionAttempt,
    /// Whether it carries a signature. The plugin cannot verify it (only Lien holds the key);
    /// an unsigned record is certainly not Lien's and is never replayed.
    pub signed: bool,
}

impl Attempt {
    /// Parses the annotation's value; `None` when it is not a record at all.
    pub fn parse(raw: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(raw).ok()?;
        let signed = value
            .get("signature")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|s| !s.is_empty());
        let attempt: DeletionAttempt = serde_json::from_value(value).ok()?;
        Some(Self { attempt, signed })
    }

    /// Until when the record is replayable, with Lien's `--replay-ttl-hours`.
    pub fn until(&self, ttl: std::time::Duration) -> Timestamp {
        let ttl = jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::MAX);
        self.attempt.time.checked_add(ttl).unwrap_or(Timestamp::MAX)
    }
}

/// What the plugin shows about one object besides its relations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// A refused DELETE recorded for replay.
    pub attempt: Option<Attempt>,
}

impl NodeInfo {
    /// What an object's metadata says.
    pub fn of(meta: &ObjectMeta) -> Self {
        Self {
            uid: meta.uid.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            attempt: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(DELETION_ATTEMPT_ANNOTATION))
                .and_then(|raw| Attempt::parse(raw)),
        }
    }
}

/// The derived relations and what is known of each object.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every relation, as the controller's index would hold it.
    pub index: RelationIndex,
    /// The objects read, by key.
    pub nodes: BTreeMap<ObjectKey, NodeInfo>,
    /// Why a source holds less than it says (unknown kind, not found, invalid CEL…): shown so
    /// that an empty answer is not mistaken for "nothing holds it".
    pub problems: BTreeMap<Source, Vec<String>>,
    /// What `why` needs of each Usage and ClusterUsage to say how to drop it: whether it has
    /// `by`, and its finalizers.
    pub usages: BTreeMap<Source, UsageFacts>,
}

/// A Usage's or ClusterUsage's metadata that decides how it can be dropped (see `why`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageFacts {
    /// It has `spec.by` (and so Lien's finalizer while its users exist).
    pub has_by: bool,
    /// `metadata.finalizers`, in order.
    pub finalizers: Vec<String>,
    /// It is being deleted (`deletionTimestamp` set).
    pub deleting: bool,
}

/// Derives the relations of `snapshot` with the controller's code. Fails only when the index
/// refuses a relation (its string table is full).
pub fn derive(snapshot: &Snapshot) -> Result<Graph, IndexError> {
    let mut caches = Caches::new();
    let mut nodes = BTreeMap::new();
    for kind in &snapshot.kinds {
        caches.add_kind(
            kind.gk.clone(),
            kind.namespaced,
            &kind.api_version,
            &kind.plural,
        );
        caches.reset(&kind.gk, kind.objects.iter().map(|o| &o.metadata));
        for o in &kind.objects {
            let Some(name) = o.metadata.name.as_deref() else {
                continue;
            };
            let key = kind.gk.key(o.metadata.namespace.as_deref(), name);
            nodes.insert(key, NodeInfo::of(&o.metadata));
        }
    }
    for gk in &snapshot.unknown {
        caches.mark_unknown(gk.clone());
    }
    let mut index = RelationIndex::new();
    let mut problems: BTreeMap<Source, Vec<String>> = BTreeMap::new();
    let mut usages = BTreeMap::new();
    for view in &snapshot.usages {
        let resolution = resolve(view, &caches);
        let source = view.source();
        usages.insert(
            source.clone(),
            UsageFacts {
                has_by: view.by.is_some(),
                finalizers: view.finalizers.clone(),
                deleting: view.deleting,
            },
        );
        if !resolution.problems.is_empty() {
            problems.insert(
                source.clone(),
                resolution.problems.iter().map(Problem::to_string).collect(),
            );
        }
        index.apply(&source, resolution.relations)?;
        // As the controller marks it: a Usage being deleted that Lien's finalizer keeps is
        // lifted by removing that finalizer, not by deleting it again.
        if view.deleting {
            index.set_kept(
                &source,
                view.finalizers.iter().position(|f| f == USAGE_FINALIZER),
            );
        }
    }
    let by_kind: BTreeMap<&GroupKind, &KindObjects> =
        snapshot.kinds.iter().map(|k| (&k.gk, k)).collect();
    // Each object as the JSON CEL reads, made once for every rule reading its kind.
    let mut json: BTreeMap<&GroupKind, Vec<serde_json::Value>> = BTreeMap::new();
    for view in &snapshot.rules {
        let source = view.source();
        let program = match Program::compile(&view.spec) {
            Ok(p) => p,
            Err(errors) => {
                problems.insert(
                    source,
                    errors
                        .iter()
                        .map(|e| format!("InvalidExpression: {e}"))
                        .collect(),
                );
                continue;
            }
        };
        let (of_gk, by_gk) = (view.of(), view.by());
        let mut missing = Vec::new();
        for (field, gk) in [("spec.of", &of_gk), ("spec.by", &by_gk)] {
            if !by_kind.contains_key(gk) {
                missing.push(format!(
                    "UnknownKind: {field}: the API server does not serve kind {gk}"
                ));
            }
        }
        if !missing.is_empty() {
            problems.insert(source, missing);
            continue;
        }
        let join = index
            .add_join(view.join_config(program.cel.keyed()))
            .map_err(|e| match e {
                JoinError::Full(full) | JoinError::Detached(full) => IndexError::Full(full),
                // Never: a join refuses an object of the wrong kind, and this one has none yet.
                JoinError::WrongKind { .. } => IndexError::Full(lien_core::FullError),
            })?;
        let mut errors = Vec::new();
        let same_kind = of_gk == by_gk;
        // As the controller's kind watch does: one reader per kind, evaluating both sides when
        // the rule relates a kind to itself.
        let sides: &[(&GroupKind, bool, bool)] = if same_kind {
            &[(&of_gk, true, true)]
        } else {
            &[(&of_gk, true, false), (&by_gk, false, true)]
        };
        for &(gk, of, by) in sides {
            let reader = KindReader {
                reads: vec![Read {
                    program: program.clone(),
                    of,
                    by,
                }],
            };
            let Some(kind) = by_kind.get(gk) else {
                continue;
            };
            let objects = json.entry(&kind.gk).or_insert_with(|| {
                kind.objects
                    .iter()
                    .map(|o| serde_json::to_value(o).unwrap_or_default())
                    .collect()
            });
            for (o, json) in kind.objects.iter().zip(objects.iter()) {
                let Some(name) = o.metadata.name.as_deref() else {
                    continue;
                };
                let key = gk.key(o.metadata.namespace.as_deref(), name);
                let uid = o.metadata.uid.as_deref();
                let Some(eval) = reader.reduce(json).pop() else {
                    continue;
                };
                for (side, of) in [(eval.of, true), (eval.by, false)] {
                    match side {
                        None => {}
                        Some(SideEval::Ok { keys, when }) => {
                            let upserted = index.join_mut(join).map(|mut j| {
                                if of {
                                    j.upsert_of(&key, uid, Some(keys))
                                } else {
                                    j.upsert_by(&key, uid, Some(keys), when)
                                }
                            });
                            if let Some(Err(e)) = upserted {
                                errors.push(format!("{key}: {e}"));
                            }
                        }
                        // As for an object the controller never evaluated: it joins nothing
                        // (the rule's status counts the error).
                        Some(SideEval::Failed { field, message }) => {
                            errors.push(format!("EvaluationError: {field} on {key}: {message}"));
                        }
                    }
                }
            }
        }
        if !errors.is_empty() {
            problems.insert(source.clone(), errors);
        }
        // The join's relations become the rule's (as `apply` of them did); the join itself,
        // and what it pins of objects that relate nothing, is not needed any more.
        let attached = index.join_mut(join).map_or(Ok(0), |mut j| j.attach());
        index.remove_join(join);
        attached?;
    }
    Ok(Graph {
        index,
        nodes,
        problems,
        usages,
    })
}

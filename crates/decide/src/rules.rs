//! DependencyRules: what the controller keeps of each rule, how a watched object is reduced to
//! what the rules need, and the status a rule should have. Pure: no I/O.
//!
//! # Data model
//!
//! A rule is compiled once per generation into a [`Program`] (its CEL, `lien_cel`), which has a
//! process-unique id. A kind that rules read is watched with full objects; the watch task holds
//! a [`KindReader`] — the programs of every rule reading the kind, fixed for the task's
//! lifetime — and reduces each object at once ([`KindReader::reduce`]) to its metadata plus,
//! per program, the evaluated keys and `when` (an [`Eval`]); the object itself is dropped
//! there, so full objects never reach the event loop, let alone its state. When the set of
//! programs reading a kind changes (a rule created, changed or deleted), the kind's watch
//! restarts with a new reader and relists: the event loop has no full objects to re-evaluate,
//! by design. An [`Eval`] made by a program that is no longer the rule's current one is
//! ignored; a rule's side counts as listed once a list made with its current program completed.
//!
//! The relations themselves are derived by one join per rule, kept in the shared
//! `lien_core::RelationIndex` (`RelationIndex::add_join`, which shares the index's keys, UIDs
//! and strings): per object, O(relations of that object). Once attached (both sides listed) a
//! join changes the rule's relations in the index itself.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use lien_api::{
    DependencyRule, DependencyRuleSpec, DependencyRuleStatus, DependencyScope, EvaluationError,
};
use lien_core::{GroupKind, JoinId, RelationIndex, RuleConfig, RuleScope, Source};
use serde_json::Value;

use crate::cache::Caches;
use crate::program::DependencyProgram;
use crate::resolve::Problem;

/// How many evaluation errors a rule's status lists (the count is always exact).
pub const STATUS_ERRORS_LIMIT: usize = 10;

/// How often at most a rule's status is rewritten when only its counts changed: a rule over
/// 100,000 objects sees an object change far more often than anyone reads its counts.
pub const STATUS_COUNTS_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The `Ready=False` reason of a rule whose CEL fails on some objects.
pub const EVALUATION_ERRORS_REASON: &str = "EvaluationErrors";

/// The longest error message quoted in the `EvaluationErrors` condition, in characters (the
/// whole of each listed error is in `status.errors`).
const QUOTED_ERROR_CHARS: usize = 200;

/// Whether `desired` differs from `previous` in its counts only (relations, objects, errors
/// counted), not in conditions, listed errors or generation: such a write may wait. The
/// `EvaluationErrors` condition's message carries the error count, so a change of its message
/// alone is a count too.
pub fn only_counts_differ(previous: &DependencyRuleStatus, desired: &DependencyRuleStatus) -> bool {
    let same = |a: &Condition, b: &Condition| {
        a.type_ == b.type_
            && a.status == b.status
            && a.reason == b.reason
            && a.observed_generation == b.observed_generation
            && (a.message == b.message || a.reason == EVALUATION_ERRORS_REASON)
    };
    previous.conditions.len() == desired.conditions.len()
        && previous
            .conditions
            .iter()
            .zip(&desired.conditions)
            .all(|(a, b)| same(a, b))
        && previous.errors == desired.errors
        && previous.observed_generation == desired.observed_generation
}

/// Why a rule whose problems are otherwise none is still not `Ready`: its CEL fails on `count`
/// objects (`first`: the first one listed). Those objects keep the relations they last had, so
/// nothing is unprotected, but the rule is not doing what it says for them, and `READY` in
/// `kubectl get dependencyrules` is where a person looks. Pure.
pub fn evaluation_errors_problem(
    count: u64,
    first: Option<&EvaluationError>,
) -> Option<(&'static str, String)> {
    if count == 0 {
        return None;
    }
    let objects = if count == 1 { "object" } else { "objects" };
    let mut message = format!("its CEL fails on {count} {objects}");
    if let Some(e) = first {
        let mut quoted: String = e.message.chars().take(QUOTED_ERROR_CHARS).collect();
        if e.message.chars().count() > QUOTED_ERROR_CHARS {
            quoted.push('…');
        }
        message.push_str(&format!("; first: {} on {}: {quoted}", e.field, e.object));
    }
    message.push_str(&format!(
        ". They keep the relations they last had; status.errors lists the first \
         {STATUS_ERRORS_LIMIT}: fix the objects or the rule"
    ));
    Some((EVALUATION_ERRORS_REASON, message))
}

/// What the controller keeps of a DependencyRule object.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// `metadata.resourceVersion`.
    pub resource_version: Option<String>,
    /// The spec.
    pub spec: DependencyRuleSpec,
    /// The current status.
    pub status: Option<DependencyRuleStatus>,
}

impl RuleView {
    /// The view of a rule; `None` without a name.
    pub fn from_rule(r: &DependencyRule) -> Option<Self> {
        Some(Self {
            name: r.metadata.name.clone()?,
            uid: r.metadata.uid.clone().unwrap_or_default(),
            generation: r.metadata.generation,
            resource_version: r.metadata.resource_version.clone(),
            spec: r.spec.clone(),
            status: r.status.clone(),
        })
    }

    /// The relations' source.
    pub fn source(&self) -> Source {
        Source::rule(&self.name)
    }

    /// The provider kind.
    pub fn of(&self) -> GroupKind {
        GroupKind::new(self.spec.of.group(), &self.spec.of.kind)
    }

    /// The dependent kind.
    pub fn by(&self) -> GroupKind {
        GroupKind::new(self.spec.by.group(), &self.spec.by.kind)
    }

    /// What the join needs.
    pub fn join_config(&self, keyed: bool) -> RuleConfig {
        RuleConfig {
            source: self.source(),
            of: self.of(),
            by: self.by(),
            scope: match self.spec.scope {
                DependencyScope::SameNamespace => RuleScope::SameNamespace,
                DependencyScope::Cluster => RuleScope::Cluster,
            },
            keyed,
            reason: self.spec.reason.clone(),
            replay: self.spec.replay_deletion,
            warn: self.spec.enforcement.warns(),
        }
    }
}

/// A rule's compiled CEL, with an id unique in this process (see the module docs).
#[derive(Debug)]
pub struct Program {
    /// The id.
    pub id: u64,
    /// The compiled expressions.
    pub cel: DependencyProgram,
}

impl Program {
    /// Compiles `spec`; the errors name their fields.
    pub fn compile(spec: &DependencyRuleSpec) -> Result<Arc<Self>, Vec<lien_cel::CompileError>> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let cel = DependencyProgram::compile(spec)?;
        Ok(Arc::new(Self {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            cel,
        }))
    }
}

/// One rule reading a kind, as a kind watch sees it.
#[derive(Debug, Clone)]
pub struct Read {
    /// The rule's program.
    pub program: Arc<Program>,
    /// The kind is the rule's `of` kind.
    pub of: bool,
    /// The kind is the rule's `by` kind.
    pub by: bool,
}

/// The programs a kind's watch evaluates on each object (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct KindReader {
    /// Every rule reading the kind.
    pub reads: Vec<Read>,
}

/// What one side's CEL made of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideEval {
    /// Its keys (empty for a rule without keys) and whether `when` held (always for `of`).
    Ok {
        /// The keys.
        keys: Vec<String>,
        /// `when`.
        when: bool,
    },
    /// The evaluation failed.
    Failed {
        /// The field whose expression failed.
        field: &'static str,
        /// Why.
        message: String,
    },
}

/// What one program made of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eval {
    /// The program's id.
    pub program: u64,
    /// As an `of` object, when the kind is the rule's `of` kind.
    pub of: Option<SideEval>,
    /// As a `by` object, when the kind is the rule's `by` kind.
    pub by: Option<SideEval>,
}

impl KindReader {
    /// The ids of the programs, sorted: two readers with the same signature read the same.
    pub fn signature(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.reads.iter().map(|r| r.program.id).collect();
        ids.sort_unstable();
        ids
    }

    /// Whether this reader evaluates `program`.
    pub fn reads(&self, program: u64) -> bool {
        self.reads.iter().any(|r| r.program.id == program)
    }

    /// Evaluates every program on `object` (the whole object as JSON, `self` in CEL). An error
    /// of one program never stops the others.
    pub fn reduce(&self, object: &Value) -> Vec<Eval> {
        self.reads
            .iter()
            .map(|r| {
                let cel = &r.program.cel;
                let of = r.of.then(|| match cel.keys_of(object) {
                    Ok(keys) => SideEval::Ok { keys, when: true },
                    Err(e) => SideEval::Failed {
                        field: "spec.keys.of",
                        message: e.to_string(),
                    },
                });
                let by = r.by.then(|| {
                    let when = match cel.when(object) {
                        Ok(w) => w,
                        Err(e) => {
                            return SideEval::Failed {
                                field: "spec.when",
                                message: e.to_string(),
                            };
                        }
                    };
                    // Keys of an object `when` excludes are not needed (and may not exist).
                    if !when {
                        return SideEval::Ok {
                            keys: Vec::new(),
                            when,
                        };
                    }
                    match cel.keys_by(object) {
                        Ok(keys) => SideEval::Ok { keys, when },
                        Err(e) => SideEval::Failed {
                            field: "spec.keys.by",
                            message: e.to_string(),
                        },
                    }
                });
                Eval {
                    program: r.program.id,
                    of,
                    by,
                }
            })
            .collect()
    }
}

/// Everything the controller keeps of one rule.
#[derive(Debug)]
pub struct RuleState {
    /// The rule as last seen.
    pub view: RuleView,
    /// The compiled program, or why it does not compile.
    pub program: Result<Arc<Program>, Vec<lien_cel::CompileError>>,
    /// The rule's join in the shared index; `None` when the program does not compile (the
    /// rule holds nothing) or the index had no room for it. Whoever drops or replaces the
    /// state removes it (`RelationIndex::remove_join`), or the objects it pins leak.
    pub join: Option<JoinId>,
    /// A list of the `of` kind made with the current program completed.
    pub of_listed: bool,
    /// Likewise for the `by` kind.
    pub by_listed: bool,
    /// The join is attached: its relations are the index's relations of the rule, and its
    /// updates change them there (mirrors `JoinRef::is_attached`, so that readiness needs no
    /// lock). False until both sides are listed: until then the relations of the rule's
    /// previous generation stay (a rule being re-listed must not lift protection); false again
    /// when the index had no room, until the join is attached again.
    pub in_index: bool,
    /// Objects the CEL currently fails on, by (field, object), at most
    /// [`STATUS_ERRORS_LIMIT`].
    pub errors: BTreeMap<(String, String), EvaluationError>,
}

impl RuleState {
    /// A new rule state: compiled, not listed, without a join yet (the caller adds it to its
    /// index with [`RuleState::join_config`]).
    pub fn new(view: RuleView) -> Self {
        let program = Program::compile(&view.spec);
        Self {
            view,
            program,
            join: None,
            of_listed: false,
            by_listed: false,
            in_index: false,
            errors: BTreeMap::new(),
        }
    }

    /// What the rule's join needs; `None` when the program does not compile (no join).
    pub fn join_config(&self) -> Option<RuleConfig> {
        let program = self.program.as_ref().ok()?;
        Some(self.view.join_config(program.cel.keyed()))
    }

    /// The current program's id, if it compiles.
    pub fn program_id(&self) -> Option<u64> {
        self.program.as_ref().ok().map(|p| p.id)
    }

    /// Records or clears an evaluation error of `object` for `field` (bounded).
    pub fn note_error(&mut self, field: &str, object: String, message: Option<String>) {
        let key = (field.to_owned(), object);
        match message {
            Some(message) => {
                if self.errors.len() < STATUS_ERRORS_LIMIT || self.errors.contains_key(&key) {
                    self.errors.insert(
                        key.clone(),
                        EvaluationError {
                            field: key.0,
                            object: key.1,
                            message,
                        },
                    );
                }
            }
            None => {
                self.errors.remove(&key);
            }
        }
    }

    /// Records what one side's evaluation of `object` made (`of_side`: `spec.keys.of`, else
    /// `spec.keys.by` and `spec.when`): only its current failure is listed, since a `by`
    /// object's may move between `spec.when` and `spec.keys.by`.
    pub fn note_evaluation(&mut self, of_side: bool, eval: &SideEval, object: &str) {
        let fields: &[&str] = if of_side {
            &["spec.keys.of"]
        } else {
            &["spec.keys.by", "spec.when"]
        };
        for field in fields {
            self.note_error(field, object.to_owned(), None);
        }
        if let SideEval::Failed { field, message } = eval {
            self.note_error(field, object.to_owned(), Some(message.clone()));
        }
    }

    /// Forgets every error of `object`.
    pub fn clear_errors(&mut self, object: &str) {
        self.errors.retain(|(_, o), _| o != object);
    }
}

/// Why a rule is not `Ready`, in order of precedence: its CEL, its kinds (not served, or
/// cluster-scoped under `SameNamespace`, where it could never relate anything), a cycle, a
/// list still running. `caches` says which kinds discovery serves, at which scope.
pub fn rule_problem(
    rule: &RuleState,
    caches: &Caches,
    cycle: Option<&Problem>,
) -> Option<(&'static str, String)> {
    if let Err(errors) = &rule.program {
        let message = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Some(("InvalidExpression", message));
    }
    let spec = &rule.view.spec;
    let (of, by) = (rule.view.of(), rule.view.by());
    for (gk, field, k) in [(&of, "spec.of", &spec.of), (&by, "spec.by", &spec.by)] {
        if caches.is_unknown(gk) {
            return Some((
                "UnknownKind",
                format!(
                    "{field}: the API server does not serve kind {} in {}; the rule derives \
                     nothing until it does (install its CustomResourceDefinition)",
                    k.kind, k.api_version
                ),
            ));
        }
        if let Some(resource) = caches.forbidden(gk) {
            let m = crate::resolve::not_permitted_message(field, &k.kind, &k.api_version, resource);
            return Some(("NotPermitted", m));
        }
        let cluster_scoped = caches.kind(gk).is_some_and(|c| !c.namespaced);
        if cluster_scoped && spec.scope == DependencyScope::SameNamespace {
            return Some((
                "InvalidScope",
                format!(
                    "{field}: {} is cluster-scoped, so under scope SameNamespace it shares no \
                     namespace with anything and the rule derives nothing; set spec.scope to \
                     Cluster",
                    k.kind
                ),
            ));
        }
    }
    if let Some(c) = cycle {
        return Some(("Cycle", c.message.clone()));
    }
    if !rule.in_index {
        return Some((
            "Pending",
            "listing the objects of its kinds; the relations of its previous generation hold \
             meanwhile"
                .to_owned(),
        ));
    }
    None
}

/// The status a rule should have; `None` when it already has it. Its counts are its join's
/// in `index`. `unenforced`: why Lien's webhook configuration is missing or differs.
pub fn rule_status(
    rule: &RuleState,
    index: &RelationIndex,
    caches: &Caches,
    cycle: Option<&Problem>,
    unenforced: Option<&str>,
    now: Timestamp,
) -> Option<DependencyRuleStatus> {
    let previous = rule.view.status.as_ref();
    let generation = rule.view.generation;
    let written = previous.map_or(&[][..], |s| s.conditions.as_slice());
    let cond = |type_: &str, status: bool, reason: &str, message: String| {
        crate::desired::condition(written, type_, status, reason, message, generation, now)
    };
    let join = rule.join.and_then(|id| index.join(id));
    let relations = join.map_or(0, |j| j.len());
    let conditions = if let Some(why) = unenforced {
        let message = format!("{why}: DELETEs are not checked by Lien until it is restored");
        let reason = crate::desired::NOT_CONFIGURED_REASON;
        vec![
            cond("Ready", false, reason, message.clone()),
            cond("InUse", false, reason, message),
        ]
    } else {
        let errors = join.map_or(0, |j| j.error_count()) as u64;
        let problem = rule_problem(rule, caches, cycle)
            .or_else(|| evaluation_errors_problem(errors, rule.errors.values().next()));
        let ready = match problem {
            Some((reason, message)) => cond("Ready", false, reason, message),
            None if rule.view.spec.enforcement.warns() => cond(
                "Ready",
                true,
                crate::desired::WARN_ONLY_REASON,
                format!(
                    "its expressions compile and its kinds are listed; {}",
                    crate::desired::WARN_ONLY_MESSAGE
                ),
            ),
            None => cond(
                "Ready",
                true,
                "Derived",
                "its expressions compile and its kinds are listed".to_owned(),
            ),
        };
        let in_use = if relations == 0 {
            cond(
                "InUse",
                false,
                "NotInUse",
                "no object is protected by this rule".to_owned(),
            )
        } else {
            cond(
                "InUse",
                true,
                "InUse",
                "the rule holds at least one relation (status.relations counts them)".to_owned(),
            )
        };
        vec![ready, in_use]
    };
    let (of_objects, by_objects) = join.map_or((0, 0), |j| j.object_counts());
    let desired = DependencyRuleStatus {
        conditions,
        relations: relations as u64,
        of_objects: of_objects as u64,
        by_objects: by_objects as u64,
        evaluation_errors: join.map_or(0, |j| j.error_count()) as u64,
        errors: rule.errors.values().cloned().collect(),
        observed_generation: generation,
    };
    (previous != Some(&desired)).then_some(desired)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(message: &str) -> EvaluationError {
        EvaluationError {
            field: "spec.keys.by".into(),
            object: "WebApp ns/broken".into(),
            message: message.into(),
        }
    }

    /// Issue 19 §5: a rule whose CEL fails on some objects is `Ready=False`, saying how many
    /// and the first error (quoted, bounded).
    #[test]
    fn evaluation_errors_make_a_rule_not_ready_naming_the_count_and_the_first() {
        assert_eq!(evaluation_errors_problem(0, None), None);
        let (reason, message) =
            evaluation_errors_problem(3, Some(&error("no such key: settings"))).expect("a problem");
        assert_eq!(reason, EVALUATION_ERRORS_REASON);
        assert!(
            message.starts_with(
                "its CEL fails on 3 objects; first: spec.keys.by on WebApp ns/broken: no such key: settings. "
            ),
            "{message}"
        );
        assert!(
            message.contains("keep the relations they last had"),
            "{message}"
        );
        let (_, one) = evaluation_errors_problem(1, None).expect("a problem");
        assert!(one.starts_with("its CEL fails on 1 object. "), "{one}");
        let (_, long) =
            evaluation_errors_problem(1, Some(&error(&"x".repeat(5000)))).expect("a problem");
        assert!(long.len() < 500, "bounded: {}", long.len());
        assert!(long.contains("x…"), "{long}");
    }

    fn ready(reason: &str, message: &str) -> Condition {
        Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::UNIX_EPOCH,
            ),
            observed_generation: Some(1),
        }
    }

    /// The error count in the `EvaluationErrors` message is a count: it waits like the others;
    /// any other change of a condition is written at once.
    #[test]
    fn an_error_count_in_the_ready_message_is_only_a_count() {
        let status = |c: Condition, relations: u64| DependencyRuleStatus {
            conditions: vec![c],
            relations,
            observed_generation: Some(1),
            ..Default::default()
        };
        let a = status(ready(EVALUATION_ERRORS_REASON, "fails on 2 objects"), 1);
        let b = status(ready(EVALUATION_ERRORS_REASON, "fails on 3 objects"), 2);
        assert!(only_counts_differ(&a, &b));
        let c = status(ready("Cycle", "a uses b"), 1);
        let d = status(ready("Cycle", "a uses c"), 1);
        assert!(!only_counts_differ(&c, &d));
        assert!(!only_counts_differ(&a, &c));
        let mut e = b.clone();
        e.conditions.clear();
        assert!(!only_counts_differ(&b, &e));
    }
}

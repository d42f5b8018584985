//! Admission of `DependencyRule`s and `CascadeRule`s (CREATE and UPDATE): their CEL must
//! compile, and their creator must consent — be allowed what the rule makes Lien do.
//!
//! # Why each check
//!
//! - **CEL compiles.** A rule's expressions are compiled once, here, so that a typo is refused
//!   at `kubectl apply` time naming the field (`spec.keys.by: …`) instead of showing up later as
//!   `Ready=False`. Compilation is behind [`RuleCompiler`] so that this module stays pure and
//!   testable with a fake; the default, [`CelCompiler`], is `lien_decide::program`'s, the controller's own.
//! - **Unknown kinds are allowed.** A rule may name a kind whose CRD is installed later (GitOps
//!   applies everything at once); the controller reports it `Ready=False` and re-checks when
//!   CRDs appear.
//! - **Consent (DependencyRule).** A rule can make *every* object of its `spec.of` kind
//!   undeletable and have Lien label them, so whoever creates it, or changes what it relates
//!   (`of`, `by`, `scope`, `keys`, `when`) or switches it from `enforcement: Warn` to `Deny`,
//!   must hold the right a Usage over each of those
//!   objects needs: `update` on the `of` kind's resource, cluster-wide (a `SubjectAccessReview`
//!   with no namespace and no name). Editing only `reason` or `replayDeletion` needs nothing
//!   beyond RBAC on the rule itself.
//! - **Consent (CascadeRule).** A rule makes Lien delete, with its own rights, the children a
//!   deleted parent names. Lien deletes only children of the kinds the rule lists in
//!   `spec.childKinds` that name their parent back (see `controller::cascade::decide`), so the
//!   creator must be allowed to `delete` every object of the parent kind cluster-wide —
//!   whoever may delete any parent may already trigger the cascade by deleting one — and every
//!   object of each child kind cluster-wide: the rule delegates exactly those deletions to
//!   Lien, and only someone who could make them may delegate them. The questions are asked in
//!   order (parent, then each child kind) and the first refusal names its field.
//! - **A kind that is not served yet** has no known resource name; the check then asks for the
//!   right on every resource of its API group (`<group>/*`), which only the group's owners hold.
//!   Creating the rule after its CRD needs only the kind's own resource.

use std::fmt::Write as _;

use lien_api::{CascadeRuleSpec, DependencyRuleSpec, KindRef};
use lien_core::seams::{AccessRequest, Requester};
use serde::Deserialize;

use crate::review::{Operation, Request};
use crate::validate::{
    Authorize, Consent, KindResolver, Outcome, Scope, UsageUserInfo, qualified_resource,
};

/// One CEL expression that does not compile: the field (`spec.keys.by`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleProblem {
    /// The field, as a path from the object (`spec.when`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

/// Compiles a rule's CEL (injected: `lien::runtime` uses `lien_decide::program`). An empty list means
/// every expression compiles.
pub trait RuleCompiler: Send + Sync {
    /// The `keys` and `when` expressions of a DependencyRule.
    fn dependency(&self, spec: &DependencyRuleSpec) -> Vec<RuleProblem>;
    /// The `children` and `propagationPolicyExpression` expressions of a CascadeRule.
    fn cascade(&self, spec: &CascadeRuleSpec) -> Vec<RuleProblem>;
}

/// The default compiler: `lien_decide::program`'s `DependencyProgram::compile` and
/// `CascadeProgram::compile` — the same compilation the controller runs (parse, refuse unbound
/// identifiers and unknown functions, bound the cost), so a rule admitted here compiles there.
#[derive(Debug, Clone, Copy, Default)]
pub struct CelCompiler;

fn problems(errors: Vec<lien_cel::CompileError>) -> Vec<RuleProblem> {
    errors
        .into_iter()
        .map(|e| RuleProblem {
            field: e.field,
            // CEL's parser reports over several lines (the source and a caret under the
            // error); one line reads better in a refusal.
            message: e
                .message
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(" "),
        })
        .collect()
}

impl RuleCompiler for CelCompiler {
    fn dependency(&self, spec: &DependencyRuleSpec) -> Vec<RuleProblem> {
        lien_decide::program::DependencyProgram::compile(spec)
            .err()
            .map(problems)
            .unwrap_or_default()
    }

    fn cascade(&self, spec: &CascadeRuleSpec) -> Vec<RuleProblem> {
        lien_decide::program::CascadeProgram::compile(spec)
            .err()
            .map(problems)
            .unwrap_or_default()
    }
}

/// Whether the review is of a `DependencyRule` or `CascadeRule`.
pub fn is_rule_kind(req: &Request<'_>) -> bool {
    req.kind.group == lien_api::GROUP
        && matches!(req.kind.kind.as_ref(), "DependencyRule" | "CascadeRule")
}

#[derive(Deserialize)]
struct RuleBody {
    request: RuleRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleRequest {
    #[serde(default)]
    object: Option<SpecHolder>,
    #[serde(default)]
    old_object: Option<SpecHolder>,
    #[serde(default)]
    user_info: Option<UsageUserInfo>,
}

#[derive(Deserialize)]
struct SpecHolder {
    #[serde(default)]
    spec: Option<serde_json::Value>,
}

/// CREATE or UPDATE of a rule: well-formed kinds, a reason, CEL that compiles, then (when
/// `check_access`) consent as [`Outcome::Authorize`]. `body` is the whole review (rules are
/// small; Lien decodes them).
pub fn validate_rule(
    kinds: &dyn KindResolver,
    compiler: &dyn RuleCompiler,
    req: &Request<'_>,
    body: &[u8],
    check_access: bool,
) -> Outcome {
    let kind = req.kind.kind.as_ref();
    let (spec, old_spec, user) = match serde_json::from_slice::<RuleBody>(body) {
        Ok(RuleBody {
            request:
                RuleRequest {
                    object: Some(SpecHolder { spec: Some(spec) }),
                    old_object,
                    user_info,
                },
        }) => (spec, old_object.and_then(|o| o.spec), user_info),
        Ok(_) => return Outcome::invalid(format!("{kind} has no spec")),
        Err(e) => return Outcome::invalid(format!("cannot read {kind}: {e}")),
    };
    let user: Requester = user.unwrap_or_default().into();
    if kind == "CascadeRule" {
        validate_cascade(kinds, compiler, req, spec, old_spec, user, check_access)
    } else {
        validate_dependency(kinds, compiler, req, spec, old_spec, user, check_access)
    }
}

fn invalid_spec(kind: &str, e: &serde_json::Error) -> Outcome {
    Outcome::deny(
        422,
        "Invalid",
        format!("spec: {e}; correct the {kind}'s spec (see `kubectl explain {kind}.spec`)",),
    )
}

fn validate_dependency(
    kinds: &dyn KindResolver,
    compiler: &dyn RuleCompiler,
    req: &Request<'_>,
    spec: serde_json::Value,
    old_spec: Option<serde_json::Value>,
    user: Requester,
    check_access: bool,
) -> Outcome {
    let spec: DependencyRuleSpec = match serde_json::from_value(spec) {
        Ok(spec) => spec,
        Err(e) => return invalid_spec("DependencyRule", &e),
    };
    let mut problems = Vec::new();
    check_kind("spec.of", &spec.of, &mut problems);
    check_kind("spec.by", &spec.by, &mut problems);
    if spec.of.group() == lien_api::GROUP {
        problems.push(format!(
            "spec.of: {} ({}) is one of Lien's own kinds, which are never protected (rules and Usages would block each other's deletion); point spec.of at the provider kind",
            spec.of.kind, spec.of.api_version
        ));
    }
    if spec.reason.trim().is_empty() {
        problems.push(
            "spec.reason: must not be blank; say in words why the provider must stay (it is shown in every refused DELETE)".to_owned(),
        );
    } else if spec.reason.chars().count() > lien_api::MAX_REASON_CHARS {
        problems.push(format!(
            "spec.reason: {} characters is too long: at most {}; shorten it",
            spec.reason.chars().count(),
            lien_api::MAX_REASON_CHARS
        ));
    }
    compile_problems(compiler.dependency(&spec), &mut problems);
    if !problems.is_empty() {
        return Outcome::deny(422, "Invalid", problems.join("; "));
    }
    if !check_access {
        return Outcome::allow();
    }
    let changed = match (req.operation, old_spec) {
        (Operation::Update, Some(old)) => {
            match serde_json::from_value::<DependencyRuleSpec>(old) {
                // What the rule relates, or its switch from warning to refusing; `reason` and
                // `replayDeletion` change no one's rights.
                Ok(old) => {
                    (&old.of, &old.by, old.scope, &old.keys, &old.when)
                        != (&spec.of, &spec.by, spec.scope, &spec.keys, &spec.when)
                        || (old.enforcement.warns() && !spec.enforcement.warns())
                }
                Err(_) => true,
            }
        }
        _ => true,
    };
    if !changed {
        return Outcome::allow();
    }
    consent(kinds, req, &spec.of, "update", user, |served| {
        Consent::DependencyRule {
            kind: spec.of.kind.clone(),
            served,
        }
    })
}

fn validate_cascade(
    kinds: &dyn KindResolver,
    compiler: &dyn RuleCompiler,
    req: &Request<'_>,
    spec: serde_json::Value,
    old_spec: Option<serde_json::Value>,
    user: Requester,
    check_access: bool,
) -> Outcome {
    let spec: CascadeRuleSpec = match serde_json::from_value(spec) {
        Ok(spec) => spec,
        Err(e) => return invalid_spec("CascadeRule", &e),
    };
    let mut problems = Vec::new();
    check_kind("spec.parent", &spec.parent, &mut problems);
    if spec.child_kinds.is_empty() {
        problems.push(
            "spec.childKinds: must list at least one kind: the kinds Lien may delete for this rule, each with a backReference (CEL over the child naming its parent, e.g. `self.spec.claimRef`); a child of any other kind is never deleted".to_owned(),
        );
    }
    for (i, k) in spec.child_kinds.iter().enumerate() {
        crate::validate::check_kind(
            &format!("spec.childKinds[{i}]"),
            &k.of.api_version,
            &k.of.kind,
            &mut problems,
        );
    }
    compile_problems(compiler.cascade(&spec), &mut problems);
    if !problems.is_empty() {
        return Outcome::deny(422, "Invalid", problems.join("; "));
    }
    if !check_access {
        return Outcome::allow();
    }
    let changed = match (req.operation, old_spec) {
        (Operation::Update, Some(old)) => {
            serde_json::from_value::<CascadeRuleSpec>(old).map_or(true, |old| old != spec)
        }
        _ => true,
    };
    if !changed {
        return Outcome::allow();
    }
    // Asked in order; each allowed answer asks the next.
    let mut chain = None;
    for (index, k) in spec.child_kinds.iter().enumerate().rev() {
        let Outcome::Authorize(mut a) =
            consent(kinds, req, &k.of, "delete", user.clone(), |served| {
                Consent::CascadeChild {
                    kind: k.of.kind.clone(),
                    index,
                    served,
                }
            })
        else {
            unreachable!("consent always asks")
        };
        a.next = chain.map(Box::new);
        chain = Some(a);
    }
    let Outcome::Authorize(mut first) =
        consent(kinds, req, &spec.parent, "delete", user, |served| {
            Consent::CascadeRule {
                kind: spec.parent.kind.clone(),
                served,
            }
        })
    else {
        unreachable!("consent always asks")
    };
    first.next = chain.map(Box::new);
    Outcome::Authorize(first)
}

/// Adds the compiler's problems to `problems`, each naming its field, with the fix.
fn compile_problems(found: Vec<RuleProblem>, problems: &mut Vec<String>) {
    for p in found {
        problems.push(format!(
            "{}: {}; correct the CEL expression (it reads the object as `self`) and apply again",
            p.field, p.message
        ));
    }
}

fn check_kind(field: &str, side: &KindRef, problems: &mut Vec<String>) {
    crate::validate::check_kind(field, &side.api_version, &side.kind, problems);
}

/// The cluster-wide access question for every object of `kind`; see the module docs.
fn consent(
    kinds: &dyn KindResolver,
    req: &Request<'_>,
    kind: &KindRef,
    verb: &str,
    user: Requester,
    why: impl FnOnce(bool) -> Consent,
) -> Outcome {
    let served = kinds
        .scope(&kind.api_version, &kind.kind)
        .zip(kinds.resource(&kind.api_version, &kind.kind));
    let (scope, resource) = served
        .clone()
        .unwrap_or((Scope::Namespaced, "*".to_owned()));
    Outcome::Authorize(Authorize {
        request: AccessRequest {
            user,
            verb: verb.to_owned(),
            group: kind.group().to_owned(),
            resource,
            namespace: None,
            name: None,
        },
        usage_kind: req.kind.kind.clone().into_owned(),
        scope,
        consent: why(served.is_some()),
        next: None,
    })
}

/// The field a consent is about.
pub(crate) fn consent_field(consent: &Consent) -> String {
    match consent {
        Consent::CascadeRule { .. } => "spec.parent".to_owned(),
        Consent::CascadeChild { index, .. } => format!("spec.childKinds[{index}]"),
        Consent::Usage | Consent::DependencyRule { .. } => "spec.of".to_owned(),
    }
}

/// `update every object of cephblockpools.ceph.rook.io in every namespace`.
pub(crate) fn describe_rule_access(r: &AccessRequest, scope: Scope, consent: &Consent) -> String {
    let served = match consent {
        Consent::DependencyRule { served, .. }
        | Consent::CascadeRule { served, .. }
        | Consent::CascadeChild { served, .. } => *served,
        Consent::Usage => true,
    };
    if !served {
        return format!(
            "{} every resource of API group {:?} (the kind is not served yet, so Lien cannot tell which resource it will be)",
            r.verb, r.group
        );
    }
    let scope = match scope {
        Scope::Cluster => "at the cluster scope",
        Scope::Namespaced => "in every namespace",
    };
    format!(
        "{} every object of {} {scope}",
        r.verb,
        qualified_resource(r)
    )
}

/// The 403 message of a refused rule: who, what, why, and the fix.
pub(crate) fn consent_refusal(r: &AccessRequest, scope: Scope, consent: &Consent) -> String {
    let what = describe_rule_access(r, scope, consent);
    let field = consent_field(consent);
    let mut message = format!("{field}: user {:?} may not {what}; ", r.user.username);
    match consent {
        Consent::DependencyRule { kind, .. } => {
            let _ = write!(
                message,
                "a DependencyRule can make any {kind} undeletable and has Lien label it, so whoever creates it or changes what it relates (of, by, scope, keys, when) must hold the right a Usage over every {kind} needs"
            );
        }
        Consent::CascadeRule { kind, .. } => {
            let _ = write!(
                message,
                "a CascadeRule makes Lien delete (with its own rights) the children every {kind} names when it is deleted, so whoever creates or changes it must be allowed to delete every {kind}"
            );
        }
        Consent::CascadeChild { kind, .. } => {
            let _ = write!(
                message,
                "a CascadeRule makes Lien delete (with its own rights) the {kind} objects its parents name, so whoever creates or changes it must be allowed to delete every {kind} (or remove the kind from spec.childKinds)"
            );
        }
        Consent::Usage => {}
    }
    let resource = if r.resource == "*" {
        format!("every resource of API group {:?}", r.group)
    } else {
        qualified_resource(r)
    };
    let _ = write!(
        message,
        ". Grant {:?} on {resource} cluster-wide (a ClusterRole bound by a ClusterRoleBinding), or ask someone who has it to apply this {}",
        r.verb,
        match consent {
            Consent::CascadeRule { .. } | Consent::CascadeChild { .. } => "CascadeRule",
            _ => "DependencyRule",
        }
    );
    message
}

//! CREATE or UPDATE of a `Usage` or `ClusterUsage`: the checks CEL cannot make, then the
//! access check on `spec.of`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lien_api::ResourceSpec;
use lien_core::seams::{AccessDecision, AccessRequest, Requester};
use serde::Deserialize;

use super::{KindResolver, Outcome, Scope};
use crate::review::{Operation, Request};

#[derive(Deserialize)]
struct UsageBody {
    request: UsageRequest,
}

/// The Usage path's own view of the request: unlike [`Request`] it decodes the spec and the
/// whole `userInfo` (with `uid` and `extra`, which the access check passes on). Usages are
/// small, so decoding them costs nothing that matters.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageRequest {
    object: Option<UsageObject>,
    #[serde(default)]
    old_object: Option<OldUsageObject>,
    #[serde(default)]
    user_info: Option<UsageUserInfo>,
}

#[derive(Deserialize)]
struct UsageObject {
    #[serde(default)]
    spec: Option<UsageSpecSides>,
}

#[derive(Deserialize)]
struct UsageSpecSides {
    of: ResourceSpec,
    #[serde(default)]
    by: Option<ResourceSpec>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    enforcement: lien_api::Enforcement,
}

/// The stored Usage of an UPDATE: only `spec.of`, leniently (a Usage stored before a schema
/// change must not make every update of it unreadable).
#[derive(Deserialize)]
struct OldUsageObject {
    #[serde(default)]
    spec: Option<OldUsageSpec>,
}

#[derive(Deserialize)]
struct OldUsageSpec {
    #[serde(default)]
    of: Option<serde_json::Value>,
    /// Leniently: a value this version does not know counts as enforced.
    #[serde(default)]
    enforcement: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
pub(crate) struct UsageUserInfo {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    groups: Option<Vec<String>>,
    #[serde(default)]
    extra: Option<BTreeMap<String, Vec<String>>>,
}

impl From<UsageUserInfo> for Requester {
    fn from(u: UsageUserInfo) -> Self {
        Requester {
            username: u.username.unwrap_or_default(),
            uid: u.uid.unwrap_or_default(),
            groups: u.groups.unwrap_or_default(),
            extra: u.extra.unwrap_or_default(),
        }
    }
}

/// A valid Usage whose creator must still be shown to be allowed to update `spec.of`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorize {
    /// The question for the access check.
    pub request: AccessRequest,
    /// The Usage's kind (`Usage`, `ClusterUsage`), for the message.
    pub usage_kind: String,
    /// The scope of `spec.of`'s kind: `request.namespace: None` means "cluster-scoped" for one
    /// and "every namespace" for the other.
    pub scope: Scope,
    /// Why the right is needed, for the message: a Usage (the default) or a rule.
    pub consent: Consent,
    /// The next question, asked only if this one is allowed (a CascadeRule needs `delete` on
    /// its parent kind and on each of its child kinds).
    pub next: Option<Box<Authorize>>,
}

/// What an access check gives consent to; only the wording of a refusal depends on it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Consent {
    /// A Usage or ClusterUsage protecting `spec.of`.
    #[default]
    Usage,
    /// A DependencyRule, which can make any object of its `spec.of` kind undeletable.
    DependencyRule {
        /// `spec.of.kind`.
        kind: String,
        /// Whether the kind is served: if not, the check is over every resource of its group.
        served: bool,
    },
    /// A CascadeRule, whose parents' deletion deletes what they name.
    CascadeRule {
        /// `spec.parent.kind`.
        kind: String,
        /// As for [`Consent::DependencyRule`].
        served: bool,
    },
    /// A CascadeRule's child kind (`spec.childKinds[index]`), which Lien then deletes with its
    /// own rights.
    CascadeChild {
        /// `spec.childKinds[index].kind`.
        kind: String,
        /// The position in `spec.childKinds`.
        index: usize,
        /// As for [`Consent::DependencyRule`].
        served: bool,
    },
}

impl Authorize {
    /// Finishes the decision with the access check's answer. An error denies (fail closed): a
    /// refused Usage can be created again, a Usage wrongly admitted protects something its
    /// creator had no say over.
    pub fn resolve<E: std::fmt::Display>(self, checked: Result<AccessDecision, E>) -> Outcome {
        let r = &self.request;
        let what = describe_access(r, self.scope);
        match checked {
            Ok(AccessDecision::Allowed) => match self.next {
                Some(next) => Outcome::Authorize(*next),
                None => Outcome::allow(),
            },
            Ok(AccessDecision::Denied { reason }) if self.consent != Consent::Usage => {
                let mut message = crate::rules::consent_refusal(r, self.scope, &self.consent);
                if !reason.trim().is_empty() {
                    let _ = write!(message, " (authorizer: {})", reason.trim());
                }
                Outcome::deny(403, "Forbidden", message)
            }
            Ok(AccessDecision::Denied { reason }) => {
                let mut message = format!(
                    "spec.of: user {:?} may not {what}; a {kind} blocks deletion of its spec.of object and has Lien label it, so whoever creates the {kind} must be allowed to update that object (as Kubernetes requires permission on an owner before a dependent may set blockOwnerDeletion on it). Grant {:?} on {} {}, or ask someone who has it to create this {kind}",
                    r.user.username,
                    r.verb,
                    qualified_resource(r),
                    scope_phrase(r, self.scope),
                    kind = self.usage_kind,
                );
                if !reason.trim().is_empty() {
                    let _ = write!(message, " (authorizer: {})", reason.trim());
                }
                Outcome::deny(403, "Forbidden", message)
            }
            Err(e) => Outcome::deny(
                500,
                "InternalError",
                format!(
                    "{}: cannot check whether user {:?} may {} ({e}); refusing the {} until Lien can check, retry shortly",
                    crate::rules::consent_field(&self.consent),
                    r.user.username,
                    match self.consent {
                        Consent::Usage => what,
                        _ => crate::rules::describe_rule_access(r, self.scope, &self.consent),
                    },
                    self.usage_kind
                ),
            ),
        }
    }
}

/// `configmaps`, `widgets.example.org`: how kubectl and kube-apiserver name a resource.
pub(crate) fn qualified_resource(r: &AccessRequest) -> String {
    if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    }
}

/// `in namespace "team-b"`, `in every namespace`, `at the cluster scope`.
fn scope_phrase(r: &AccessRequest, scope: Scope) -> String {
    match (scope, &r.namespace) {
        (Scope::Cluster, _) => "at the cluster scope".to_owned(),
        (Scope::Namespaced, Some(ns)) => format!("in namespace {ns:?}"),
        (Scope::Namespaced, None) => "in every namespace".to_owned(),
    }
}

/// `update configmaps "settings" in namespace "team-b"`, or for a selector `update every
/// object of configmaps in namespace "team-b" (spec.of uses a resourceSelector, which may match
/// any of them)`.
fn describe_access(r: &AccessRequest, scope: Scope) -> String {
    let resource = qualified_resource(r);
    let scope = scope_phrase(r, scope);
    match &r.name {
        Some(name) => format!("{} {resource} {name:?} {scope}", r.verb),
        None => format!(
            "{} every object of {resource} {scope} (spec.of uses a resourceSelector, which may match any of them)",
            r.verb
        ),
    }
}

/// CREATE or UPDATE of a `Usage` or `ClusterUsage`: the checks CEL cannot make — the kinds
/// exist, and each side's namespace fits its kind's scope — and then, when `check_access` is
/// set, whether the user may protect `spec.of` ([`Outcome::Authorize`]). `body` is the whole
/// review (the Usage's spec is the one object Lien does decode; Usages are small).
///
/// Why that permission: a Usage blocks the deletion of its `spec.of` object and makes Lien write
/// a label onto it. Kubernetes itself requires permission on an owner (its `finalizers`
/// subresource, or delete) before a dependent may set `blockOwnerDeletion` on it; for the same
/// reason, a Usage may only be created by someone allowed to `update` the object it protects —
/// otherwise anyone who may create Usages in some namespace could pin anyone else's objects.
/// An UPDATE is checked only when `spec.of` changed (who may edit a Usage's `reason` is RBAC's
/// business, not Lien's).
pub fn validate_usage(
    kinds: &dyn KindResolver,
    req: &Request<'_>,
    body: &[u8],
    check_access: bool,
) -> Outcome {
    let cluster_usage = req.kind.kind == "ClusterUsage";
    let (spec, old, user) = match serde_json::from_slice::<UsageBody>(body) {
        Ok(UsageBody {
            request:
                UsageRequest {
                    object: Some(UsageObject { spec: Some(spec) }),
                    old_object,
                    user_info,
                },
        }) => (spec, old_object.and_then(|o| o.spec), user_info),
        Ok(_) => return Outcome::invalid(format!("{} has no spec", req.kind.kind)),
        Err(e) => return Outcome::invalid(format!("cannot read {}: {e}", req.kind.kind)),
    };
    let mut problems = Vec::new();
    check_spec(&spec, req, &mut problems);
    if problems.is_empty() {
        check_side(kinds, "spec.of", &spec.of, cluster_usage, &mut problems);
        if let Some(by) = &spec.by {
            check_side(kinds, "spec.by", by, cluster_usage, &mut problems);
        }
    }
    if !problems.is_empty() {
        return Outcome::deny(422, "Invalid", problems.join("; "));
    }
    if !check_access {
        return Outcome::allow();
    }
    // What needs the right again: what it protects changed, or it starts refusing (a Usage in
    // warn mode switched to Deny refuses what it only warned about).
    let changed = match (req.operation, old) {
        (Operation::Update, Some(old)) => {
            let of_changed = old
                .of
                .and_then(|v| serde_json::from_value::<ResourceSpec>(v).ok())
                != Some(spec.of.clone());
            let was_warning = old.enforcement.as_ref().and_then(|v| v.as_str()) == Some("Warn");
            of_changed || (was_warning && !spec.enforcement.warns())
        }
        _ => true,
    };
    if !changed {
        return Outcome::allow();
    }
    match access_request(kinds, req, &spec.of, user.unwrap_or_default().into()) {
        Some((request, scope)) => Outcome::Authorize(Authorize {
            request,
            usage_kind: req.kind.kind.clone().into_owned(),
            scope,
            consent: Consent::Usage,
            next: None,
        }),
        // check_side vetted the kind a moment ago; a resolver that forgets it in between is
        // refreshing, and the safe answer is to refuse for now.
        None => Outcome::deny(
            500,
            "InternalError",
            format!(
                "spec.of: kind {} ({}) vanished from discovery while checking; retry shortly",
                spec.of.kind, spec.of.api_version
            ),
        ),
    }
}

/// The `SubjectAccessReview` question for `of`: may `user` update it — by name for a
/// `resourceRef`, every object of the kind in the namespace for a `resourceSelector`.
fn access_request(
    kinds: &dyn KindResolver,
    req: &Request<'_>,
    of: &ResourceSpec,
    user: Requester,
) -> Option<(AccessRequest, Scope)> {
    let scope = kinds.scope(&of.api_version, &of.kind)?;
    let resource = kinds.resource(&of.api_version, &of.kind)?;
    let group = of
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group)
        .to_owned();
    let namespace = match scope {
        Scope::Cluster => None,
        // An explicit namespace, else the Usage's own (a ClusterUsage has none: its selector
        // without a namespace selects in every namespace, and `None` asks exactly that).
        Scope::Namespaced => of
            .explicit_namespace()
            .filter(|ns| !ns.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                req.namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .map(str::to_owned)
            }),
    };
    let request = AccessRequest {
        user,
        verb: "update".to_owned(),
        group,
        resource,
        namespace,
        name: of.resource_ref.as_ref().map(|r| r.name.clone()),
    };
    Some((request, scope))
}

/// The API group of an `apiVersion` (`""` for the core group's `v1`).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The rules that need no discovery: well-formed names, label keys and values, bounded sizes, a
/// non-blank reason, no Usage of a Lien object, no Usage of itself. The CRD's schema refuses
/// most of them before Lien sees the Usage (maxLength, maxProperties, patterns, CEL); this
/// checks them all again, because a Usage stored under an older CRD, or a cluster whose CRD
/// is not Lien's current one, must not be enforced unchecked, and because what CEL cannot
/// express within kube-apiserver's cost budget (label keys, `of` equal to `by`) is only here.
fn check_spec(spec: &UsageSpecSides, req: &Request<'_>, problems: &mut Vec<String>) {
    if let Some(reason) = &spec.reason {
        if reason.trim().is_empty() {
            problems.push(
                "spec.reason: must not be blank; say in words why the object must stay (it is shown in every refused DELETE), or remove spec.reason when spec.by is set".to_owned(),
            );
        }
        let chars = reason.chars().count();
        if chars > lien_api::MAX_REASON_CHARS {
            problems.push(format!(
                "spec.reason: {chars} characters is too long: at most {} (it is shown in every refused DELETE); shorten it",
                lien_api::MAX_REASON_CHARS
            ));
        }
    }
    check_wellformed("spec.of", &spec.of, problems);
    if let Some(by) = &spec.by {
        check_wellformed("spec.by", by, problems);
    }
    if group_of(&spec.of.api_version) == lien_api::GROUP {
        problems.push(format!(
            "spec.of: {} ({}) is one of Lien's own kinds, and a Usage is never itself protected (Usages of Usages would block each other's deletion and hold their namespace in Terminating); point spec.of at the object the other Usage protects instead",
            spec.of.kind, spec.of.api_version
        ));
    }
    if let Some(by) = &spec.by {
        if same_objects(&spec.of, by, req) {
            problems.push(
                "spec.by: is identical to spec.of, and an object cannot be in use by itself; name the object that uses spec.of in spec.by, or remove spec.by and give a spec.reason to protect spec.of on its own".to_owned(),
            );
        }
    }
}

/// Whether two sides name the same objects: the same kind (an object is the same object at
/// every served version) and the same reference or selector, a missing namespace being the
/// Usage's own.
fn same_objects(of: &ResourceSpec, by: &ResourceSpec, req: &Request<'_>) -> bool {
    let own = req.namespace.as_deref().filter(|ns| !ns.is_empty());
    fn ns<'a>(n: Option<&'a String>, own: Option<&'a str>) -> Option<&'a str> {
        n.map(String::as_str).filter(|n| !n.is_empty()).or(own)
    }
    if group_of(&of.api_version) != group_of(&by.api_version) || of.kind != by.kind {
        return false;
    }
    match (
        (&of.resource_ref, &of.resource_selector),
        (&by.resource_ref, &by.resource_selector),
    ) {
        ((Some(a), _), (Some(b), _)) => {
            a.name == b.name && ns(a.namespace.as_ref(), own) == ns(b.namespace.as_ref(), own)
        }
        ((None, Some(a)), (None, Some(b))) => {
            a.match_labels == b.match_labels
                && a.match_controller_ref == b.match_controller_ref
                && ns(a.namespace.as_ref(), own) == ns(b.namespace.as_ref(), own)
        }
        _ => false,
    }
}

/// Syntax of a kind reference: `<field>.apiVersion` and `<field>.kind` (Usages and rules alike).
pub(crate) fn check_kind(field: &str, api_version: &str, kind: &str, problems: &mut Vec<String>) {
    use crate::wellformed;
    if let Some(why) = wellformed::api_version(api_version) {
        problems.push(format!(
            "{field}.apiVersion: invalid value {api_version:?}: {why}"
        ));
    }
    if let Some(why) = wellformed::kind(kind) {
        problems.push(format!("{field}.kind: invalid value {kind:?}: {why}"));
    }
}

/// Syntax and size: `apiVersion`, `kind`, names, namespaces, label keys and values, and a
/// selector that selects something less than every object of the kind.
fn check_wellformed(field: &str, side: &ResourceSpec, problems: &mut Vec<String>) {
    use crate::wellformed;
    check_kind(field, &side.api_version, &side.kind, problems);
    let namespace = |path: &str, ns: Option<&String>, problems: &mut Vec<String>| {
        if let Some(ns) = ns.filter(|ns| !ns.is_empty()) {
            if let Some(why) = wellformed::dns1123_label(ns) {
                problems.push(format!("{path}: invalid namespace {ns:?}: {why}"));
            }
        }
    };
    if let Some(r) = &side.resource_ref {
        // RBAC's kinds take any path segment (`system:controller:…`), as kube-apiserver's RBAC
        // validation does; every other kind's names are DNS subdomains.
        let why = if group_of(&side.api_version) == "rbac.authorization.k8s.io" {
            wellformed::path_segment_name(&r.name)
        } else {
            wellformed::dns1123_subdomain(&r.name)
        };
        if let Some(why) = why {
            problems.push(format!(
                "{field}.resourceRef.name: invalid name {:?}: {why}",
                r.name
            ));
        }
        namespace(
            &format!("{field}.resourceRef.namespace"),
            r.namespace.as_ref(),
            problems,
        );
    }
    if let Some(s) = &side.resource_selector {
        let path = format!("{field}.resourceSelector");
        namespace(&format!("{path}.namespace"), s.namespace.as_ref(), problems);
        if s.match_labels.is_empty() && !s.match_controller_ref {
            problems.push(format!(
                "{path}: an empty selector selects every {} in its namespace (or the cluster); set matchLabels or matchControllerRef: true, or use resourceRef for one object",
                side.kind
            ));
        }
        if s.match_labels.len() > lien_api::MAX_MATCH_LABELS {
            problems.push(format!(
                "{path}.matchLabels: {} labels is too many: at most {}; select by fewer labels",
                s.match_labels.len(),
                lien_api::MAX_MATCH_LABELS
            ));
        }
        for (key, value) in &s.match_labels {
            if let Some(why) = wellformed::qualified_name(key) {
                problems.push(format!(
                    "{path}.matchLabels: invalid label key {key:?}: {why}"
                ));
            }
            if let Some(why) = wellformed::label_value(value) {
                problems.push(format!(
                    "{path}.matchLabels[{key}]: invalid label value {value:?}: {why}"
                ));
            }
        }
    }
}

fn check_side(
    kinds: &dyn KindResolver,
    field: &str,
    side: &ResourceSpec,
    cluster_usage: bool,
    problems: &mut Vec<String>,
) {
    let (api_version, kind) = (side.api_version.as_str(), side.kind.as_str());
    let Some(scope) = kinds.scope(api_version, kind) else {
        problems.push(format!(
            "{field}: kind {kind} is not served in {api_version}; install its CRD first, or correct {field}.apiVersion and {field}.kind"
        ));
        return;
    };
    let ref_ns = side
        .resource_ref
        .as_ref()
        .and_then(|r| r.namespace.as_deref())
        .filter(|ns| !ns.is_empty());
    let sel_ns = side
        .resource_selector
        .as_ref()
        .and_then(|s| s.namespace.as_deref())
        .filter(|ns| !ns.is_empty());
    match scope {
        Scope::Cluster => {
            if ref_ns.is_some() {
                problems.push(format!(
                    "{field}.resourceRef.namespace: {kind} ({api_version}) is cluster-scoped; remove the namespace"
                ));
            }
            if sel_ns.is_some() {
                problems.push(format!(
                    "{field}.resourceSelector.namespace: {kind} ({api_version}) is cluster-scoped; remove the namespace"
                ));
            }
        }
        Scope::Namespaced => {
            if cluster_usage && side.resource_ref.is_some() && ref_ns.is_none() {
                problems.push(format!(
                    "{field}.resourceRef.namespace: {kind} ({api_version}) is namespaced, and a ClusterUsage has no namespace of its own; set the object's namespace"
                ));
            }
        }
    }
}

//! Authorization, as kube-apiserver's `--authorization-mode` does it: `AlwaysAllow` (the
//! sandbox's default: every authenticated user may do everything) or `RBAC`.
//!
//! # Data model
//!
//! - [`Attributes`]: what a request asks — kube-apiserver's `authorizer.Attributes`. Built from
//!   an HTTP request by [`request_attributes`] (the `RequestInfoFactory` mapping of methods to
//!   verbs), from a `SubjectAccessReview` by [`review_attributes`], or for impersonation by
//!   [`impersonation_attributes`].
//! - [`RbacPolicy`]: Roles, ClusterRoles and their bindings, decoded from the stored objects.
//! - [`authorize`] (pure): `system:masters` may do everything (kube-apiserver's privileged-group
//!   authorizer, in front of RBAC), then RBAC: any binding whose subject is the user, of a role
//!   with a rule that matches, allows; nothing denies outright (RBAC only ever allows, so "not
//!   allowed" is *no opinion*, which kube-apiserver turns into 403 Forbidden).
//!
//! The in-process controllers (garbage collector, namespace and CRD controllers) call the API
//! server directly and are not authorized here: in a cluster their bootstrap roles allow what
//! they do.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::UserInfo;
use crate::error::{ApiError, Cause};

/// The RBAC API group.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The group whose members may do everything, whatever the bindings say.
pub const MASTERS_GROUP: &str = "system:masters";

/// How the API server authorizes requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Authorization {
    /// Every authenticated user may do everything; SubjectAccessReviews are always allowed.
    #[default]
    AlwaysAllow,
    /// Kubernetes RBAC: Roles, ClusterRoles, RoleBindings, ClusterRoleBindings.
    Rbac,
}

impl FromStr for Authorization {
    type Err = String;

    /// kube-apiserver's `--authorization-mode` spellings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "AlwaysAllow" => Ok(Self::AlwaysAllow),
            "RBAC" => Ok(Self::Rbac),
            other => Err(format!(
                "unknown authorization mode {other:?}: supported values: \"AlwaysAllow\", \"RBAC\""
            )),
        }
    }
}

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Attributes {
    /// Who.
    pub user: UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`,
    /// `impersonate`…; for a non-resource request the lower-cased HTTP method.
    pub verb: String,
    /// Whether the request is about a resource (else about `path`).
    pub resource_request: bool,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// The URL path of a non-resource request.
    pub path: String,
}

/// An authorizer's answer. RBAC never denies outright: what it does not allow it has no opinion
/// on, and kube-apiserver refuses a request no authorizer allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, and why (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User
    /// "z"`; empty for `system:masters`).
    Allow(String),
    /// Not allowed; the reason is empty unless something could not be evaluated.
    NoOpinion(String),
}

impl Decision {
    pub fn allowed(&self) -> bool {
        matches!(self, Self::Allow(_))
    }

    pub fn reason(&self) -> &str {
        match self {
            Self::Allow(r) | Self::NoOpinion(r) => r,
        }
    }
}

/// `rbacv1.PolicyRule`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
}

/// `rbacv1.Subject`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Subject {
    pub kind: String,
    pub api_group: String,
    pub name: String,
    pub namespace: String,
}

/// `rbacv1.RoleRef`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RoleRef {
    pub api_group: String,
    pub kind: String,
    pub name: String,
}

/// A Role or ClusterRole (`namespace` empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Role {
    pub namespace: String,
    pub name: String,
    pub rules: Vec<PolicyRule>,
}

/// A RoleBinding or ClusterRoleBinding (`namespace` empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Binding {
    pub namespace: String,
    pub name: String,
    pub role_ref: RoleRef,
    pub subjects: Vec<Subject>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta {
    name: String,
    namespace: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RoleObject {
    metadata: Meta,
    rules: Option<Vec<PolicyRule>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct BindingObject {
    metadata: Meta,
    role_ref: RoleRef,
    subjects: Option<Vec<Subject>>,
}

impl Role {
    /// From a stored Role or ClusterRole; `None` if it does not decode (it then grants nothing).
    pub fn from_object(object: &Value) -> Option<Role> {
        let o = RoleObject::deserialize(object).ok()?;
        Some(Role {
            namespace: o.metadata.namespace,
            name: o.metadata.name,
            rules: o.rules.unwrap_or_default(),
        })
    }
}

impl Binding {
    /// From a stored RoleBinding or ClusterRoleBinding; `None` if it does not decode.
    pub fn from_object(object: &Value) -> Option<Binding> {
        let o = BindingObject::deserialize(object).ok()?;
        Some(Binding {
            namespace: o.metadata.namespace,
            name: o.metadata.name,
            role_ref: o.role_ref,
            subjects: o.subjects.unwrap_or_default(),
        })
    }
}

/// Every Role, ClusterRole and binding, as the authorizer reads them.
#[derive(Debug, Clone, Default)]
pub struct RbacPolicy {
    pub roles: Vec<Role>,
    pub cluster_roles: Vec<Role>,
    pub role_bindings: Vec<Binding>,
    pub cluster_role_bindings: Vec<Binding>,
}

impl RbacPolicy {
    fn cluster_role(&self, name: &str) -> Option<&Role> {
        self.cluster_roles.iter().find(|r| r.name == name)
    }

    fn role(&self, namespace: &str, name: &str) -> Option<&Role> {
        self.roles
            .iter()
            .find(|r| r.namespace == namespace && r.name == name)
    }

    /// The rules a binding grants: its ClusterRole's, or its Role's (in the binding's
    /// namespace). A missing role grants nothing — bindings may precede their roles.
    fn rules_of(&self, binding: &Binding) -> &[PolicyRule] {
        let role = match binding.role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_role(&binding.role_ref.name),
            "Role" if !binding.namespace.is_empty() => {
                self.role(&binding.namespace, &binding.role_ref.name)
            }
            _ => None,
        };
        role.map_or(&[], |r| r.rules.as_slice())
    }
}

/// `rbacv1helpers.VerbMatches`.
fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

/// `rbacv1helpers.APIGroupMatches`.
fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    rule.api_groups.iter().any(|g| g == "*" || g == group)
}

/// `rbacv1helpers.ResourceMatches`: `*`, the exact `resource[/subresource]`, or
/// `*/subresource`.
fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource))
    })
}

/// `rbacv1helpers.ResourceNameMatches`: no names means every name; with names, a request
/// without a name (list, create, deletecollection) does not match.
fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name)
}

/// `rbacv1helpers.NonResourceURLMatches`: `*`, the exact path, or a prefix ending in `*`.
fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls.iter().any(|u| {
        u == "*"
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// `rbac.RuleAllows`.
pub fn rule_allows(attrs: &Attributes, rule: &PolicyRule) -> bool {
    if !verb_matches(rule, &attrs.verb) {
        return false;
    }
    if attrs.resource_request {
        let combined = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        api_group_matches(rule, &attrs.api_group)
            && resource_matches(rule, &combined, &attrs.subresource)
            && resource_name_matches(rule, &attrs.name)
    } else {
        non_resource_url_matches(rule, &attrs.path)
    }
}

/// `system:serviceaccount:<ns>:<name>` → `(ns, name)`.
pub fn service_account_of(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// `appliesToUser`: a ServiceAccount subject without a namespace means the binding's.
fn applies_to(user: &UserInfo, subject: &Subject, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => user.username == subject.name,
        "Group" => user.groups.iter().any(|g| g == &subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                binding_namespace
            } else {
                &subject.namespace
            };
            !ns.is_empty() && service_account_of(&user.username) == Some((ns, &subject.name))
        }
        _ => false,
    }
}

/// `describeSubject`.
fn describe_subject(subject: &Subject, binding_namespace: &str) -> String {
    if subject.kind == "ServiceAccount" {
        let ns = if subject.namespace.is_empty() {
            binding_namespace
        } else {
            &subject.namespace
        };
        format!("{} {:?}", subject.kind, format!("{}/{ns}", subject.name))
    } else {
        format!("{} {:?}", subject.kind, subject.name)
    }
}

/// The decision of `system:masters` + RBAC on `attrs`.
pub fn authorize(policy: &RbacPolicy, attrs: &Attributes) -> Decision {
    if attrs.user.groups.iter().any(|g| g == MASTERS_GROUP) {
        return Decision::Allow(String::new());
    }
    let grants = |binding: &Binding| {
        let subject = binding
            .subjects
            .iter()
            .find(|s| applies_to(&attrs.user, s, &binding.namespace))?;
        policy
            .rules_of(binding)
            .iter()
            .any(|rule| rule_allows(attrs, rule))
            .then(|| describe_subject(subject, &binding.namespace))
    };
    for b in &policy.cluster_role_bindings {
        if let Some(subject) = grants(b) {
            return Decision::Allow(format!(
                "RBAC: allowed by ClusterRoleBinding {:?} of {} {:?} to {subject}",
                b.name, b.role_ref.kind, b.role_ref.name
            ));
        }
    }
    // RoleBindings grant only inside their namespace (a request without one is cluster-wide).
    if !attrs.namespace.is_empty() {
        for b in policy
            .role_bindings
            .iter()
            .filter(|b| b.namespace == attrs.namespace)
        {
            if let Some(subject) = grants(b) {
                return Decision::Allow(format!(
                    "RBAC: allowed by RoleBinding {:?} of {} {:?} to {subject}",
                    format!("{}/{}", b.name, b.namespace),
                    b.role_ref.kind,
                    b.role_ref.name
                ));
            }
        }
    }
    Decision::NoOpinion(String::new())
}

/// kube-apiserver's `forbiddenMessage`.
pub fn forbidden_message(attrs: &Attributes) -> String {
    let user = &attrs.user.username;
    if !attrs.resource_request {
        return format!("User {user:?} cannot {} path {:?}", attrs.verb, attrs.path);
    }
    let mut resource = attrs.resource.clone();
    if !attrs.subresource.is_empty() {
        resource = format!("{resource}/{}", attrs.subresource);
    }
    if attrs.namespace.is_empty() {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} at the cluster scope",
            attrs.verb, attrs.api_group
        )
    } else {
        format!(
            "User {user:?} cannot {} resource {resource:?} in API group {:?} in the namespace {:?}",
            attrs.verb, attrs.api_group, attrs.namespace
        )
    }
}

/// The 403 kube-apiserver answers a request no authorizer allowed (`responsewriters.Forbidden`).
pub fn forbidden(attrs: &Attributes, reason: &str) -> ApiError {
    let mut why = forbidden_message(attrs);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    if attrs.resource_request {
        ApiError::forbidden(&attrs.api_group, &attrs.resource, &attrs.name, &why)
    } else {
        ApiError::new(403, "Forbidden", format!("forbidden: {why}")).with_details(json!({}))
    }
}

/// The attributes of an HTTP request, as kube-apiserver's `RequestInfoFactory` derives them.
///
/// Verbs: GET/HEAD `get` (named) or `list`/`watch` (`?watch=true`); POST `create`; PUT
/// `update`; PATCH `patch`; DELETE `delete` (named) or `deletecollection`. A list or watch with
/// the field selector `metadata.name=<n>` is about the object `<n>`. A request on a namespace
/// is in that namespace (so a RoleBinding there may grant `get` on it). Paths outside
/// `/api/<v>/<resource>…` and `/apis/<g>/<v>/<resource>…` are non-resource requests, whose verb
/// is the lower-cased method.
pub fn request_attributes(
    user: &UserInfo,
    method: &str,
    path: &str,
    query: &std::collections::HashMap<String, String>,
) -> Attributes {
    let non_resource = || Attributes {
        user: user.clone(),
        verb: method.to_lowercase(),
        resource_request: false,
        path: path.to_string(),
        ..Attributes::default()
    };
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return non_resource(),
    };
    if rest.is_empty() {
        return non_resource();
    }
    let mut a = Attributes {
        user: user.clone(),
        resource_request: true,
        api_group: group.to_string(),
        api_version: version.to_string(),
        ..Attributes::default()
    };
    let mut parts: &[&str] = rest;
    if parts[0] == "namespaces" && parts.len() > 1 {
        a.namespace = parts[1].to_string();
        // `/namespaces/<ns>/status|finalize` are subresources of the namespace itself.
        if parts.len() > 2 && !matches!(parts[2], "status" | "finalize") {
            parts = &parts[2..];
        }
    }
    a.resource = parts[0].to_string();
    if let Some(name) = parts.get(1) {
        a.name = name.to_string();
    }
    if let Some(sub) = parts.get(2) {
        a.subresource = sub.to_string();
    }
    a.verb = match method {
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if a.name.is_empty() => "deletecollection",
        "DELETE" => "delete",
        "GET" | "HEAD" if !a.name.is_empty() => "get",
        "GET" | "HEAD" => {
            let watch = query
                .get("watch")
                .is_some_and(|w| crate::http::query::query_bool(w));
            if let Some(name) = query.get("fieldSelector").and_then(|s| exact_name(s)) {
                a.name = name;
            }
            if watch { "watch" } else { "list" }
        }
        other => {
            return Attributes {
                verb: other.to_lowercase(),
                ..a
            };
        }
    }
    .to_string();
    a
}

/// `metadata.name=<n>` (or `==`) as the only requirement of a field selector.
fn exact_name(selector: &str) -> Option<String> {
    let selector = selector.trim();
    if selector.contains(',') {
        return None;
    }
    let value = selector
        .strip_prefix("metadata.name==")
        .or_else(|| selector.strip_prefix("metadata.name="))?;
    (!value.is_empty() && !value.contains('/')).then(|| value.to_string())
}

/// The checks kube-apiserver's impersonation filter makes, one per impersonated field: the
/// user (`users`, or `serviceaccounts` in its namespace), each group (`groups`), the UID
/// (`authentication.k8s.io` `uids`) and each extra value (`userextras/<key>`), all with verb
/// `impersonate`. `requested` is the user as the headers name it: the groups kube-apiserver
/// adds afterwards ([`impersonated_user`]) need no permission.
pub fn impersonation_attributes(actor: &UserInfo, requested: &UserInfo) -> Vec<Attributes> {
    let target = requested;
    let base = |group: &str, resource: &str, name: &str| Attributes {
        user: actor.clone(),
        verb: "impersonate".into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        name: name.into(),
        ..Attributes::default()
    };
    let mut out = Vec::new();
    match service_account_of(&target.username) {
        Some((ns, name)) => out.push(Attributes {
            namespace: ns.into(),
            ..base("", "serviceaccounts", name)
        }),
        None => out.push(base("", "users", &target.username)),
    }
    for g in &target.groups {
        out.push(base("", "groups", g));
    }
    if !target.uid.is_empty() {
        out.push(base("authentication.k8s.io", "uids", &target.uid));
    }
    for (key, values) in &target.extra {
        for v in values {
            out.push(Attributes {
                subresource: key.clone(),
                ..base("authentication.k8s.io", "userextras", v)
            });
        }
    }
    out
}

/// The user a request acts as after impersonation: the requested name, groups, UID and extra,
/// plus the groups kube-apiserver adds (`system:serviceaccounts[:<ns>]` for a service account,
/// `system:authenticated` for everyone but `system:anonymous`).
pub fn impersonated_user(
    username: &str,
    groups: Vec<String>,
    uid: String,
    extra: BTreeMap<String, Vec<String>>,
) -> UserInfo {
    let mut groups = groups;
    if let Some((ns, _)) = service_account_of(username) {
        for g in [
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{ns}"),
        ] {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    if username != "system:anonymous" && !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    UserInfo {
        username: username.to_string(),
        uid,
        groups,
        extra,
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ReviewSpec {
    user: String,
    uid: String,
    groups: Option<Vec<String>>,
    extra: Option<BTreeMap<String, Vec<String>>>,
    resource_attributes: Option<ReviewResource>,
    non_resource_attributes: Option<ReviewNonResource>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReviewResource {
    namespace: String,
    verb: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    name: String,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReviewNonResource {
    path: String,
    verb: String,
}

/// The attributes a `SubjectAccessReview` (`requester: None`: the spec names the user) or
/// `SelfSubjectAccessReview` (`requester`: the user who asks) asks about, validated as
/// kube-apiserver validates the review.
pub fn review_attributes(
    review: &Value,
    requester: Option<&UserInfo>,
) -> Result<Attributes, ApiError> {
    let spec = ReviewSpec::deserialize(&review["spec"])
        .map_err(|e| ApiError::bad_request(format!("the object provided is unrecognized: {e}")))?;
    let mut causes = Vec::new();
    if spec.resource_attributes.is_some() == spec.non_resource_attributes.is_some() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.resourceAttributes",
            "Invalid value: \"\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let user = match requester {
        Some(u) => u.clone(),
        None => {
            let groups = spec.groups.unwrap_or_default();
            if spec.user.is_empty() && groups.is_empty() {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "spec.user",
                    "Invalid value: \"\": at least one of user or group must be specified",
                ));
            }
            UserInfo {
                username: spec.user,
                uid: spec.uid,
                groups,
                extra: spec.extra.unwrap_or_default(),
            }
        }
    };
    if !causes.is_empty() {
        // kube-apiserver names the kind from the decoded internal object, whose TypeMeta is
        // empty (`NewInvalid(authorizationapi.Kind(review.Kind), "", errs)`): the message reads
        // `.authorization.k8s.io "" is invalid: …` and the details have no kind.
        return Err(ApiError::invalid("authorization.k8s.io", "", "", causes));
    }
    Ok(
        match (spec.resource_attributes, spec.non_resource_attributes) {
            (Some(r), _) => Attributes {
                user,
                verb: r.verb,
                resource_request: true,
                api_group: r.group,
                api_version: r.version,
                resource: r.resource,
                subresource: r.subresource,
                namespace: r.namespace,
                name: r.name,
                path: String::new(),
            },
            (None, Some(n)) => Attributes {
                user,
                verb: n.verb,
                resource_request: false,
                path: n.path,
                ..Attributes::default()
            },
            (None, None) => Attributes::default(),
        },
    )
}

/// What a user may do everywhere: what `system:masters` (kube-apiserver's privileged-group
/// authorizer) and the AlwaysAllow authorizer answer to `RulesFor`.
pub fn everything() -> Vec<PolicyRule> {
    let all = || vec!["*".to_string()];
    vec![
        PolicyRule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: all(),
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// The rules that apply to `user` in `namespace` (cluster-wide only when empty): RBAC's
/// `RulesFor` (k/k `plugin/pkg/auth/authorizer/rbac/rbac.go`) — every ClusterRoleBinding's rules,
/// then the namespace's RoleBindings' — after `system:masters`' everything.
pub fn rules_for(policy: &RbacPolicy, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
    let mut rules = Vec::new();
    if user.groups.iter().any(|g| g == MASTERS_GROUP) {
        rules.extend(everything());
    }
    let bound = |b: &Binding| b.subjects.iter().any(|s| applies_to(user, s, &b.namespace));
    for b in policy.cluster_role_bindings.iter().filter(|b| bound(b)) {
        rules.extend(policy.rules_of(b).iter().cloned());
    }
    if !namespace.is_empty() {
        for b in policy
            .role_bindings
            .iter()
            .filter(|b| b.namespace == namespace && bound(b))
        {
            rules.extend(policy.rules_of(b).iter().cloned());
        }
    }
    rules
}

/// A `SelfSubjectRulesReview`'s `status`: each rule as a resource rule, a non-resource rule or
/// both (k/k `pkg/registry/authorization/selfsubjectrulesreview/rest.go`), empty fields left out
/// as Go's `omitempty` leaves them.
pub fn rules_review_status(rules: &[PolicyRule]) -> Value {
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for r in rules {
        if !r.resources.is_empty() {
            let mut rule = json!({"verbs": r.verbs});
            for (key, list) in [
                ("apiGroups", &r.api_groups),
                ("resources", &r.resources),
                ("resourceNames", &r.resource_names),
            ] {
                if !list.is_empty() {
                    rule[key] = json!(list);
                }
            }
            resource_rules.push(rule);
        }
        if !r.non_resource_urls.is_empty() {
            non_resource_rules
                .push(json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls}));
        }
    }
    json!({
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": false,
    })
}

/// A review's `status` from a decision: `allowed`, and `reason` when there is one (RBAC gives
/// none when it does not allow; it never sets `denied`).
pub fn review_status(decision: &Decision) -> Value {
    let mut status = json!({"allowed": decision.allowed()});
    if !decision.reason().is_empty() {
        status["reason"] = json!(decision.reason());
    }
    status
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

/// `system:aggregate-to-view`, `-edit` and `-admin` as kube-apiserver's bootstrap policy
/// (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`, whose rendering is
/// `testdata/cluster-roles.yaml`) defines them; `view`, `edit` and `admin` get them through
/// the clusterrole-aggregation controller.
fn aggregate_to(role: &str) -> Value {
    match role {
        "view" => json!([
            rule(
                "",
                &[
                    "configmaps",
                    "endpoints",
                    "persistentvolumeclaims",
                    "persistentvolumeclaims/status",
                    "pods",
                    "replicationcontrollers",
                    "replicationcontrollers/scale",
                    "serviceaccounts",
                    "services",
                    "services/status"
                ],
                READ
            ),
            rule(
                "",
                &[
                    "bindings",
                    "events",
                    "limitranges",
                    "namespaces/status",
                    "pods/log",
                    "pods/status",
                    "replicationcontrollers/status",
                    "resourcequotas",
                    "resourcequotas/status"
                ],
                READ
            ),
            rule("", &["namespaces"], READ),
            rule("discovery.k8s.io", &["endpointslices"], READ),
            rule(
                "apps",
                &[
                    "controllerrevisions",
                    "daemonsets",
                    "daemonsets/status",
                    "deployments",
                    "deployments/scale",
                    "deployments/status",
                    "replicasets",
                    "replicasets/scale",
                    "replicasets/status",
                    "statefulsets",
                    "statefulsets/scale",
                    "statefulsets/status"
                ],
                READ
            ),
            rule(
                "autoscaling",
                &[
                    "horizontalpodautoscalers",
                    "horizontalpodautoscalers/status"
                ],
                READ
            ),
            rule(
                "batch",
                &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
                READ
            ),
            rule(
                "extensions",
                &[
                    "daemonsets",
                    "daemonsets/status",
                    "deployments",
                    "deployments/scale",
                    "deployments/status",
                    "ingresses",
                    "ingresses/status",
                    "networkpolicies",
                    "replicasets",
                    "replicasets/scale",
                    "replicasets/status",
                    "replicationcontrollers/scale"
                ],
                READ
            ),
            rule(
                "policy",
                &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                READ
            ),
            rule(
                "networking.k8s.io",
                &["ingresses", "ingresses/status", "networkpolicies"],
                READ
            ),
        ]),
        "edit" => json!([
            rule(
                "",
                &[
                    "pods/attach",
                    "pods/exec",
                    "pods/portforward",
                    "pods/proxy",
                    "secrets",
                    "services/proxy"
                ],
                READ
            ),
            rule("", &["serviceaccounts"], &["impersonate"]),
            rule(
                "",
                &[
                    "pods",
                    "pods/attach",
                    "pods/exec",
                    "pods/portforward",
                    "pods/proxy"
                ],
                WRITE
            ),
            rule("", &["pods/eviction"], &["create"]),
            rule(
                "",
                &[
                    "configmaps",
                    "events",
                    "persistentvolumeclaims",
                    "replicationcontrollers",
                    "replicationcontrollers/scale",
                    "secrets",
                    "serviceaccounts",
                    "services",
                    "services/proxy"
                ],
                WRITE
            ),
            rule("", &["serviceaccounts/token"], &["create"]),
            rule(
                "apps",
                &[
                    "daemonsets",
                    "deployments",
                    "deployments/rollback",
                    "deployments/scale",
                    "replicasets",
                    "replicasets/scale",
                    "statefulsets",
                    "statefulsets/scale"
                ],
                WRITE
            ),
            rule("autoscaling", &["horizontalpodautoscalers"], WRITE),
            rule("batch", &["cronjobs", "jobs"], WRITE),
            rule(
                "extensions",
                &[
                    "daemonsets",
                    "deployments",
                    "deployments/rollback",
                    "deployments/scale",
                    "ingresses",
                    "networkpolicies",
                    "replicasets",
                    "replicasets/scale",
                    "replicationcontrollers/scale"
                ],
                WRITE
            ),
            rule("policy", &["poddisruptionbudgets"], WRITE),
            rule(
                "networking.k8s.io",
                &["ingresses", "networkpolicies"],
                WRITE
            ),
            rule("coordination.k8s.io", &["leases"], READ_WRITE),
        ]),
        _ => json!([
            rule(
                "authorization.k8s.io",
                &["localsubjectaccessreviews"],
                &["create"]
            ),
            rule(RBAC_GROUP, &["rolebindings", "roles"], READ_WRITE),
        ]),
    }
}

/// The roles and bindings every cluster starts with that clients use (kube-apiserver's
/// bootstrap policy, without the roles of the control plane's own components):
/// `cluster-admin` bound to `system:masters`; the user-facing `admin`, `edit` and `view`
/// (aggregated from `system:aggregate-to-*`, bound to nobody); discovery, health and version
/// for every authenticated user (health and version for unauthenticated ones too); self access
/// reviews for every authenticated user.
pub fn bootstrap_policy() -> Vec<(&'static str, Value)> {
    let cluster_role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": rules})
    };
    let binding = |name: &str, role: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": RBAC_GROUP, "kind": "Group", "name": g}))
            .collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": subjects})
    };
    let aggregated = |name: &str, into: Option<&str>| {
        let mut role = cluster_role(name, Value::Null);
        role.as_object_mut().map(|r| r.remove("rules"));
        role["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels":
            {format!("rbac.authorization.k8s.io/aggregate-to-{name}"): "true"}}]});
        if let Some(into) = into {
            role["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{into}")] =
                json!("true");
        }
        role
    };
    let aggregate_role = |name: &str| {
        let mut role = cluster_role(&format!("system:aggregate-to-{name}"), aggregate_to(name));
        role["metadata"]["labels"][format!("rbac.authorization.k8s.io/aggregate-to-{name}")] =
            json!("true");
        role
    };
    vec![
        ("clusterroles", aggregated("admin", None)),
        ("clusterroles", aggregated("edit", Some("admin"))),
        ("clusterroles", aggregated("view", Some("edit"))),
        ("clusterroles", aggregate_role("admin")),
        ("clusterroles", aggregate_role("edit")),
        ("clusterroles", aggregate_role("view")),
        (
            "clusterroles",
            cluster_role(
                "cluster-admin",
                json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                       {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:discovery",
                json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                    "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
                    "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:basic-user",
                json!([{"apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"]},
                    {"apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:public-info-viewer",
                json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"]}]),
            ),
        ),
        (
            "clusterrolebindings",
            binding("cluster-admin", "cluster-admin", &[MASTERS_GROUP]),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:discovery",
                "system:discovery",
                &["system:authenticated"],
            ),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:basic-user",
                "system:basic-user",
                &["system:authenticated"],
            ),
        ),
        (
            "clusterrolebindings",
            binding(
                "system:public-info-viewer",
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
    ]
}

/// Validation of the RBAC kinds (`rbac/validation`): roles' rules, bindings' `roleRef` (and
/// that it never changes) and subjects.
pub fn validate_rbac(kind: &str, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    match kind {
        "Role" | "ClusterRole" => {
            let rules = object["rules"].as_array().cloned().unwrap_or_default();
            for (i, rule) in rules.iter().enumerate() {
                let r = PolicyRule::deserialize(rule).unwrap_or_default();
                if r.verbs.is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("rules[{i}].verbs"),
                        "Required value: verbs must contain at least one value",
                    ));
                }
                if !r.non_resource_urls.is_empty() {
                    if kind == "Role" {
                        causes.push(Cause::new(
                            "FieldValueInvalid",
                            format!("rules[{i}].nonResourceURLs"),
                            format!(
                                "Invalid value: {:?}: namespaced rules cannot apply to non-resource URLs",
                                r.non_resource_urls
                            ),
                        ));
                    }
                    if !r.api_groups.is_empty() || !r.resources.is_empty() {
                        causes.push(Cause::new(
                            "FieldValueInvalid",
                            format!("rules[{i}].nonResourceURLs"),
                            format!(
                                "Invalid value: {:?}: rules cannot apply to both regular resources and non-resource URLs",
                                r.non_resource_urls
                            ),
                        ));
                    }
                } else if r.api_groups.is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("rules[{i}].apiGroups"),
                        "Required value: resource rules must supply at least one api group",
                    ));
                } else if r.resources.is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("rules[{i}].resources"),
                        "Required value: resource rules must supply at least one resource",
                    ));
                }
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role_ref = RoleRef::deserialize(&object["roleRef"]).unwrap_or_default();
            if role_ref.api_group != RBAC_GROUP {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    "roleRef.apiGroup",
                    format!(
                        "Unsupported value: {:?}: supported values: \"{RBAC_GROUP}\"",
                        role_ref.api_group
                    ),
                ));
            }
            let kinds: &[&str] = if kind == "RoleBinding" {
                &["Role", "ClusterRole"]
            } else {
                &["ClusterRole"]
            };
            if !kinds.contains(&role_ref.kind.as_str()) {
                let supported: Vec<String> = kinds.iter().map(|k| format!("{k:?}")).collect();
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    "roleRef.kind",
                    format!(
                        "Unsupported value: {:?}: supported values: {}",
                        role_ref.kind,
                        supported.join(", ")
                    ),
                ));
            }
            if role_ref.name.is_empty() {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    "roleRef.name",
                    "Required value",
                ));
            }
            if let Some(old) = old {
                if old["roleRef"] != object["roleRef"] {
                    causes.push(Cause::new(
                        "FieldValueInvalid",
                        "roleRef",
                        format!(
                            "Invalid value: {}: cannot change roleRef",
                            object["roleRef"]
                        ),
                    ));
                }
            }
            let subjects = object["subjects"].as_array().cloned().unwrap_or_default();
            for (i, s) in subjects.iter().enumerate() {
                let s = Subject::deserialize(s).unwrap_or_default();
                if s.name.is_empty() {
                    causes.push(Cause::new(
                        "FieldValueRequired",
                        format!("subjects[{i}].name"),
                        "Required value",
                    ));
                }
                match s.kind.as_str() {
                    "ServiceAccount" => {
                        if !s.api_group.is_empty() {
                            causes.push(Cause::new(
                                "FieldValueNotSupported",
                                format!("subjects[{i}].apiGroup"),
                                format!(
                                    "Unsupported value: {:?}: supported values: \"\"",
                                    s.api_group
                                ),
                            ));
                        }
                        if kind == "ClusterRoleBinding" && s.namespace.is_empty() {
                            causes.push(Cause::new(
                                "FieldValueRequired",
                                format!("subjects[{i}].namespace"),
                                "Required value",
                            ));
                        }
                    }
                    "User" | "Group" => {
                        if s.api_group != RBAC_GROUP {
                            causes.push(Cause::new(
                                "FieldValueNotSupported",
                                format!("subjects[{i}].apiGroup"),
                                format!(
                                    "Unsupported value: {:?}: supported values: \"{RBAC_GROUP}\"",
                                    s.api_group
                                ),
                            ));
                        }
                    }
                    other => causes.push(Cause::new(
                        "FieldValueNotSupported",
                        format!("subjects[{i}].kind"),
                        format!(
                            "Unsupported value: {other:?}: supported values: \"ServiceAccount\", \"User\", \"Group\""
                        ),
                    )),
                }
            }
        }
        _ => {}
    }
    causes
}

#[cfg(test)]
mod tests;

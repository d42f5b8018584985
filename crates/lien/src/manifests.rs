//! The complete install, generated from Rust (`lien manifests`), like the CRDs (`lien crds`).
//!
//! `deploy/` holds the same objects as files with a `kustomization.yaml` listing them, written by
//! `lien manifests --out-dir deploy`; CI checks the files against this module and
//! `kubectl kustomize deploy/` against [`objects`] (`tests/manifests.rs`), so the two install
//! paths cannot drift.
//!
//! Lien's Validating- and MutatingWebhookConfiguration are not here on purpose: each start of
//! `lien run` writes them with the CA bundle of the certificate it just issued itself, so there
//! is no bundle to template and no cert-manager to depend on.

use serde_json::{Value, json};

mod chart;
pub use chart::helm_chart;

/// The namespace Lien runs in.
pub const NAMESPACE: &str = "lien-system";
/// Name of Lien's ServiceAccount, Deployment, ClusterRole and bindings.
pub const NAME: &str = "lien";
/// Name of the webhook's Service (`lien run --service-name`).
pub const SERVICE: &str = "lien-webhook";
/// The port the webhook (and `/metrics`, `/healthz`, `/readyz`) listens on in the pod.
pub const WEBHOOK_PORT: u16 = 8443;

/// The replicas of the Deployment: two, so that the webhook always has one ready.
pub const REPLICAS: u32 = 2;

/// Where the image is published, as the build was told (`LIEN_IMAGE_REPOSITORY` at compile
/// time: the release workflow sets it to the registry it pushes to, the one setting that
/// names both); `lien` in a build from a checkout.
pub const IMAGE_REPOSITORY: &str = match option_env!("LIEN_IMAGE_REPOSITORY") {
    Some(repository) => repository,
    None => "lien",
};

/// The image the Deployment runs by default: this release's own image,
/// `IMAGE_REPOSITORY:<version>` — in a build from a checkout `lien:<version>`, the tag the
/// repository's `Dockerfile` is built with (`docker build -t lien:0.1.0 .`), which is loaded into
/// the nodes or pushed under your registry's name and passed with `--image` (docs/operations.md
/// "Install").
pub fn image() -> String {
    format!("{IMAGE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION"))
}

/// The resources Lien may watch, label and delete by default (`lien manifests --resource` adds
/// to them; the Helm value `rbac.protectedResources` replaces them): the built-in kinds people
/// protect and the shipped rule packs read — never Secrets, which a list or watch would let
/// Lien read in full (RBAC cannot grant metadata alone). Namespaces are always granted (see
/// [`rbac`]).
pub const DEFAULT_RESOURCES: &[&str] = &[
    "configmaps",
    "persistentvolumeclaims",
    "persistentvolumes",
    "pods",
    "serviceaccounts",
    "services",
    "daemonsets.apps",
    "deployments.apps",
    "replicasets.apps",
    "statefulsets.apps",
    "cronjobs.batch",
    "jobs.batch",
    "ingresses.networking.k8s.io",
    "storageclasses.storage.k8s.io",
];

/// The verbs Lien needs on a resource it protects or reads: watch it (`get`, `list`, `watch`),
/// put and remove the in-use label, the replay record and its finalizers (`patch`), and
/// re-issue a refused DELETE or delete a CascadeRule's children (`delete`).
pub const PROTECTED_VERBS: &[&str] = &["get", "list", "watch", "patch", "delete"];

/// A resource as RBAC names it, written `plural` (the core group) or `plural.group`, as
/// `kubectl` and `lien manifests --resource` take it; `*` for every resource (of a group:
/// `*.example.org`; of every group: `*.*`, which includes Secrets).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Resource {
    /// The API group (empty: the core group; `*`: every group).
    pub group: String,
    /// The plural (`*`: every resource of the group).
    pub resource: String,
}

impl Resource {
    /// Parses `plural`, `plural.group`, `*.group` or `*.*`, as an error naming what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (resource, group) = text.split_once('.').unwrap_or((text, ""));
        let word = |w: &str| {
            !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !w.starts_with('-')
                && !w.ends_with('-')
        };
        if resource != "*" && !word(resource) {
            return Err(format!(
                "{resource:?} is not a resource: a lowercase plural as `kubectl api-resources` lists it (e.g. persistentvolumeclaims), or *"
            ));
        }
        if text.ends_with('.') || (group != "*" && !group.is_empty() && !group.split('.').all(word))
        {
            return Err(format!(
                "{group:?} is not an API group: a DNS subdomain as `kubectl api-resources` lists it (e.g. apps, ceph.rook.io), or *"
            ));
        }
        if group == "*" && resource != "*" {
            return Err(format!(
                "{text:?}: a resource of every group is not a grant RBAC can make precisely; name the group ({resource}.GROUP), or use *.*"
            ));
        }
        Ok(Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        })
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// [`DEFAULT_RESOURCES`], parsed.
pub fn default_resources() -> Vec<Resource> {
    DEFAULT_RESOURCES
        .iter()
        .map(|r| Resource::parse(r).expect("the default resources parse"))
        .collect()
}

/// `resources` as RBAC rules' `(apiGroups, resources)`: one per group, in group order, a
/// group's `*` standing for all of it, and `*.*` for everything.
pub fn resource_rules(resources: &[Resource]) -> Vec<(String, Vec<String>)> {
    use std::collections::{BTreeMap, BTreeSet};
    if resources.iter().any(|r| r.group == "*") {
        return vec![("*".to_owned(), vec!["*".to_owned()])];
    }
    let mut groups: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for r in resources {
        groups.entry(&r.group).or_default().insert(&r.resource);
    }
    groups
        .into_iter()
        .map(|(group, plurals)| {
            let plurals: Vec<String> = if plurals.contains("*") {
                vec!["*".to_owned()]
            } else {
                plurals.into_iter().map(str::to_owned).collect()
            };
            (group.to_owned(), plurals)
        })
        .collect()
}

/// What `lien manifests --image/--namespace/--replicas/--resource` may change in the install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The Deployment's image.
    pub image: String,
    /// The namespace of every namespaced object, and the one created.
    pub namespace: String,
    /// The Deployment's replicas; with one, no PodDisruptionBudget is installed (a budget of
    /// one available pod out of one would block every node drain forever).
    pub replicas: u32,
    /// The resources Lien may watch, label and delete ([`DEFAULT_RESOURCES`] by default). A
    /// Usage or rule naming a kind of another resource is `Ready=False, NotPermitted`, naming
    /// the resource to add.
    pub resources: Vec<Resource>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            image: image(),
            namespace: NAMESPACE.to_owned(),
            replicas: REPLICAS,
            resources: default_resources(),
        }
    }
}

impl Options {
    /// The first invalid option, as an error naming its flag and what would be valid.
    pub fn validate(&self) -> Result<(), String> {
        check_image(&self.image).map_err(|why| {
            format!(
                "--image {:?} is not an image reference: {why} (e.g. lien:{} or registry.example.com:5000/team/lien@sha256:<64 hex>)",
                self.image,
                env!("CARGO_PKG_VERSION")
            )
        })?;
        check_dns_label(&self.namespace).map_err(|why| {
            format!(
                "--namespace {:?} is not a namespace name: {why} (a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)",
                self.namespace
            )
        })?;
        if self.replicas < 1 {
            return Err(format!(
                "--replicas {} is too few: Lien's webhook needs at least 1 replica (2, the default, keeps it answering during a rollout or a node drain)",
                self.replicas
            ));
        }
        Ok(())
    }
}

/// Whether `name` is a DNS label (RFC 1123), as Kubernetes requires of a namespace.
pub fn check_dns_label(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 63 {
        return Err(format!("it has {} characters, more than 63", name.len()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!("{c:?} is not a lowercase letter, digit or '-'"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("it starts or ends with '-'".into());
    }
    Ok(())
}

/// Whether `reference` is an image reference as the container runtime parses it
/// (github.com/distribution/reference): `[host[:port]/]path[:tag][@algorithm:hex]`, the path
/// lowercase components separated by `/`.
pub fn check_image(reference: &str) -> Result<(), String> {
    if reference.is_empty() {
        return Err("it is empty".into());
    }
    if let Some(c) = reference
        .chars()
        .find(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!("it contains {c:?}"));
    }
    let (name_tag, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    if let Some(digest) = digest {
        let (algorithm, hex) = digest
            .split_once(':')
            .ok_or_else(|| format!("the digest {digest:?} is not ALGORITHM:HEX"))?;
        let algorithm_ok = !algorithm.is_empty()
            && algorithm.starts_with(|c: char| c.is_ascii_alphabetic())
            && algorithm
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_+.".contains(c));
        if !algorithm_ok || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "the digest {digest:?} is not ALGORITHM:HEX (at least 32 hex digits)"
            ));
        }
    }
    // A tag is after the last ':' that follows the last '/' (a ':' before it is a port).
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_tag[..last_slash + i],
            Some(&name_tag[last_slash + i + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(tag) = tag {
        let ok = !tag.is_empty()
            && tag.len() <= 128
            && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
        if !ok {
            return Err(format!(
                "the tag {tag:?} is not 1 to 128 letters, digits, '_', '.' or '-' (not starting with '.' or '-')"
            ));
        }
    }
    if name.len() > 255 {
        return Err(format!(
            "the name has {} characters, more than 255",
            name.len()
        ));
    }
    let mut components: Vec<&str> = name.split('/').collect();
    // The first component is a registry host when it looks like one, as the runtime decides.
    if components.len() > 1
        && (components[0].contains(['.', ':'])
            || components[0] == "localhost"
            || components[0].chars().any(|c| c.is_ascii_uppercase()))
    {
        check_registry(components.remove(0))?;
    }
    for component in components {
        check_path_component(component)?;
    }
    Ok(())
}

fn check_registry(host: &str) -> Result<(), String> {
    let (host, port) = match host.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || !p.is_empty() => (h, Some(p)),
        _ => (host, None),
    };
    if let Some(port) = port {
        if port.is_empty() || !port.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("the registry port {port:?} is not a number"));
        }
    }
    let ok = if let Some(ipv6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        !ipv6.is_empty() && ipv6.chars().all(|c| c.is_ascii_hexdigit() || c == ':')
    } else {
        !host.is_empty()
            && host.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
    };
    if ok {
        Ok(())
    } else {
        Err(format!("the registry {host:?} is not a host name"))
    }
}

fn check_path_component(component: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "{component:?} is not a repository path component (lowercase letters and digits, \
             separated by '.', '_', '__' or '-')"
        )
    };
    if component.is_empty() {
        return Err("the repository name has an empty component".into());
    }
    if !component
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
    {
        return Err(bad());
    }
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(bad());
    }
    // Separators: one '.', one or two '_', or any run of '-'; never mixed.
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &component[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.chars().all(|c| c == '-');
        if !ok {
            return Err(bad());
        }
    }
    Ok(())
}

/// One file of the install: its name under `deploy/`, a comment saying what it is for, and its
/// objects.
#[derive(Debug, Clone)]
pub struct ManifestFile {
    /// File name, relative to `deploy/`.
    pub path: String,
    /// Why the file exists, written as its leading comment (none for the CRDs, whose files
    /// are exactly what `lien crds --out-dir` writes).
    pub comment: Option<&'static str>,
    /// The objects, in apply order.
    pub objects: Vec<Manifest>,
}

/// One object, with a comment per RBAC rule where it has rules.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The object.
    pub object: Value,
    /// For a Role or ClusterRole: why each of its `rules` is needed, in order.
    pub rule_reasons: Vec<String>,
}

impl Manifest {
    fn plain(object: Value) -> Self {
        Self {
            object,
            rule_reasons: Vec::new(),
        }
    }

    /// A Role or ClusterRole from `(why, rule)` pairs.
    fn role(mut object: Value, rules: Vec<(impl Into<String>, Value)>) -> Self {
        let (rule_reasons, rules): (Vec<String>, Vec<_>) =
            rules.into_iter().map(|(why, r)| (why.into(), r)).unzip();
        object["rules"] = Value::Array(rules);
        Self {
            object,
            rule_reasons,
        }
    }
}

fn labels() -> Value {
    json!({
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/part-of": NAME,
        "app.kubernetes.io/version": env!("CARGO_PKG_VERSION"),
    })
}

fn selector() -> Value {
    json!({"app.kubernetes.io/name": NAME})
}

fn metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({"name": name, "labels": labels()});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    meta
}

fn binding(kind: &str, name: &str, namespace: Option<&str>, o: &Options) -> Value {
    binding_of(kind, metadata(name, namespace), name, NAME, &o.namespace)
}

/// A (Cluster)RoleBinding with `meta`, of the (Cluster)Role `role` (the same name as the
/// binding) to the ServiceAccount `account` in `namespace`.
fn binding_of(kind: &str, meta: Value, role: &str, account: &str, namespace: &str) -> Value {
    let role_kind = if kind == "ClusterRoleBinding" {
        "ClusterRole"
    } else {
        "Role"
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    })
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

/// The rules granting `verbs` on `o.resources` and on Namespaces, each with why: the first
/// says what they are for (`purpose`), the others which group they grant.
fn resource_grants(o: &Options, verbs: &[&str], purpose: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (i, (group, plurals)) in resource_rules(&o.resources).into_iter().enumerate() {
        let why = match (i, group.as_str()) {
            (_, "*") => format!(
                "{purpose} Every resource of every group (--resource '*.*'): this grants \
                 reading every Secret in the cluster."
            ),
            (0, _) => format!(
                "{purpose} Only these resources (`lien manifests --resource`, the Helm value \
                 rbac.protectedResources): a Usage or rule naming another kind says \
                 NotPermitted and which resource to add. No Secrets unless listed: a list or \
                 watch reads them in full."
            ),
            (_, "") => "…in the core group.".to_owned(),
            (_, g) => format!("…in {g}."),
        };
        let plurals: Vec<&str> = plurals.iter().map(String::as_str).collect();
        out.push((why, rule(&[group.as_str()], &plurals, verbs)));
    }
    out.push((
        "Namespaces, always: Lien reads which are being deleted (a Usage inside one keeps \
         protecting), and a Namespace DELETE it refuses is recorded on the Namespace and \
         replayed."
            .to_owned(),
        rule(&[""], &["namespaces"], verbs),
    ));
    out
}

fn rbac(o: &Options) -> Vec<Manifest> {
    let ns = Some(o.namespace.as_str());
    let mut rules = resource_grants(
        o,
        PROTECTED_VERBS,
        "Objects of the kinds Usages and rules name: watch them (metadata, or the fields a \
         rule's CEL reads), put and remove the in-use label and the replay record (patch), and \
         re-issue a refused DELETE (delete; CascadeRule children too).",
    );
    rules.push((
        "Lien's condition on a Namespace being deleted that it holds (LienContentHeld): what \
         keeps it, where `kubectl describe namespace` shows it."
            .to_owned(),
        rule(&[""], &["namespaces/status"], &["patch"]),
    ));
    rules.extend(
        [
            (
                "Lien's own API: read every Usage and rule, write their finalizers, owner \
                 references and status.",
                rule(
                    &["lien.dev"],
                    &[
                        "usages",
                        "clusterusages",
                        "dependencyrules",
                        "cascaderules",
                        "usages/status",
                        "clusterusages/status",
                        "dependencyrules/status",
                        "cascaderules/status",
                    ],
                    &["get", "list", "watch", "patch", "update", "delete"],
                ),
            ),
            (
                "DeletionRefused, BreakGlass and cascade progress events (core and \
                 events.k8s.io).",
                rule(
                    &["", "events.k8s.io"],
                    &["events"],
                    &["create", "patch", "update"],
                ),
            ),
            (
                "Lien writes its own Validating- and MutatingWebhookConfiguration with the CA \
                 bundle of the certificate it issues itself, and watches them for tampering.",
                rule(
                    &["admissionregistration.k8s.io"],
                    &[
                        "validatingwebhookconfigurations",
                        "mutatingwebhookconfigurations",
                    ],
                    &["get", "list", "watch", "create", "patch", "update"],
                ),
            ),
            (
                "Discovery of new kinds (a Usage or rule over a CRD that appears later), and \
                 `lien run --install-crds`.",
                rule(
                    &["apiextensions.k8s.io"],
                    &["customresourcedefinitions"],
                    &["get", "list", "watch", "create", "patch", "update"],
                ),
            ),
            (
                "\"May the creator of this Usage or rule update what it protects?\" \
                 (`--usage-access-check`), and \"may the requester of this deletion \
                 (kubectl lien delete --when-free) delete the object?\"",
                rule(
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                    &["create"],
                ),
            ),
        ]
        .map(|(why, r)| (why.to_owned(), r)),
    );
    let cluster_role = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(NAME, None),
        }),
        rules,
    );
    let leases = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata("lien-leader-election", ns),
        }),
        vec![(
            "Leader election: one replica writes, every replica answers the webhook.",
            rule(
                &["coordination.k8s.io"],
                &["leases"],
                &["get", "create", "update", "patch"],
            ),
        )],
    );
    let replay_key = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata("lien-replay-key", ns),
        }),
        vec![
            (
                "The replay key's Secret is created at the first start (`create` cannot be \
                 restricted by name: the name is not known before the object exists).",
                rule(&[""], &["secrets"], &["create"]),
            ),
            (
                "…and read at every start, by name only. Grant no other subject access to \
                 Secrets in Lien's namespace: the key seals the records of refused DELETEs.",
                json!({"apiGroups": [""], "resources": ["secrets"],
                       "resourceNames": [lien_controller::writer::REPLAY_KEY_SECRET], "verbs": ["get"]}),
            ),
        ],
    );
    let webhook_ca = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata("lien-webhook-ca", ns),
        }),
        vec![
            (
                "The webhook CA's Secret is created by the first replica to start (`create` \
                 cannot be restricted by name).",
                rule(&[""], &["secrets"], &["create"]),
            ),
            (
                "…read by every replica at start and then periodically, so that all serve \
                 certificates from the one CA the caBundle trusts; updated by the leader only, \
                 when it rotates the CA (a replace guarded by resourceVersion). By name only: \
                 the Secret holds the CA's private key.",
                json!({"apiGroups": [""], "resources": ["secrets"],
                       "resourceNames": [crate::webhook_ca::WEBHOOK_CA_SECRET],
                       "verbs": ["get", "update"]}),
            ),
        ],
    );
    vec![
        Manifest::plain(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(NAME, ns),
        })),
        cluster_role,
        Manifest::plain(binding("ClusterRoleBinding", NAME, None, o)),
        leases,
        Manifest::plain(binding("RoleBinding", "lien-leader-election", ns, o)),
        replay_key,
        Manifest::plain(binding("RoleBinding", "lien-replay-key", ns, o)),
        webhook_ca,
        Manifest::plain(binding("RoleBinding", "lien-webhook-ca", ns, o)),
    ]
}

/// Pod Security "restricted" for Lien's pods: a non-root UID, seccomp `RuntimeDefault`.
fn pod_security_context() -> Value {
    json!({
        "runAsNonRoot": true,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

/// Pod Security "restricted" for Lien's containers: no privilege escalation, a read-only root
/// filesystem, every capability dropped.
fn container_security_context() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn deployment(o: &Options) -> Value {
    let probe = |path: &str, period: u32, failures: u32| {
        json!({
            "httpGet": {"path": path, "port": "https", "scheme": "HTTPS"},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 2,
        })
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(NAME, Some(&o.namespace)),
        "spec": {
            "replicas": o.replicas,
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": selector()},
            // One replica at a time, never fewer than one ready: the webhook fails closed for
            // in-use objects, so a rollout must not leave it unanswered.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": labels()},
                "spec": {
                    "serviceAccountName": NAME,
                    "automountServiceAccountToken": true,
                    // Longer than the webhook's drain, so SIGTERM's in-flight answers and the
                    // lease release finish.
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": pod_security_context(),
                    // Two replicas on two nodes where there are two: a node lost never takes
                    // the webhook with it. `ScheduleAnyway` keeps a one-node cluster working.
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": selector()},
                    }],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": selector()},
                        },
                    }]}},
                    "containers": [{
                        "name": NAME,
                        "image": o.image,
                        "imagePullPolicy": "IfNotPresent",
                        "args": [
                            "run",
                            format!("--webhook-addr=0.0.0.0:{WEBHOOK_PORT}"),
                            format!("--service-name={SERVICE}"),
                            "--log-format=json",
                        ],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "LIEN_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            // Who Lien is, for its mutating webhook: this pod's service account
                            // in whatever namespace it runs (the kubelet expands `$(…)`); without
                            // it, a cluster without SelfSubjectReview (< 1.28) would fall back
                            // to `lien-system`'s.
                            {"name": "LIEN_OWN_USERNAME", "value": format!("system:serviceaccount:$(LIEN_NAMESPACE):{NAME}")},
                        ],
                        "ports": [{"name": "https", "containerPort": WEBHOOK_PORT, "protocol": "TCP"}],
                        "readinessProbe": probe("/readyz", 5, 3),
                        "livenessProbe": probe("/healthz", 10, 6),
                        // docs/operations.md "Sizing": about 130 MiB at 100,000 rule relations
                        // over 1.5 KB objects; raise the limit with the number of relations.
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "128Mi"},
                            "limits": {"memory": "512Mi"},
                        },
                        "securityContext": container_security_context(),
                    }],
                },
            },
        },
    })
}

fn service(o: &Options) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(SERVICE, Some(&o.namespace)),
        "spec": {
            "selector": selector(),
            "ports": [
                {"name": "webhook", "port": 443, "targetPort": "https", "protocol": "TCP"},
                // Prometheus scrapes `/metrics` over HTTPS on the same listener.
                {"name": "metrics", "port": WEBHOOK_PORT, "targetPort": "https", "protocol": "TCP"},
            ],
        },
    })
}

fn disruption_budget(o: &Options) -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(NAME, Some(&o.namespace)),
        "spec": {"minAvailable": 1, "selector": {"matchLabels": selector()}},
    })
}

/// Name of the Helm chart's pre-delete hook: its Job, ServiceAccount, roles and bindings.
pub const UNINSTALL_HOOK: &str = "lien-uninstall";
/// The arguments of the hook's `lien uninstall` that `uninstallHook.force` adds.
pub const UNINSTALL_HOOK_FORCE: &str = "--force";

/// Helm's hook annotations: a pre-delete hook, created in `weight` order, deleted once it
/// succeeded (a failed Job is kept for its log) and before it is made again.
fn hook_metadata(name: &str, namespace: Option<&str>, weight: i32) -> Value {
    let mut meta = json!({
        "name": name,
        "labels": {
            "app.kubernetes.io/name": UNINSTALL_HOOK,
            "app.kubernetes.io/part-of": NAME,
            "app.kubernetes.io/version": env!("CARGO_PKG_VERSION"),
        },
        "annotations": {
            "helm.sh/hook": "pre-delete",
            "helm.sh/hook-weight": weight.to_string(),
            "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded",
        },
    });
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    meta
}

/// The Helm chart's pre-delete hook (`templates/uninstall-hook.yaml`, not in `lien manifests`:
/// without Helm, `lien uninstall` is run by hand). `helm uninstall` deletes the Deployment
/// and the webhook's Service together; with Lien's webhook configuration left behind, failing
/// closed, every DELETE of an object in use would then fail until someone removed it. So
/// Helm first runs `lien uninstall --keep-installed-objects` as this Job: it refuses (the Job
/// fails, and with it `helm uninstall`, nothing removed) while something is still protected,
/// unless `uninstallHook.force`; else it stops Lien, deletes the webhook configurations and
/// removes Lien's labels, records and finalizers; Helm deletes the rest.
pub fn uninstall_hook(o: &Options, force: bool) -> Vec<Manifest> {
    let ns = Some(o.namespace.as_str());
    let hook_binding = |kind: &str, namespace: Option<&str>| {
        Manifest::plain(binding_of(
            kind,
            hook_metadata(UNINSTALL_HOOK, namespace, -1),
            UNINSTALL_HOOK,
            UNINSTALL_HOOK,
            &o.namespace,
        ))
    };
    let cluster_role = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": hook_metadata(UNINSTALL_HOOK, None, -1),
        }),
        resource_grants(
            o,
            &["list", "patch"],
            "Find what Lien wrote on objects — the in-use label, replay records, its \
             finalizers — and remove exactly that (a merge patch guarded by the \
             resourceVersion read): the resources Lien itself may watch and patch, for the \
             seconds the Job runs.",
        )
        .into_iter()
        .chain([
            (
                "Whether a Usage or rule still protects something, and Lien's finalizers on \
                 them."
                    .to_owned(),
                rule(
                    &[lien_api::GROUP],
                    &["usages", "clusterusages", "dependencyrules", "cascaderules"],
                    &["list", "patch"],
                ),
            ),
            (
                "Delete Lien's webhook configurations, by name only: after this nothing is \
                 refused or sealed.".to_owned(),
                json!({"apiGroups": ["admissionregistration.k8s.io"],
                       "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
                       "resourceNames": [NAME], "verbs": ["get", "delete"]}),
            ),
        ])
        .collect(),
    );
    let role = Manifest::role(
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": hook_metadata(UNINSTALL_HOOK, ns, -1),
        }),
        vec![
            (
                "Stop Lien first (a running leader restores its webhook configuration): \
                 delete its Deployment, by name.",
                json!({"apiGroups": ["apps"], "resources": ["deployments"],
                       "resourceNames": [NAME], "verbs": ["get", "delete"]}),
            ),
            (
                "…wait for its pods to be gone…",
                rule(&[""], &["pods"], &["list"]),
            ),
            (
                "…and for its leader Lease to be free, by name.",
                json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                       "resourceNames": [lien_controller::leader::DEFAULT_LEASE], "verbs": ["get"]}),
            ),
        ],
    );
    let mut args = vec![
        "uninstall".to_owned(),
        "--keep-installed-objects".to_owned(),
        // Two items, so that the chart templates the namespace as a whole scalar.
        "--namespace".to_owned(),
        o.namespace.clone(),
        "--timeout-seconds=120".to_owned(),
    ];
    if force {
        args.push(UNINSTALL_HOOK_FORCE.to_owned());
    }
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": hook_metadata(UNINSTALL_HOOK, ns, 0),
        "spec": {
            // A refusal is an answer, not a failure to retry: the Job fails at once, and
            // `helm uninstall` with it.
            "backoffLimit": 0,
            // Within Helm's default --timeout of 5 minutes, above the waits' 120 s.
            "activeDeadlineSeconds": 240,
            "template": {
                // Not Lien's pod labels: the uninstall waits for those pods to be gone.
                "metadata": {"labels": hook_metadata(UNINSTALL_HOOK, None, 0)["labels"].clone()},
                "spec": {
                    "serviceAccountName": UNINSTALL_HOOK,
                    "restartPolicy": "Never",
                    "securityContext": pod_security_context(),
                    "containers": [{
                        "name": "uninstall",
                        "image": o.image,
                        "imagePullPolicy": "IfNotPresent",
                        "args": args,
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"memory": "256Mi"},
                        },
                        "securityContext": container_security_context(),
                    }],
                },
            },
        },
    });
    vec![
        Manifest::plain(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": hook_metadata(UNINSTALL_HOOK, ns, -1),
        })),
        cluster_role,
        hook_binding("ClusterRoleBinding", None),
        role,
        hook_binding("RoleBinding", ns),
        Manifest::plain(job),
    ]
}

/// Every file of the default install, in apply order.
pub fn files() -> Vec<ManifestFile> {
    files_with(&Options::default())
}

/// Every file of the install with these options, in apply order.
pub fn files_with(o: &Options) -> Vec<ManifestFile> {
    let mut files = vec![
        ManifestFile {
            path: "namespace.yaml".into(),
            comment: Some(
                "Lien's namespace. Pod Security \"restricted\" is enforced: Lien needs nothing more.",
            ),
            objects: vec![Manifest::plain(json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": o.namespace,
                    "labels": {
                        "app.kubernetes.io/part-of": NAME,
                        "pod-security.kubernetes.io/enforce": "restricted",
                        "pod-security.kubernetes.io/enforce-version": "latest",
                    },
                },
            }))],
        },
        ManifestFile {
            path: "rbac.yaml".into(),
            comment: Some(
                "Lien's ServiceAccount and what it may do, each rule with why (least privilege).",
            ),
            objects: rbac(o),
        },
    ];
    for crd in lien_api::crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut object = serde_json::to_value(&crd).unwrap_or_default();
        // `CustomResourceDefinition`'s Serialize writes apiVersion and kind already; keep the
        // object exactly as `lien crds` prints it.
        if object.get("apiVersion").is_none() {
            object["apiVersion"] = json!("apiextensions.k8s.io/v1");
            object["kind"] = json!("CustomResourceDefinition");
        }
        files.push(ManifestFile {
            path: format!("crds/{name}.yaml"),
            comment: None,
            objects: vec![Manifest::plain(object)],
        });
    }
    let mut objects = vec![Manifest::plain(deployment(o)), Manifest::plain(service(o))];
    if o.replicas >= 2 {
        objects.push(Manifest::plain(disruption_budget(o)));
    }
    files.push(ManifestFile {
        path: "deployment.yaml".into(),
        comment: Some(
            "Two replicas by default: every replica answers the webhook, one (the Lease holder) writes.",
        ),
        objects,
    });
    files
}

/// Every object of the default install, in apply order.
pub fn objects() -> Vec<Value> {
    objects_with(&Options::default())
}

/// Every object of the install with these options, in apply order.
pub fn objects_with(o: &Options) -> Vec<Value> {
    files_with(o)
        .into_iter()
        .flat_map(|f| f.objects.into_iter().map(|m| m.object))
        .collect()
}

/// `deploy/kustomization.yaml`: the same objects, for `kubectl apply -k deploy/`.
pub fn kustomization() -> String {
    kustomization_with(&Options::default())
}

/// `kustomization.yaml` for the files of [`files_with`].
pub fn kustomization_with(o: &Options) -> String {
    let mut out = String::from(
        "# Generated by `lien manifests --out-dir deploy`: the same objects as `lien manifests`.\n\
         apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n",
    );
    for file in files_with(o) {
        out.push_str(&format!("  - {}\n", file.path));
    }
    out
}

/// A Prometheus Operator `ServiceMonitor` for the Service `lien-webhook` in `namespace`
/// (`deploy/monitoring/servicemonitor.yaml`, and the chart's with `serviceMonitor.enabled`): it
/// scrapes `/metrics` on the webhook's HTTPS port. The serving certificate is issued by Lien's own
/// CA for the Service's DNS name while Prometheus scrapes pod IPs, so the scrape skips
/// verification; docs/operations.md ("Scraping") shows how to verify against the CA instead.
pub fn service_monitor(namespace: &str) -> Value {
    json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata(NAME, Some(namespace)),
        "spec": {
            // No namespaceSelector: the Operator looks in the ServiceMonitor's own namespace,
            // the Service's.
            "selector": {"matchLabels": selector()},
            "endpoints": [{
                "port": "webhook",
                "scheme": "https",
                "path": "/metrics",
                "interval": "30s",
                "tlsConfig": {"insecureSkipVerify": true},
            }],
        },
    })
}

/// One object as YAML, with a comment line before each RBAC rule.
pub fn render(manifest: &Manifest) -> Result<String, serde_yaml_ng::Error> {
    if manifest.rule_reasons.is_empty() {
        return serde_yaml_ng::to_string(&manifest.object);
    }
    let mut head = manifest.object.clone();
    let rules = head
        .as_object_mut()
        .and_then(|o| o.remove("rules"))
        .unwrap_or_default();
    let mut out = serde_yaml_ng::to_string(&head)?;
    out.push_str("rules:\n");
    for (reason, rule) in manifest
        .rule_reasons
        .iter()
        .zip(rules.as_array().into_iter().flatten())
    {
        for line in wrap(reason, 96) {
            out.push_str(&format!("  # {line}\n"));
        }
        let yaml = serde_yaml_ng::to_string(rule)?;
        for (i, line) in yaml.lines().enumerate() {
            let prefix = if i == 0 { "  - " } else { "    " };
            out.push_str(prefix);
            out.push_str(line);
            out.push('\n');
        }
    }
    Ok(out)
}

/// A file: its comment, then its objects separated by `---`.
pub fn render_file(file: &ManifestFile) -> Result<String, serde_yaml_ng::Error> {
    let mut out = String::new();
    for line in file.comment.map(|c| wrap(c, 98)).unwrap_or_default() {
        out.push_str(&format!("# {line}\n"));
    }
    let objects = file
        .objects
        .iter()
        .map(render)
        .collect::<Result<Vec<_>, _>>()?;
    out.push_str(&objects.join("---\n"));
    Ok(out)
}

/// Words joined into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod image_tests {
    /// The repository this build was told is one an image reference can start with (the
    /// release workflow lower-cases its registry path: references are lowercase).
    #[test]
    fn the_default_image_is_a_reference() {
        super::check_image(&super::image()).expect("a valid image reference");
        assert!(super::image().starts_with(super::IMAGE_REPOSITORY));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
    use serde::de::DeserializeOwned;

    use super::*;

    /// Through the typed API and back: a misspelt field would be dropped and the object differ.
    fn round_trips<T: DeserializeOwned + serde::Serialize>(object: &Value) {
        let typed: T = serde_json::from_value(object.clone()).expect("parses as the kind");
        let back = serde_json::to_value(&typed).expect("serialises");
        assert_eq!(&back, object, "fields lost in a round trip");
    }

    #[test]
    fn every_object_is_well_formed_for_its_kind() {
        let hook = uninstall_hook(&Options::default(), true);
        for object in objects()
            .into_iter()
            .chain(hook.into_iter().map(|m| m.object))
        {
            match object["kind"].as_str().unwrap_or_default() {
                "Job" => round_trips::<k8s_openapi::api::batch::v1::Job>(&object),
                "Deployment" => round_trips::<Deployment>(&object),
                "Service" => round_trips::<Service>(&object),
                "PodDisruptionBudget" => round_trips::<PodDisruptionBudget>(&object),
                "ClusterRole" => round_trips::<ClusterRole>(&object),
                "Role" => round_trips::<Role>(&object),
                _ => {}
            }
        }
    }

    #[test]
    fn the_pod_meets_pod_security_restricted() {
        let deployment = deployment(&Options::default());
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        for c in pod["containers"].as_array().into_iter().flatten() {
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false);
            assert_eq!(sc["readOnlyRootFilesystem"], true);
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
            assert!(c["resources"]["requests"]["memory"].is_string());
            assert!(c["resources"]["limits"]["memory"].is_string());
            assert!(c["readinessProbe"].is_object() && c["livenessProbe"].is_object());
        }
        assert_eq!(deployment["spec"]["replicas"], 2);
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
            0
        );
    }

    #[test]
    fn the_uninstall_hook_runs_restricted_and_never_waits_for_itself() {
        let hook = uninstall_hook(&Options::default(), false);
        let job = &hook.last().expect("the Job").object;
        assert_eq!(job["kind"], "Job");
        let pod = &job["spec"]["template"];
        // `lien uninstall` waits for the pods labelled as Lien's to be gone.
        assert_ne!(
            pod["metadata"]["labels"]["app.kubernetes.io/name"],
            selector()["app.kubernetes.io/name"]
        );
        assert_eq!(pod["spec"]["securityContext"]["runAsNonRoot"], true);
        let sc = &pod["spec"]["containers"][0]["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(job["spec"]["backoffLimit"], 0);
        // Everything the Job needs exists before it: Helm creates hooks by weight.
        for m in &hook[..hook.len() - 1] {
            assert_eq!(
                m.object["metadata"]["annotations"]["helm.sh/hook-weight"],
                "-1"
            );
            if let Some(rules) = m.object["rules"].as_array() {
                assert_eq!(rules.len(), m.rule_reasons.len());
            }
        }
        assert_eq!(job["metadata"]["annotations"]["helm.sh/hook-weight"], "0");
    }

    #[test]
    fn every_rbac_rule_says_why_and_the_yaml_parses_back_to_the_objects() {
        for file in files() {
            for manifest in &file.objects {
                if let Some(rules) = manifest.object["rules"].as_array() {
                    assert_eq!(rules.len(), manifest.rule_reasons.len());
                }
            }
            let text = render_file(&file).expect("renders");
            let parsed: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
                .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
                .collect();
            let want: Vec<Value> = file.objects.iter().map(|m| m.object.clone()).collect();
            assert_eq!(parsed, want, "{}", file.path);
            if file.path == "rbac.yaml" {
                assert!(text.contains("  # Leader election"), "{text}");
            }
        }
    }

    #[test]
    fn image_references_are_checked_as_the_runtime_parses_them() {
        for good in [
            "lien",
            "lien:0.1.0",
            "lien/lien:latest",
            "registry.example.com:5000/team/lien:1.2.3",
            "localhost/lien",
            "[::1]:5000/lien:x",
            "x/a_b__c.d-e---f:T_a.g-",
            "lien@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "r.io/lien:1@sha256:0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_image(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "lien:bad tag",
            "Lien",
            "lien/UPPER",
            "lien:",
            "lien:.x",
            "-lien",
            "lien-",
            "li..en",
            "li___en",
            "lien//x",
            "lien@sha256:abc",
            "lien@:0123456789abcdef0123456789abcdef",
            "host:port/lien",
            "bad_host.io/lien",
        ] {
            assert!(check_image(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn namespaces_are_dns_labels() {
        for good in ["lien-system", "a", "0", &"a".repeat(63)] {
            assert_eq!(check_dns_label(good), Ok(()), "{good}");
        }
        for bad in ["", "Lien", "a_b", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert!(check_dns_label(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_bad_option_names_its_flag() {
        let bad = |o: Options| o.validate().expect_err("refused");
        let image = bad(Options {
            image: "a b".into(),
            ..Options::default()
        });
        assert!(image.starts_with("--image"), "{image}");
        let ns = bad(Options {
            namespace: "Lien".into(),
            ..Options::default()
        });
        assert!(ns.starts_with("--namespace"), "{ns}");
        let replicas = bad(Options {
            replicas: 0,
            ..Options::default()
        });
        assert!(replicas.starts_with("--replicas"), "{replicas}");
        assert_eq!(Options::default().validate(), Ok(()));
    }
}

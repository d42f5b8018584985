//! What kube-apiserver's discovery says that the OpenAPI documents (and so k8s-openapi) do not:
//! short names, categories, the verbs of the few resources whose storage is not the generic
//! store, and the subresources other than `status`. Each entry cites the k/k source it follows
//! (release-1.32, `pkg/registry/<group>/<resource>/storage/storage.go` unless said otherwise).

/// `ShortNames()` of each storage.
pub const SHORT_NAMES: &[(&str, &str, &[&str])] = &[
    ("", "componentstatuses", &["cs"]), // core/componentstatus/rest.go
    ("", "configmaps", &["cm"]),
    ("", "endpoints", &["ep"]),
    ("", "events", &["ev"]),
    ("", "limitranges", &["limits"]),
    ("", "namespaces", &["ns"]),
    ("", "nodes", &["no"]),
    ("", "persistentvolumeclaims", &["pvc"]),
    ("", "persistentvolumes", &["pv"]),
    ("", "pods", &["po"]),
    ("", "replicationcontrollers", &["rc"]),
    ("", "resourcequotas", &["quota"]),
    ("", "serviceaccounts", &["sa"]),
    ("", "services", &["svc"]),
    // apiextensions-apiserver/pkg/registry/customresourcedefinition/etcd.go
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["crd", "crds"],
    ),
    ("apps", "daemonsets", &["ds"]),
    ("apps", "deployments", &["deploy"]),
    ("apps", "replicasets", &["rs"]),
    ("apps", "statefulsets", &["sts"]),
    ("autoscaling", "horizontalpodautoscalers", &["hpa"]),
    ("batch", "cronjobs", &["cj"]),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &["csr"],
    ),
    ("events.k8s.io", "events", &["ev"]),
    ("networking.k8s.io", "ingresses", &["ing"]),
    ("networking.k8s.io", "networkpolicies", &["netpol"]),
    ("policy", "poddisruptionbudgets", &["pdb"]),
    ("scheduling.k8s.io", "priorityclasses", &["pc"]),
    ("storage.k8s.io", "storageclasses", &["sc"]),
];

/// `Categories()` of each storage: `all` is what `kubectl get all` lists.
pub const CATEGORIES: &[(&str, &str, &[&str])] = &[
    ("", "pods", &["all"]),
    ("", "replicationcontrollers", &["all"]),
    ("", "services", &["all"]),
    ("apps", "daemonsets", &["all"]),
    ("apps", "deployments", &["all"]),
    ("apps", "replicasets", &["all"]),
    ("apps", "statefulsets", &["all"]),
    ("autoscaling", "horizontalpodautoscalers", &["all"]),
    ("batch", "cronjobs", &["all"]),
    ("batch", "jobs", &["all"]),
    // apiextensions-apiserver/pkg/registry/customresourcedefinition/etcd.go,
    // kube-aggregator/pkg/registry/apiservice/etcd/etcd.go,
    // pkg/registry/admissionregistration/*/storage/storage.go
    (
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["api-extensions"],
    ),
    ("apiregistration.k8s.io", "apiservices", &["api-extensions"]),
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        &["api-extensions"],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &["api-extensions"],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
        &["api-extensions"],
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
        &["api-extensions"],
    ),
];

/// The generic registry store's verbs: what a listable resource serves
/// (staging/src/k8s.io/apiserver/pkg/endpoints/installer.go maps the store's interfaces to these).
pub const STORE_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// A resource that is not listable is a create-only virtual resource (reviews, `bindings`).
pub const CREATE_ONLY: &[&str] = &["create"];

/// Resources whose storage is not the plain generic store.
pub const VERB_EXCEPTIONS: &[(&str, &str, &[&str])] = &[
    // core/componentstatus/rest.go: Getter and Lister only.
    ("", "componentstatuses", &["get", "list"]),
    // core/namespace/storage/storage.go: REST wraps the store without DeleteCollection.
    (
        "",
        "namespaces",
        &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
    ),
];

/// One subresource other than `status`: `(name, group, version, kind, verbs)`; an empty group and
/// version mean the parent's.
pub type Sub = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [&'static str],
);

const CONNECT: &[&str] = &["create", "get"];
const PROXY: &[&str] = &["create", "delete", "get", "patch", "update"];
const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];

/// Subresources by parent `(group, plural)`. `pods/resize` is not here: 1.32 registers it only
/// with the alpha `InPlacePodVerticalScaling` gate (pkg/registry/core/rest/storage_core.go).
pub const SUBRESOURCES: &[(&str, &str, &[Sub])] = &[
    (
        "",
        "pods",
        &[
            ("attach", "", "", "PodAttachOptions", CONNECT),
            ("binding", "", "", "Binding", &["create"]),
            ("ephemeralcontainers", "", "", "Pod", GET_PATCH_UPDATE),
            ("eviction", "policy", "v1", "Eviction", &["create"]),
            ("exec", "", "", "PodExecOptions", CONNECT),
            ("log", "", "", "Pod", &["get"]),
            ("portforward", "", "", "PodPortForwardOptions", CONNECT),
            ("proxy", "", "", "PodProxyOptions", PROXY),
        ],
    ),
    ("", "nodes", &[("proxy", "", "", "NodeProxyOptions", PROXY)]),
    (
        "",
        "services",
        &[("proxy", "", "", "ServiceProxyOptions", PROXY)],
    ),
    (
        "",
        "namespaces",
        &[("finalize", "", "", "Namespace", &["update"])],
    ),
    (
        "",
        "serviceaccounts",
        &[(
            "token",
            "authentication.k8s.io",
            "v1",
            "TokenRequest",
            &["create"],
        )],
    ),
    (
        "",
        "replicationcontrollers",
        &[("scale", "autoscaling", "v1", "Scale", GET_PATCH_UPDATE)],
    ),
    (
        "apps",
        "deployments",
        &[("scale", "autoscaling", "v1", "Scale", GET_PATCH_UPDATE)],
    ),
    (
        "apps",
        "replicasets",
        &[("scale", "autoscaling", "v1", "Scale", GET_PATCH_UPDATE)],
    ),
    (
        "apps",
        "statefulsets",
        &[("scale", "autoscaling", "v1", "Scale", GET_PATCH_UPDATE)],
    ),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &[(
            "approval",
            "",
            "",
            "CertificateSigningRequest",
            GET_PATCH_UPDATE,
        )],
    ),
];

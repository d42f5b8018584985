//! Per-resource strategy: what kube-apiserver's registry knows of one resource beyond its
//! schema, written once per resource and registered per resource in [`of`] — as k/k has a
//! `pkg/registry/<group>/<resource>/strategy.go` and a `genericregistry.Store` for each:
//!
//! - the defaulting functions run whenever an object is decoded ([`Strategy::defaults`]);
//! - `PrepareForCreate` ([`Strategy::prepare_for_create`]);
//! - `Validate` and `ValidateUpdate` ([`Strategy::validate`], [`Strategy::validate_update`]);
//! - whether `metadata.generation` is tracked, how names are checked;
//! - what a DELETE answers (`ReturnDeletedObject`), which field selectors a list takes;
//! - the `scale` subresource, and what follows a committed write (`AfterCreate`…);
//! - what its storage does beyond keeping objects ([`Storage`]: a Namespace's lifecycle, a
//!   Service's cluster IPs, reviews answered and never stored).
//!
//! A status subresource takes the written status and keeps the stored spec; what it keeps of
//! the written metadata is each kind's ([`Strategy::status_metadata`]): most of kube's status
//! strategies reset only spec, so labels and annotations written through `pods/status` are
//! stored. Which kinds have one comes from the generated built-in table.
//!
//! The API server ([`crate::apiserver`]) asks the strategy and never matches on
//! `(group, plural)` itself. Pure functions over JSON: no I/O, no server state.
//!
//! A new built-in kind with behaviour of its own: a unit struct implementing [`Strategy`] in
//! its group's file (a workload: a `Workload` value; facts only: a `Facts` value), and one
//! line in [`of`].

mod admissionregistration;
mod apiextensions;
mod apps;
mod batch;
mod core;
mod custom;
pub mod defaults;
mod rbac;
mod types;
mod workload;

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::validation::kinds;

pub use apiextensions::CRD_CLEANUP_FINALIZER;
pub use types::{
    AfterWrite, BuiltinScale, FieldLabels, NameRule, Refusal, StatusMetadata, Storage, Strategy,
};

/// A resource whose strategy differs from kube's generic one only in these facts.
struct Facts {
    /// The kind's own `Validate<Kind>` rules, on create and update.
    validate: fn(&Value) -> Vec<crate::error::Cause>,
    /// The kind's `SetDefaults_<Kind>` (k/k `pkg/apis/<group>/<version>/defaults.go`).
    defaults: fn(&mut Value),
    generation: bool,
    returns_deleted_object: bool,
    field_labels: FieldLabels,
    status_metadata: StatusMetadata,
}

impl Facts {
    const GENERIC: Facts = Facts {
        validate: crate::validation::kinds::none,
        defaults: |_| {},
        generation: false,
        returns_deleted_object: false,
        field_labels: FieldLabels::DEFAULT,
        status_metadata: StatusMetadata::KEPT,
    };
}

impl Strategy for Facts {
    fn validate(
        &self,
        _rt: &ResourceType,
        _version: &str,
        object: &Value,
    ) -> Vec<crate::error::Cause> {
        (self.validate)(object)
    }
    fn defaults(&self, object: &mut Value) {
        (self.defaults)(object)
    }
    fn tracks_generation(&self) -> bool {
        self.generation
    }
    fn returns_deleted_object(&self) -> bool {
        self.returns_deleted_object
    }
    fn field_labels(&self) -> FieldLabels {
        self.field_labels
    }
    fn status_metadata(&self) -> StatusMetadata {
        self.status_metadata
    }
}

/// A review: answered at create, never stored.
struct Answered(Storage);

impl Strategy for Answered {
    fn storage(&self) -> Storage {
        self.0
    }
}

/// The registration table: every resource's strategy.
pub fn of(rt: &ResourceType) -> &'static dyn Strategy {
    if rt.is_custom() {
        return &custom::CustomResources;
    }
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "pods") => &core::Pods,
        ("", "podtemplates") => &core::PodTemplates,
        ("", "services") => &core::Services,
        ("", "secrets") => &core::Secrets,
        ("", "configmaps") => &core::ConfigMaps,
        ("", "namespaces") => &core::Namespaces,
        ("", "persistentvolumeclaims") => &core::PersistentVolumeClaims,
        ("", "persistentvolumes") => &core::PersistentVolumes,
        ("", "replicationcontrollers") => &core::REPLICATION_CONTROLLERS,
        ("", "events") => &core::Events,
        ("", "nodes") => &core::Nodes,
        ("", "serviceaccounts") => &Facts {
            returns_deleted_object: true,
            field_labels: core::NO_EXTRA_LABELS,
            ..Facts::GENERIC
        },
        ("", "endpoints") => &Facts {
            validate: kinds::endpoints,
            defaults: defaults::endpoints,
            field_labels: core::NO_EXTRA_LABELS,
            ..Facts::GENERIC
        },
        ("", "resourcequotas") => &Facts {
            validate: kinds::resource_quota,
            field_labels: core::NO_EXTRA_LABELS,
            ..Facts::GENERIC
        },
        ("apps", "deployments") => &apps::DEPLOYMENTS,
        ("apps", "replicasets") => &apps::REPLICA_SETS,
        ("apps", "statefulsets") => &apps::STATEFUL_SETS,
        ("apps", "daemonsets") => &apps::DAEMON_SETS,
        ("batch", "jobs") => &batch::JOBS,
        ("batch", "cronjobs") => &batch::CRON_JOBS,
        ("policy", "poddisruptionbudgets") => &Facts {
            validate: kinds::pod_disruption_budget,
            generation: true,
            ..Facts::GENERIC
        },
        ("networking.k8s.io", "ingresses") => &Facts {
            validate: kinds::ingress,
            generation: true,
            ..Facts::GENERIC
        },
        ("", "limitranges") => &Facts {
            validate: kinds::limit_range,
            ..Facts::GENERIC
        },
        ("networking.k8s.io", "networkpolicies") => &Facts {
            validate: kinds::network_policy,
            defaults: defaults::network_policy,
            generation: true,
            ..Facts::GENERIC
        },
        ("networking.k8s.io", "ingressclasses") => &Facts {
            validate: kinds::ingress_class,
            ..Facts::GENERIC
        },
        // `endpointSliceStrategy.PrepareForCreate`: generation 1, bumped by changes.
        ("discovery.k8s.io", "endpointslices") => &Facts {
            validate: kinds::endpoint_slice,
            generation: true,
            ..Facts::GENERIC
        },
        ("coordination.k8s.io", "leases") => &Facts {
            validate: kinds::lease,
            ..Facts::GENERIC
        },
        ("scheduling.k8s.io", "priorityclasses") => &Facts {
            validate: kinds::priority_class,
            defaults: defaults::priority_class,
            ..Facts::GENERIC
        },
        ("node.k8s.io", "runtimeclasses") => &Facts {
            validate: kinds::runtime_class,
            ..Facts::GENERIC
        },
        ("autoscaling", "horizontalpodautoscalers") => &Facts {
            validate: kinds::horizontal_pod_autoscaler,
            ..Facts::GENERIC
        },
        ("storage.k8s.io", "storageclasses") => &Facts {
            validate: kinds::storage_class,
            defaults: defaults::storage_class,
            returns_deleted_object: true,
            ..Facts::GENERIC
        },
        ("certificates.k8s.io", "certificatesigningrequests") => &Facts {
            validate: kinds::certificate_signing_request,
            field_labels: FieldLabels {
                extra: &["spec.signerName"],
                refusal: Refusal::Plain,
            },
            ..Facts::GENERIC
        },
        ("storage.k8s.io", "csidrivers") => &Facts {
            defaults: defaults::csi_driver,
            returns_deleted_object: true,
            ..Facts::GENERIC
        },
        ("storage.k8s.io", "csinodes" | "csistoragecapacities" | "volumeattributesclasses") => {
            &Facts {
                returns_deleted_object: true,
                ..Facts::GENERIC
            }
        }
        // `volumeAttachmentStatusStrategy`, `resourceclaimStatusStrategy`:
        // `ResetObjectMetaForStatus`.
        ("storage.k8s.io", "volumeattachments") => &Facts {
            validate: kinds::volume_attachment,
            returns_deleted_object: true,
            status_metadata: StatusMetadata::RESET_FOR_STATUS,
            ..Facts::GENERIC
        },
        ("resource.k8s.io", "resourceclaims") => &Facts {
            returns_deleted_object: true,
            status_metadata: StatusMetadata::RESET_FOR_STATUS,
            ..Facts::GENERIC
        },
        // `flowSchemaStatusStrategy`, `priorityLevelConfigurationStatusStrategy`: the whole
        // ObjectMeta but managedFields.
        ("flowcontrol.apiserver.k8s.io", "flowschemas" | "prioritylevelconfigurations") => &Facts {
            defaults: defaults::flow_control,
            status_metadata: StatusMetadata::Reset,
            ..Facts::GENERIC
        },
        // kube-aggregator's `apiServerStatusStrategy`: labels, annotations, finalizers and owner
        // references reset.
        ("apiregistration.k8s.io", "apiservices") => &Facts {
            status_metadata: StatusMetadata::KeptExcept(&[
                "labels",
                "annotations",
                "finalizers",
                "ownerReferences",
            ]),
            ..Facts::GENERIC
        },
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            &apiextensions::CustomResourceDefinitions
        }
        ("admissionregistration.k8s.io", _) => &admissionregistration::Configurations,
        (crate::authz::RBAC_GROUP, _) => &rbac::Rbac,
        ("authorization.k8s.io", _) => &Answered(Storage::AccessReview),
        ("authentication.k8s.io", "selfsubjectreviews") => &Answered(Storage::SelfReview),
        _ => &Facts::GENERIC,
    }
}

/// Defaults and `PrepareForCreate`, in kube's order: what a create does to a decoded object.
pub fn default_on_create(rt: &ResourceType, object: &mut Value) {
    let strategy = of(rt);
    strategy.defaults(object);
    strategy.prepare_for_create(rt, object);
}

/// Validates a create (`old` none) or an update: metadata, the kind's rules, the rules derived
/// for the built-in types it embeds; `Err` with kube-apiserver's 422 (or 400 for a body that
/// would not decode).
pub fn validate(
    rt: &ResourceType,
    version: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let strategy = of(rt);
    let kind_rules = match old {
        None => strategy.validate(rt, version, object),
        Some(old) => strategy.validate_update(rt, version, object, old),
    };
    let causes = crate::validation::validate(rt, version, object, kind_rules)?;
    if causes.is_empty() {
        return Ok(());
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    // kube names the kind the object says it is (`strategy.ObjectKinds`): a custom resource's
    // may be another kind, which is then one of the causes.
    let kind = object["kind"].as_str().unwrap_or(&rt.kind);
    Err(ApiError::invalid(&rt.group, kind, name, causes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn strategy(group: &str, plural: &str) -> &'static dyn Strategy {
        of(Registry::with_builtins()
            .get(group, plural)
            .unwrap_or_else(|| panic!("{group}/{plural} is built in")))
    }

    #[test]
    fn workloads_track_generation_and_plain_kinds_do_not() {
        for (group, plural) in [
            ("apps", "deployments"),
            ("apps", "statefulsets"),
            ("", "replicationcontrollers"),
            ("batch", "cronjobs"),
            ("policy", "poddisruptionbudgets"),
            ("networking.k8s.io", "ingresses"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
            ),
        ] {
            assert!(
                strategy(group, plural).tracks_generation(),
                "{group}/{plural}"
            );
        }
        for (group, plural) in [("", "configmaps"), ("", "pods"), ("", "services")] {
            assert!(
                !strategy(group, plural).tracks_generation(),
                "{group}/{plural}"
            );
        }
    }

    #[test]
    fn deletes_answer_with_the_object_only_where_the_store_says_so() {
        for (group, plural) in [
            ("", "pods"),
            ("", "services"),
            ("", "serviceaccounts"),
            ("storage.k8s.io", "storageclasses"),
        ] {
            assert!(
                strategy(group, plural).returns_deleted_object(),
                "{group}/{plural}"
            );
        }
        for (group, plural) in [("", "configmaps"), ("apps", "deployments")] {
            assert!(
                !strategy(group, plural).returns_deleted_object(),
                "{group}/{plural}"
            );
        }
    }

    #[test]
    fn names_are_labels_for_namespaces_and_services_and_path_segments_for_rbac() {
        // A service's name starts with a letter (`ValidateServiceName` is `NameIsDNS1035Label`):
        // kube-apiserver 1.32 refused `1svc` in the differential's `invalid/service-name-starts-with-digit`.
        assert_eq!(
            strategy("", "namespaces").name_rule(),
            NameRule::Dns1123Label
        );
        assert_eq!(strategy("", "services").name_rule(), NameRule::Dns1035Label);
        assert_eq!(
            strategy("rbac.authorization.k8s.io", "clusterroles").name_rule(),
            NameRule::PathSegment
        );
        assert_eq!(
            strategy("", "configmaps").name_rule(),
            NameRule::Dns1123Subdomain
        );
    }

    #[test]
    fn namespaces_services_and_reviews_have_storage_of_their_own() {
        assert_eq!(strategy("", "namespaces").storage(), Storage::Namespace);
        assert_eq!(strategy("", "services").storage(), Storage::ClusterIps);
        assert_eq!(
            strategy("authorization.k8s.io", "subjectaccessreviews").storage(),
            Storage::AccessReview
        );
        assert_eq!(
            strategy("authentication.k8s.io", "selfsubjectreviews").storage(),
            Storage::SelfReview
        );
        assert_eq!(strategy("", "configmaps").storage(), Storage::Plain);
    }

    #[test]
    fn scale_is_built_in_for_replicated_workloads() {
        assert_eq!(
            strategy("apps", "deployments").scale(),
            Some(BuiltinScale::LabelSelector)
        );
        assert_eq!(
            strategy("", "replicationcontrollers").scale(),
            Some(BuiltinScale::Map)
        );
        assert_eq!(strategy("apps", "daemonsets").scale(), None);
    }

    /// Every built-in with a status subresource, and what its status strategy's
    /// `PrepareForUpdate` resets of the metadata written through it (kube-apiserver v1.32,
    /// `pkg/registry/<group>/<resource>/strategy.go`; kube-aggregator's `apiservice`). A new
    /// built-in with a status fails here until its strategy is read and listed.
    #[test]
    fn every_status_subresource_keeps_the_metadata_its_kube_strategy_keeps() {
        const SPEC_ONLY: StatusMetadata = StatusMetadata::KEPT;
        let expected: &[(&str, &str, StatusMetadata)] = &[
            // `newX.Spec = oldX.Spec` and nothing else of metadata.
            ("", "namespaces", SPEC_ONLY),
            ("", "nodes", SPEC_ONLY),
            ("", "persistentvolumes", SPEC_ONLY),
            ("", "persistentvolumeclaims", SPEC_ONLY),
            ("", "replicationcontrollers", SPEC_ONLY),
            ("", "resourcequotas", SPEC_ONLY),
            ("", "services", SPEC_ONLY),
            ("apps", "daemonsets", SPEC_ONLY),
            ("apps", "replicasets", SPEC_ONLY),
            ("apps", "statefulsets", SPEC_ONLY),
            ("autoscaling", "horizontalpodautoscalers", SPEC_ONLY),
            ("batch", "cronjobs", SPEC_ONLY),
            ("batch", "jobs", SPEC_ONLY),
            (
                "certificates.k8s.io",
                "certificatesigningrequests",
                SPEC_ONLY,
            ),
            ("networking.k8s.io", "ingresses", SPEC_ONLY),
            ("policy", "poddisruptionbudgets", SPEC_ONLY),
            // `ResetObjectMetaForStatus(&newObj.ObjectMeta, &newObj.ObjectMeta)`: a no-op.
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                SPEC_ONLY,
            ),
            // Spec, `DeletionTimestamp = nil` (then the stored one), owner references.
            (
                "",
                "pods",
                StatusMetadata::KeptExcept(&["deletionTimestamp", "ownerReferences"]),
            ),
            (
                "apps",
                "deployments",
                StatusMetadata::KeptExcept(&["labels"]),
            ),
            (
                "admissionregistration.k8s.io",
                "validatingadmissionpolicies",
                StatusMetadata::RESET_FOR_STATUS,
            ),
            (
                "storage.k8s.io",
                "volumeattachments",
                StatusMetadata::RESET_FOR_STATUS,
            ),
            (
                "flowcontrol.apiserver.k8s.io",
                "flowschemas",
                StatusMetadata::Reset,
            ),
            (
                "flowcontrol.apiserver.k8s.io",
                "prioritylevelconfigurations",
                StatusMetadata::Reset,
            ),
            (
                "apiregistration.k8s.io",
                "apiservices",
                StatusMetadata::KeptExcept(&[
                    "labels",
                    "annotations",
                    "finalizers",
                    "ownerReferences",
                ]),
            ),
        ];
        let registry = Registry::with_builtins();
        let mut with_status: Vec<(String, String)> = registry
            .all()
            .filter(|rt| rt.has_status())
            .map(|rt| (rt.group.clone(), rt.plural.clone()))
            .collect();
        with_status.sort();
        with_status.dedup();
        let mut listed: Vec<(String, String)> = expected
            .iter()
            .map(|(g, p, _)| (g.to_string(), p.to_string()))
            .collect();
        listed.sort();
        assert_eq!(with_status, listed, "built-ins with a status subresource");
        for (group, plural, want) in expected {
            assert_eq!(
                strategy(group, plural).status_metadata(),
                *want,
                "{group}/{plural}"
            );
        }
    }

    #[test]
    fn a_create_defaults_then_prepares() {
        let reg = Registry::with_builtins();
        let ns = reg.get("", "namespaces").expect("namespaces");
        let mut object = serde_json::json!({"metadata": {"name": "shop"}});
        default_on_create(ns, &mut object);
        assert_eq!(
            object["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "shop"
        );
        assert_eq!(
            object["spec"]["finalizers"],
            serde_json::json!(["kubernetes"])
        );
        assert_eq!(object["status"]["phase"], "Active");
        let secrets = reg.get("", "secrets").expect("secrets");
        let mut secret = serde_json::json!({"metadata": {"name": "s"}, "stringData": {"a": "b"}});
        default_on_create(secrets, &mut secret);
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["data"]["a"], "Yg==");
        assert!(secret.get("stringData").is_none());
    }
}

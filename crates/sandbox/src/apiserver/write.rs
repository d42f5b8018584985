//! The write verbs: create, update, patch, delete, deletecollection.
//!
//! Each one reads the stored object, computes the new one without holding the store lock, runs
//! mutating admission (webhooks may patch the new object) and then validating admission,
//! then commits only if the object is still at the revision it read —
//! kube-apiserver's `GuaranteedUpdate`: a write whose client gave no resourceVersion retries on a
//! concurrent change; one that gave a resourceVersion fails with 409 Conflict.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta;
use super::options::{
    Commit, DeleteOptions, DeleteOutcome, FOREGROUND_FINALIZER, FieldValidation, MAX_RETRIES,
    ORPHAN_FINALIZER, Propagation, WriteOptions, Written, body_sets_resource_version,
};
use super::server::{ApiServer, Target};
use crate::admission::{Attributes, GroupVersionKind, GroupVersionResource, Operation};
use crate::error::{ApiError, Cause};
use crate::patch::PatchKind;
use crate::registry::ResourceType;
use crate::strategy::{AfterWrite, Storage};

impl ApiServer {
    /// The stored webhook configurations of one kind (`validatingwebhookconfigurations` or
    /// `mutatingwebhookconfigurations`), read at the time of the request.
    fn webhook_configurations(&self, resource: &str) -> Vec<Value> {
        let store = self.store();
        store
            .list(
                &(
                    "admissionregistration.k8s.io".to_string(),
                    resource.to_string(),
                ),
                None,
            )
            .iter()
            .map(|c| (**c).clone())
            .collect()
    }

    /// The attributes admission sees for a write: objects as the addressed API version shows
    /// them (a Scale for `scale`).
    fn admission_attributes(
        &self,
        operation: Operation,
        t: &Target,
        object: Option<&Value>,
        old: Option<&Value>,
        options: Value,
        write: &WriteOptions,
    ) -> Attributes {
        let rt = &t.resource;
        let namespace_labels = if crate::strategy::of(rt).storage() == Storage::Namespace {
            object.or(old).map(crate::labels::labels_of)
        } else if rt.namespaced {
            self.namespace_labels(&t.namespace)
        } else {
            None
        };
        // A write through `scale` is reviewed as kube-apiserver sends it: an autoscaling/v1
        // Scale, old and new.
        let scale = (t.subresource == "scale")
            .then(|| super::scale::paths(rt, &t.version))
            .flatten();
        // An eviction is reviewed as the policy/v1 Eviction the client posted.
        let eviction = t.subresource == "eviction";
        let view = |o: &Value| match &scale {
            Some(paths) => super::scale::to_scale(paths, o),
            None if eviction => o.clone(),
            None => Self::output(rt, &t.version, o),
        };
        let kind = match scale {
            Some(_) => GroupVersionKind {
                group: "autoscaling".to_string(),
                version: "v1".to_string(),
                kind: "Scale".to_string(),
            },
            None if eviction => GroupVersionKind {
                group: "policy".to_string(),
                version: "v1".to_string(),
                kind: "Eviction".to_string(),
            },
            None => GroupVersionKind {
                group: rt.group.clone(),
                version: t.version.clone(),
                kind: rt.kind.clone(),
            },
        };
        Attributes {
            operation,
            kind,
            resource: GroupVersionResource {
                group: rt.group.clone(),
                version: t.version.clone(),
                resource: rt.plural.clone(),
            },
            sub_resource: t.subresource.clone(),
            name: t.name.clone(),
            // kube-apiserver addresses a namespace's own requests (other than create) in itself.
            namespace: if rt.namespaced {
                t.namespace.clone()
            } else if crate::strategy::of(rt).storage() == Storage::Namespace
                && operation != Operation::Create
            {
                t.name.clone()
            } else {
                String::new()
            },
            object: object.map(view),
            old_object: old.map(view),
            dry_run: write.dry_run,
            options,
            user: write.user.clone(),
            namespace_labels,
        }
    }

    /// Validating admission: every ValidatingWebhookConfiguration's matching webhooks, in
    /// parallel; their warnings.
    pub(super) async fn admit(
        &self,
        operation: Operation,
        t: &Target,
        object: Option<&Value>,
        old: Option<&Value>,
        options: Value,
        write: &WriteOptions,
    ) -> Result<Vec<String>, ApiError> {
        let rt = &t.resource;
        if crate::admission::is_exempt(&rt.group, &rt.plural) {
            return Ok(vec![]);
        }
        let configurations = self.webhook_configurations("validatingwebhookconfigurations");
        if configurations.is_empty() {
            return Ok(vec![]);
        }
        let attrs = self.admission_attributes(operation, t, object, old, options, write);
        self.admission.validate(&configurations, &attrs).await
    }

    /// Mutating admission: every MutatingWebhookConfiguration's matching webhooks, one after
    /// the other, before the object is validated (kube-apiserver: decoding and defaulting →
    /// mutating admission → validation → validating admission → storage).
    ///
    /// The object comes back as the addressed API version shows it (a Scale for `scale`);
    /// `changed` says whether a webhook's patch changed it, and only then need the caller take
    /// it.
    pub(super) async fn mutate(
        &self,
        operation: Operation,
        t: &Target,
        object: Option<&Value>,
        old: Option<&Value>,
        options: Value,
        write: &WriteOptions,
    ) -> Result<crate::admission::Mutation, ApiError> {
        let rt = &t.resource;
        let unchanged = || crate::admission::Mutation {
            object: None,
            changed: false,
            warnings: vec![],
        };
        if crate::admission::is_exempt(&rt.group, &rt.plural) {
            return Ok(unchanged());
        }
        let configurations = self.webhook_configurations("mutatingwebhookconfigurations");
        if configurations.is_empty() {
            return Ok(unchanged());
        }
        let attrs = self.admission_attributes(operation, t, object, old, options, write);
        // kube-apiserver decodes a patched object with defaulting: the next webhook sees it
        // defaulted. A Scale has no defaults.
        let defaulted = rt.clone();
        let scale = t.subresource == "scale";
        let default = move |o: &mut Value| {
            if !scale {
                crate::strategy::of(&defaulted).defaults(o);
            }
        };
        self.admission
            .mutate(&configurations, &attrs, &default)
            .await
    }

    /// Checks the namespace a namespaced object is created in: it must exist and not be
    /// terminating (the `NamespaceLifecycle` admission plugin).
    fn check_namespace_open(
        &self,
        rt: &ResourceType,
        namespace: &str,
        body: &Value,
    ) -> Result<(), ApiError> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns = self.store().get(
            &(String::new(), "namespaces".to_string()),
            &(String::new(), namespace.to_string()),
        );
        match ns {
            None => Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if crate::object::is_deleting(&ns) => {
                let name = admission_name(body);
                let mut err = ApiError::forbidden(
                    &rt.group,
                    &rt.plural,
                    name,
                    &format!(
                        "unable to create new content in namespace {namespace} because it is being terminated"
                    ),
                );
                if let Some(d) = err.details.as_mut() {
                    d["causes"] = json!([{"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"), "field": "metadata.namespace"}]);
                }
                Err(err)
            }
            Some(_) => Ok(()),
        }
    }

    /// The `ServiceAccount` admission plugin's lookup on a Pod's create: the service account
    /// the Pod runs as (`default` when it names none) must exist, or the create is forbidden.
    /// `default` is made by the serviceaccounts controller moments after its namespace, so it
    /// is looked up again for about a second before the Pod is refused, as the plugin does (ten
    /// live lookups 100–200 ms apart); a named one is looked up once. Mirror pods are exempt.
    async fn check_service_account(
        &self,
        rt: &ResourceType,
        namespace: &str,
        body: &Value,
    ) -> Result<(), ApiError> {
        let mirror = !body["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_null();
        if !rt.group.is_empty() || rt.plural != "pods" || mirror {
            return Ok(());
        }
        let spec = &body["spec"];
        let account = [&spec["serviceAccountName"], &spec["serviceAccount"]]
            .into_iter()
            .filter_map(Value::as_str)
            .find(|s| !s.is_empty())
            .unwrap_or("default");
        let attempts = if account == "default" { 10 } else { 1 };
        let key = (String::new(), "serviceaccounts".to_string());
        let object = (namespace.to_string(), account.to_string());
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            }
            if self.store().get(&key, &object).is_some() {
                return Ok(());
            }
        }
        Err(ApiError::forbidden(
            "",
            "pods",
            admission_name(body),
            &format!(
                "error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
            ),
        ))
    }

    /// Checks `apiVersion` and `kind` of a request body against the URL, as decoding does: a
    /// built-in kind's body names its kind or is refused (400); a custom resource's is decoded
    /// whatever kind it names, and validation refuses another kind (422, with the object's other
    /// errors: `customResourceValidator.ValidateTypeMeta`).
    fn check_type(t: &Target, body: &Value) -> Result<(), ApiError> {
        let rt = &t.resource;
        let expected = rt.api_version(&t.version);
        match body["apiVersion"].as_str() {
            Some(v) if v != expected => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({expected})"
                )));
            }
            _ => {}
        }
        match body["kind"].as_str() {
            Some(k) if k != rt.kind && !rt.is_custom() => Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            ))),
            _ => Ok(()),
        }
    }

    /// The stored version's `apiVersion`, and the resource's `kind` — except a custom resource's
    /// body that names another kind keeps it, for validation to refuse (see `check_type`).
    fn stamp_type(rt: &ResourceType, object: &mut Value) {
        object["apiVersion"] = json!(rt.api_version(rt.storage_version()));
        let other_kind = rt.is_custom()
            && object["kind"]
                .as_str()
                .is_some_and(|k| !k.is_empty() && k != rt.kind);
        if !other_kind {
            object["kind"] = json!(rt.kind);
        }
    }

    /// Prunes and defaults a custom object against its schema; unknown fields become warnings
    /// or, under `fieldValidation=Strict`, an error.
    ///
    /// `decoded` is true for a POST or PUT body, whose strict errors kube-apiserver wraps as
    /// undecodable (`Kind in version "v" cannot be handled as a Kind: …`); a patch's are bare.
    fn prune(
        t: &Target,
        object: &mut Value,
        write: &WriteOptions,
        decoded: bool,
    ) -> Result<Vec<String>, ApiError> {
        let mut body_errors: Vec<String> = Vec::new();
        let unknown = if let Some(schema) = t.schema() {
            crate::schema::prune_and_default(schema, object)
        } else if let Some(schema) = builtin_pruning_schema(t) {
            // kube-apiserver decodes a built-in kind into its Go struct: fields the struct does
            // not have are dropped, and reported under Strict/Warn (apimachinery's strict JSON
            // decoding, staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go).
            let pruned = prune_builtin(&schema, object);
            // A body as sent is decoded in its own order, duplicates included (not at all
            // when the errors would be ignored).
            let from_body = write
                .raw_body
                .as_ref()
                .filter(|_| decoded && write.field_validation != FieldValidation::Ignore)
                .and_then(|raw| crate::schema::strict_decoding_errors(&schema, raw));
            if let Some(errors) = from_body {
                body_errors = errors;
            }
            pruned
        } else {
            return Ok(vec![]);
        };
        if (unknown.is_empty() && body_errors.is_empty())
            || write.field_validation == FieldValidation::Ignore
        {
            return Ok(vec![]);
        }
        let mut unknown = unknown;
        if !decoded {
            // A patched object reaches kube-apiserver's strict decoder re-marshalled from a Go
            // map, whose keys are sorted at every level (encoding/json); a body is decoded in
            // its own order.
            unknown.sort_by(|a, b| a.split('.').cmp(b.split('.')));
        }
        let messages: Vec<String> = if body_errors.is_empty() {
            unknown
                .iter()
                .map(|f| format!("unknown field \"{}\"", f.trim_start_matches('.')))
                .collect()
        } else {
            body_errors
        };
        if write.field_validation == FieldValidation::Strict {
            let strict = format!("strict decoding error: {}", messages.join(", "));
            let message = if decoded {
                let (kind, version) = (&t.resource.kind, &t.version);
                format!("{kind} in version \"{version}\" cannot be handled as a {kind}: {strict}")
            } else {
                strict
            };
            return Err(ApiError::bad_request(message));
        }
        Ok(messages)
    }

    pub async fn create(
        &self,
        t: &Target,
        body: Value,
        write: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.check_crd_not_terminating(t)?;
        self.create_object(t, body, write, true).await
    }

    /// apiextensions-apiserver's custom resource handler refuses a POST while the CRD is
    /// `Terminating` (server-side apply's create goes through the "patch" verb and is not
    /// refused).
    fn check_crd_not_terminating(&self, t: &Target) -> Result<(), ApiError> {
        let Some(crd_name) = t.resource.crd.as_deref() else {
            return Ok(());
        };
        let crd = self.store().get(
            &(
                "apiextensions.k8s.io".to_string(),
                "customresourcedefinitions".to_string(),
            ),
            &(String::new(), crd_name.to_string()),
        );
        let terminating = crd.is_some_and(|c| {
            c["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Terminating" && c["status"] == "True")
            })
        });
        if !terminating {
            return Ok(());
        }
        let mut details = json!({"kind": t.resource.plural});
        if !t.resource.group.is_empty() {
            details["group"] = json!(t.resource.group);
        }
        Err(ApiError::method_not_allowed(
            "create not allowed while custom resource definition is terminating",
        )
        .with_details(details))
    }

    /// The writer's managedFields entry of a create: operation `Update`, no subresource, what
    /// `body` holds now.
    fn record_creator(t: &Target, body: &mut Value, write: &WriteOptions) {
        crate::patch::record_update(
            None,
            body,
            &write.manager(),
            &t.resource.api_version(&t.version),
            "",
            &crate::object::now(),
            t.schema(),
        );
    }

    /// `record_manager` is false when server-side apply already recorded the applier's fields.
    async fn create_object(
        &self,
        t: &Target,
        mut body: Value,
        write: &WriteOptions,
        record_manager: bool,
    ) -> Result<Written, ApiError> {
        let rt = t.resource.clone();
        if !rt.verbs.contains(&"create") {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        Self::check_type(t, &body)?;
        // Reviews are answered, not stored.
        match crate::strategy::of(&rt).storage() {
            Storage::AccessReview => {
                // kube's create handler records the writer's fields on the decoded review
                // before its REST storage answers it (k8s.io/apiserver `handlers/create.go`),
                // and the answer is the request with a status: it carries them, beside a zero
                // creationTimestamp (null in JSON). A SelfSubjectReview's answer is a new
                // object, without either.
                if record_manager {
                    Self::record_creator(t, &mut body, write);
                    if let Some(meta) = body["metadata"].as_object_mut() {
                        if !meta.contains_key("creationTimestamp") {
                            meta.shift_insert(0, "creationTimestamp".into(), Value::Null);
                        }
                    }
                }
                let review = self.review_access(&rt.kind, body, &write.user)?;
                return Ok(Written::review(&rt, &t.version, review));
            }
            Storage::SelfReview => {
                let review = self.review_self(&write.user);
                return Ok(Written::review(&rt, &t.version, review));
            }
            Storage::Plain | Storage::Namespace | Storage::ClusterIps => {}
        }
        self.check_namespace_open(&rt, &t.namespace, &body)?;
        self.check_service_account(&rt, &t.namespace, &body).await?;
        // Admission sees the name as the request gave it: empty when generateName is used.
        let requested_name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        meta::prepare_create(&rt, &t.namespace, &mut body)?;
        let strategy = crate::strategy::of(&rt);
        strategy.defaults(&mut body);
        let mut warnings = Self::prune(t, &mut body, write, record_manager)?;
        Self::stamp_type(&rt, &mut body);
        // The writer owns what it sent and what decoding defaulted — kube's field manager runs
        // in the handler, before the strategy, the admission plugins and the allocators set
        // the rest (a Namespace's finalizer, a Pod's service account volume, a Service's IPs),
        // which nobody owns.
        if record_manager {
            // A status sent to a kind with a status subresource is reset on create (kube's
            // "reset fields"): never the writer's.
            let sent_status = if rt.has_status() {
                body.as_object_mut().and_then(|m| m.shift_remove("status"))
            } else {
                None
            };
            Self::record_creator(t, &mut body, write);
            if let Some(status) = sent_status {
                body["status"] = status;
            }
        }
        strategy.prepare_for_create(&rt, &mut body);
        // Held until the Service is stored (or the create fails), then released.
        let _reserved = if strategy.storage() == Storage::ClusterIps {
            let in_use = super::services::InUse::of(&self.store().list(&rt.key(), None));
            Some(self.service_allocator.allocate(&mut body, in_use)?)
        } else {
            None
        };
        // Both admission phases see the name the request gave: none for generateName.
        let mut admitted = t.clone();
        admitted.name = requested_name.clone();
        let mutation = self
            .mutate(
                Operation::Create,
                &admitted,
                Some(&before_creation(&body, &requested_name)),
                None,
                write.options_object("CreateOptions"),
                write,
            )
            .await?;
        warnings.extend(mutation.warnings);
        if let Some(mutated) = mutation.object.filter(|_| mutation.changed) {
            body = Self::settle_mutated_creation(t, mutated, write)?;
        }
        crate::strategy::validate(&rt, &t.version, &body, None)?;
        // A mutating webhook may rename the object being created, as on a cluster.
        let mut addressed = t.clone();
        addressed.name = body["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        warnings.extend(
            self.admit(
                Operation::Create,
                &admitted,
                Some(&body),
                None,
                write.options_object("CreateOptions"),
                write,
            )
            .await?,
        );
        let mut key = addressed.object_key();
        let stored = {
            let mut store = self.store();
            // A generated name that collides is generated again, as kube-apiserver does since
            // 1.31 (RetryGenerateName), up to 7 more times.
            let prefix = body["metadata"]["generateName"]
                .as_str()
                .map(str::to_string);
            let mut retries = if requested_name.is_empty() {
                prefix.map_or(0, |_| 7)
            } else {
                0
            };
            while store.get(&rt.key(), &key).is_some() && retries > 0 {
                retries -= 1;
                let prefix: String = body["metadata"]["generateName"]
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .take(58)
                    .collect();
                key.1 = format!("{prefix}{}", crate::object::name_suffix());
                body["metadata"]["name"] = json!(key.1);
            }
            if store.get(&rt.key(), &key).is_some() {
                return Err(ApiError::already_exists(&rt.group, &rt.plural, &key.1));
            }
            if write.dry_run {
                Self::to_storage(&rt, body)
            } else {
                (*store.insert(&rt.key(), Self::to_storage(&rt, body))).clone()
            }
        };
        if !write.dry_run {
            self.after_write(&rt, &stored);
        }
        Ok(Written {
            object: Self::output(&rt, &t.version, &stored),
            warnings,
            created: true,
        })
    }

    /// A new object as mutating webhooks left it, made ready for validation as kube-apiserver's
    /// `BeforeCreate` makes it after admission: fields no type declares dropped (silently: the
    /// decoder that reads a patched object is not strict), the namespace checked, a name
    /// generated if the webhooks left none, and the system fields set again (uid,
    /// creationTimestamp, generation — whatever a webhook wrote there).
    fn settle_mutated_creation(
        t: &Target,
        mut object: Value,
        write: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let rt = &t.resource;
        Self::prune(t, &mut object, &silently(write), false)?;
        object["apiVersion"] = json!(rt.api_version(rt.storage_version()));
        object["kind"] = json!(rt.kind);
        meta::prepare_create(rt, &t.namespace, &mut object)?;
        Ok(object)
    }

    /// PUT: replace the object (or its status) with `body`.
    pub async fn update(
        &self,
        t: &Target,
        body: Value,
        write: &WriteOptions,
    ) -> Result<Written, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        Self::check_type(t, &body)?;
        let client_rv = body["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if client_rv.is_none() && t.resource.is_custom() {
            // Custom resources do not allow unconditional updates.
            return Err(ApiError::invalid(
                &t.resource.group,
                &t.resource.kind,
                &t.name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    "metadata.resourceVersion",
                    "Invalid value: 0x0: must be specified for an update",
                )],
            ));
        }
        let client_uid = body["metadata"]["uid"].as_str().filter(|s| !s.is_empty());
        for _ in 0..MAX_RETRIES {
            let current = self.current(t)?;
            // The storage's preconditions first: a body's uid is one (`DefaultUpdatedObjectInfo`
            // `Preconditions`), checked against the stored object in `GuaranteedUpdate`.
            let stored_uid = current["metadata"]["uid"].as_str().unwrap_or_default();
            if let Some(uid) = client_uid.filter(|uid| *uid != stored_uid) {
                return Err(ApiError::conflict(
                    &t.resource.group,
                    &t.resource.plural,
                    &t.name,
                    &format!(
                        "StorageError: invalid object, Code: 4, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, UID in object meta: {stored_uid}",
                        etcd_key(&t.resource, &t.namespace, &t.name)
                    ),
                ));
            }
            // Then the store's `ObjectResourceVersion` of the new object: Go's parse error,
            // a plain 500.
            if let Some(message) = client_rv
                .as_deref()
                .and_then(super::options::parse_uint_error)
            {
                return Err(ApiError::new(500, "", message));
            }
            if let Some(rv) = &client_rv {
                if current["metadata"]["resourceVersion"].as_str() != Some(rv.as_str()) {
                    return Err(ApiError::conflict_modified(
                        &t.resource.group,
                        &t.resource.plural,
                        &t.name,
                    ));
                }
            }
            match self
                .commit_update(t, &current, body.clone(), write, "UpdateOptions", true)
                .await?
            {
                Commit::Done(w) => return Ok(w),
                Commit::Raced => continue,
            }
        }
        Err(ApiError::conflict_modified(
            &t.resource.group,
            &t.resource.plural,
            &t.name,
        ))
    }

    /// PATCH in any of the four patch formats.
    pub async fn patch(
        &self,
        t: &Target,
        kind: PatchKind,
        body: &[u8],
        write: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let rt = t.resource.clone();
        if kind == PatchKind::StrategicMerge && rt.is_custom() {
            return Err(ApiError::unsupported_media_type(
                "application/strategic-merge-patch+json",
                &[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ],
            ));
        }
        if kind == PatchKind::Apply && write.field_manager.is_empty() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        for _ in 0..MAX_RETRIES {
            let current = match self.current(t) {
                Ok(c) => c,
                Err(e) if e.code == 404 && kind == PatchKind::Apply && t.subresource.is_empty() => {
                    // Apply creates what does not exist.
                    let applied = crate::patch::parse_apply_body(body)?;
                    Self::check_type(t, &applied)?;
                    check_apply_fields(t, &applied)?;
                    let mut object = crate::patch::server_side_apply(
                        None,
                        &applied,
                        &write.field_manager,
                        write.force,
                        &t.typed(),
                        &crate::object::now(),
                    )?;
                    object["metadata"]["name"] = json!(t.name);
                    return self.create_object(t, object, write, false).await;
                }
                Err(e) => return Err(e),
            };
            let patched = match kind {
                PatchKind::Json => crate::patch::json_patch(&current, body)?,
                PatchKind::Merge => crate::patch::merge_patch(&current, body)?,
                PatchKind::StrategicMerge => {
                    let patched =
                        crate::patch::strategic_merge_patch(&current, body, &rt.group, &rt.kind)?;
                    // kube converts the patched map into the Go type directly: what does not
                    // fit is a 422 naming the patch (`applyPatchToObject`), not a decoding 400.
                    if let Some(why) = crate::validation::unconvertible(&rt, &t.version, &patched) {
                        let patch = crate::patch::parse_json(body).unwrap_or_default();
                        return Err(ApiError::invalid(
                            "",
                            "",
                            "",
                            vec![crate::schema::field::invalid(
                                "patch",
                                &json!(crate::schema::field::go_plus_v(&patch)),
                                &why,
                            )],
                        ));
                    }
                    patched
                }
                PatchKind::Apply => {
                    let applied = crate::patch::parse_apply_body(body)?;
                    Self::check_type(t, &applied)?;
                    check_apply_fields(t, &applied)?;
                    let apply = if t.subresource == "status" {
                        crate::patch::server_side_apply_status
                    } else {
                        |live: &Value,
                         applied: &Value,
                         m: &str,
                         f: bool,
                         typed: &crate::patch::Typed<'_>,
                         now: &str| {
                            crate::patch::server_side_apply(Some(live), applied, m, f, typed, now)
                        }
                    };
                    apply(
                        &current,
                        &applied,
                        &write.field_manager,
                        write.force,
                        &t.typed(),
                        &crate::object::now(),
                    )?
                }
            };
            let current_rv = current["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let patched_rv = patched["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let precondition = !patched_rv.is_empty() && patched_rv != current_rv;
            if precondition {
                return Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name));
            }
            let explicit_rv = !patched_rv.is_empty()
                && kind != PatchKind::Apply
                && body_sets_resource_version(body);
            match self
                .commit_update(
                    t,
                    &current,
                    patched,
                    write,
                    "PatchOptions",
                    kind != PatchKind::Apply,
                )
                .await?
            {
                Commit::Done(w) => return Ok(w),
                Commit::Raced if explicit_rv => {
                    return Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name));
                }
                Commit::Raced => continue,
            }
        }
        Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name))
    }

    /// The stored object a request addresses, or 404, as the addressed API shows it.
    pub(crate) fn current(&self, t: &Target) -> Result<Arc<Value>, ApiError> {
        let stored = self
            .store()
            .get(&t.resource.key(), &t.object_key())
            .ok_or_else(|| t.not_found())?;
        if t.resource.is_events_api() {
            return Ok(Arc::new(Self::view(&t.resource, &stored)));
        }
        Ok(stored)
    }

    pub(super) async fn commit_update(
        &self,
        t: &Target,
        current: &Arc<Value>,
        mut new: Value,
        write: &WriteOptions,
        options_kind: &str,
        // False for server-side apply, which already recorded the applier's fields.
        record_manager: bool,
    ) -> Result<Commit<Written>, ApiError> {
        let rt = t.resource.clone();
        let sub = t.subresource.as_str();
        if sub == "status" && !rt.has_status() {
            return Err(ApiError::path_not_found());
        }
        Self::prepare_updated(t, current, &mut new)?;
        let mut warnings = Self::prune(t, &mut new, write, options_kind == "UpdateOptions")?;
        Self::stamp_type(&rt, &mut new);
        if record_manager {
            crate::patch::record_update(
                Some(current),
                &mut new,
                &write.manager(),
                &rt.api_version(&t.version),
                sub,
                &crate::object::now(),
                t.schema(),
            );
        }
        let mutation = self
            .mutate(
                Operation::Update,
                t,
                Some(&before_update(&new, current)),
                Some(current),
                write.options_object(options_kind),
                write,
            )
            .await?;
        warnings.extend(mutation.warnings);
        if let Some(mutated) = mutation.object.filter(|_| mutation.changed) {
            new = Self::settle_mutated_update(t, current, &new, mutated, write)?;
        }
        // Validated as kube-apiserver validates its Go struct, whose zero fields the stored
        // object has too (`ApiServer::to_storage`): compared with it field by field, a template
        // without `metadata.creationTimestamp: null` would be "changed".
        if !rt.is_custom() {
            crate::protobuf::go_json_zeros(&mut new);
        }
        crate::strategy::validate(&rt, &t.version, &new, Some(current))?;
        warnings.extend(
            self.admit(
                Operation::Update,
                t,
                Some(&new),
                Some(current),
                write.options_object(options_kind),
                write,
            )
            .await?,
        );
        let unchanged = without_rv(&new) == without_rv(current);
        let finished = crate::object::is_deleting(&new)
            && crate::object::finalizers(&new).is_empty()
            && !namespace_pending(&rt, &new);
        if write.dry_run {
            return Ok(Commit::Done(Written {
                object: Self::output(&rt, &t.version, &new),
                warnings,
                created: false,
            }));
        }
        let stored = {
            let mut store = self.store();
            let now = store.get(&rt.key(), &t.object_key());
            let same = now.as_ref().is_some_and(|n| {
                n["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
            });
            if !same {
                if now.is_none() {
                    return Err(t.not_found());
                }
                return Ok(Commit::Raced);
            }
            if unchanged {
                (**current).clone()
            } else if finished {
                // Removing the last finalizer of an object being deleted deletes it; the answer
                // is the object as this update left it (kube-apiserver v1.32: without the
                // finalizer just removed).
                store.remove(&rt.key(), &t.object_key());
                new
            } else {
                (*store.replace(&rt.key(), Self::to_storage(&rt, new))).clone()
            }
        };
        if !unchanged {
            self.after_write(&rt, &stored);
        }
        Ok(Commit::Done(Written {
            object: Self::output(&rt, &t.version, &stored),
            warnings,
            created: false,
        }))
    }

    /// What an update makes of the new object before admission and again after mutating
    /// webhooks changed it (kube-apiserver's `BeforeUpdate`): identity and system fields from
    /// the stored object, status or spec kept as the subresource allows, defaults.
    fn prepare_updated(t: &Target, current: &Value, new: &mut Value) -> Result<(), ApiError> {
        let rt = &t.resource;
        let sub = t.subresource.as_str();
        meta::prepare_update(rt, current, new, if sub == "finalize" { "" } else { sub })?;
        if sub == "ephemeralcontainers" {
            crate::strategy::defaults::pod_spec(&mut new["spec"]);
            meta::validate_ephemeral_containers(current, new)?;
        }
        if sub.is_empty() || sub == "finalize" {
            // A namespace's `finalize` body is decoded, so defaulted, as the main resource's
            // (its name label is set again); `namespaceFinalizeStrategy.PrepareForUpdate` then
            // resets status only (done above: status is read-only there), so the spec's
            // finalizers and the metadata written are stored.
            crate::strategy::of(rt).defaults(new);
            if crate::strategy::of(rt).storage() == Storage::ClusterIps {
                super::services::keep_allocated(new, current)?;
            }
        }
        Ok(())
    }

    /// An updated object as mutating webhooks left it, made ready for validation. `new` is the
    /// object before them (a write through `scale` takes the replicas of the mutated Scale).
    ///
    /// kube-apiserver's `BeforeUpdate` refuses a changed name or uid (immutable, 422) and a
    /// namespace other than the request's (400); it restores what an update cannot change.
    fn settle_mutated_update(
        t: &Target,
        current: &Value,
        new: &Value,
        mut mutated: Value,
        write: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let rt = &t.resource;
        if t.subresource == "scale" {
            let paths = super::scale::paths(rt, &t.version).ok_or_else(ApiError::path_not_found)?;
            let replicas = super::scale::validate(&t.name, &mutated)?;
            return Ok(super::scale::with_replicas(&paths, new, replicas));
        }
        for field in ["name", "uid"] {
            let before = current["metadata"][field].as_str().unwrap_or_default();
            let after = mutated["metadata"][field].as_str().unwrap_or_default();
            // An empty uid is the stored one (`BeforeUpdate` fills it in).
            if after != before && !(field == "uid" && after.is_empty()) {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    mutated["metadata"]["name"].as_str().unwrap_or_default(),
                    vec![Cause::new(
                        "FieldValueInvalid",
                        format!("metadata.{field}"),
                        format!("Invalid value: {after:?}: field is immutable"),
                    )],
                ));
            }
        }
        Self::prepare_updated(t, current, &mut mutated)?;
        Self::prune(t, &mut mutated, &silently(write), false)?;
        mutated["apiVersion"] = json!(rt.api_version(rt.storage_version()));
        mutated["kind"] = json!(rt.kind);
        Ok(mutated)
    }

    /// DELETE one object.
    pub async fn delete(
        &self,
        t: &Target,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        Ok(self.delete_object(t, opts, true).await?.0)
    }

    /// DELETE one object, with the warnings its admission webhooks answered: kube-apiserver
    /// returns them as `Warning` headers for a DELETE as for any write (kubectl prints them).
    pub async fn delete_with_warnings(
        &self,
        t: &Target,
        opts: &DeleteOptions,
    ) -> Result<(DeleteOutcome, Vec<String>), ApiError> {
        self.delete_object(t, opts, true).await
    }

    /// A delete straight at storage, without admission: what kube-apiserver's own CRD cleanup
    /// does.
    pub(crate) async fn delete_unadmitted(
        &self,
        t: &Target,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        Ok(self.delete_object(t, opts, false).await?.0)
    }

    async fn delete_object(
        &self,
        t: &Target,
        opts: &DeleteOptions,
        admit: bool,
    ) -> Result<(DeleteOutcome, Vec<String>), ApiError> {
        // The webhooks' warnings of the last attempt (a retry reviews the object again).
        let mut warnings = Vec::new();
        let rt = t.resource.clone();
        if !rt.verbs.contains(&"delete") {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
        for _ in 0..MAX_RETRIES {
            let current = self.current(t)?;
            let meta_ = &current["metadata"];
            if let Some(uid) = &opts.precondition_uid {
                let actual = meta_["uid"].as_str().unwrap_or_default();
                if uid != actual {
                    // `rest.BeforeDelete` names the kind, not the resource.
                    return Err(ApiError::conflict(
                        &rt.group,
                        &rt.kind,
                        &t.name,
                        &format!(
                            "the UID in the precondition ({uid}) does not match the UID in record ({actual}). The object might have been deleted and then recreated"
                        ),
                    ));
                }
            }
            if let Some(rv) = &opts.precondition_resource_version {
                let actual = meta_["resourceVersion"].as_str().unwrap_or_default();
                if rv != actual {
                    return Err(ApiError::conflict(
                        &rt.group,
                        &rt.kind,
                        &t.name,
                        &format!(
                            "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({actual}). The object might have been modified"
                        ),
                    ));
                }
            }
            if admit {
                check_namespace_mortal(&rt, &t.name)?;
                // An object of a collection is reviewed under the collection's name: none.
                let collection;
                let reviewed = if opts.collection {
                    collection = Target {
                        name: String::new(),
                        ..t.clone()
                    };
                    &collection
                } else {
                    t
                };
                // Mutating webhooks are called on DELETE too, with the old object only; a patch
                // in their answer fails the request.
                let mutation = self
                    .mutate(
                        Operation::Delete,
                        reviewed,
                        None,
                        Some(&current),
                        opts.options_object(),
                        &opts.write,
                    )
                    .await?;
                warnings = mutation.warnings;
                for w in self
                    .admit(
                        Operation::Delete,
                        reviewed,
                        None,
                        Some(&current),
                        opts.options_object(),
                        &opts.write,
                    )
                    .await?
                {
                    if !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
            }
            let planned = plan_deletion(&rt, &current, opts.propagation);
            if opts.write.dry_run {
                let outcome = match planned {
                    Some(obj) => DeleteOutcome::Pending(Self::output(&rt, &t.version, &obj)),
                    None => DeleteOutcome::Deleted(Self::output(&rt, &t.version, &current)),
                };
                return Ok((outcome, warnings));
            }
            let outcome = {
                let mut store = self.store();
                let now = store.get(&rt.key(), &t.object_key());
                match now {
                    None => return Err(t.not_found()),
                    Some(n)
                        if n["metadata"]["resourceVersion"]
                            != current["metadata"]["resourceVersion"] =>
                    {
                        continue;
                    }
                    Some(_) => {}
                }
                match planned {
                    Some(obj) if without_rv(&obj) == without_rv(&current) => {
                        DeleteOutcome::Pending((*current).clone())
                    }
                    Some(obj) => DeleteOutcome::Pending(
                        (*store.replace(&rt.key(), Self::to_storage(&rt, obj))).clone(),
                    ),
                    None => match store.remove(&rt.key(), &t.object_key()) {
                        Some(last) => DeleteOutcome::Deleted((*last).clone()),
                        None => return Err(t.not_found()),
                    },
                }
            };
            let (DeleteOutcome::Pending(obj) | DeleteOutcome::Deleted(obj)) = &outcome;
            self.after_write(&rt, obj);
            let outcome = match outcome {
                DeleteOutcome::Pending(o) => {
                    DeleteOutcome::Pending(Self::output(&rt, &t.version, &o))
                }
                DeleteOutcome::Deleted(o) => {
                    DeleteOutcome::Deleted(Self::output(&rt, &t.version, &o))
                }
            };
            return Ok((outcome, warnings));
        }
        Err(ApiError::conflict_modified(&rt.group, &rt.plural, &t.name))
    }

    /// DELETE on a collection: every matching object, in name order, each through admission
    /// (reviewed with `request.name` empty, as kube-apiserver reviews them), stopping at the
    /// first one that fails — kube-apiserver's `Store.DeleteCollection` with its default one
    /// worker (`--delete-collection-workers=1`): the worker returns on its first error, so the
    /// objects after it are not tried.
    pub async fn delete_collection(
        &self,
        t: &Target,
        list: &super::ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let opts = &DeleteOptions {
            collection: true,
            ..opts.clone()
        };
        if !t.resource.verbs.contains(&"deletecollection") {
            return Err(ApiError::method_not_allowed(
                "the server does not allow this method on the requested resource",
            ));
        }
        let items = self.select(t, list)?;
        let mut deleted = Vec::new();
        for item in items {
            let mut one = t.clone();
            one.name = item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            one.namespace = item["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            match self.delete(&one, opts).await {
                Ok(DeleteOutcome::Deleted(o) | DeleteOutcome::Pending(o)) => deleted.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// Hooks that follow a committed write: CRDs change what is served.
    fn after_write(&self, rt: &ResourceType, object: &Value) {
        match crate::strategy::of(rt).after_write() {
            Some(AfterWrite::ServeDefinition) => {
                crate::controllers::crds::on_crd_written(self, object)
            }
            None => {}
        }
    }
}

/// What a DELETE turns the object into: `None` to remove it now, or the object marked for
/// deletion and waiting for finalizers.
fn plan_deletion(
    rt: &ResourceType,
    current: &Value,
    propagation: Option<Propagation>,
) -> Option<Value> {
    let mut obj = current.clone();
    let mut finalizers = crate::object::finalizers(current);
    let is_namespace = crate::strategy::of(rt).storage() == Storage::Namespace;
    match propagation {
        Some(Propagation::Orphan) => {
            finalizers.retain(|f| f != FOREGROUND_FINALIZER);
            if !finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
                finalizers.push(ORPHAN_FINALIZER.to_string());
            }
        }
        Some(Propagation::Foreground) => {
            finalizers.retain(|f| f != ORPHAN_FINALIZER);
            if !finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
                finalizers.push(FOREGROUND_FINALIZER.to_string());
            }
        }
        Some(Propagation::Background) => {
            if crate::object::is_deleting(current) {
                finalizers.retain(|f| f != ORPHAN_FINALIZER && f != FOREGROUND_FINALIZER);
            }
        }
        None => {}
    }
    let pending_namespace = is_namespace && namespace_pending(rt, current);
    if finalizers.is_empty() && !pending_namespace {
        return None;
    }
    if finalizers.is_empty() {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("finalizers");
        }
    } else {
        obj["metadata"]["finalizers"] = json!(finalizers);
    }
    if !crate::object::is_deleting(current) {
        obj["metadata"]["deletionTimestamp"] = json!(crate::object::now());
        // The generic registry's `markAsDeleting` sets a zero grace period too; the Namespace
        // and CustomResourceDefinition registries delete with their own code, which sets only
        // the timestamp.
        let crd = rt.group == "apiextensions.k8s.io" && rt.plural == "customresourcedefinitions";
        if !is_namespace && !crd {
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
    }
    if is_namespace {
        obj["status"]["phase"] = json!("Terminating");
    }
    Some(obj)
}

/// The `NamespaceLifecycle` admission plugin refuses to delete the namespaces every cluster
/// relies on.
fn check_namespace_mortal(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    let immortal = crate::strategy::of(rt).storage() == Storage::Namespace
        && ["default", "kube-system", "kube-public"].contains(&name);
    if immortal {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    Ok(())
}

/// A namespace still waits for its `spec.finalizers` (the namespace controller's `kubernetes`).
fn namespace_pending(rt: &ResourceType, object: &Value) -> bool {
    crate::strategy::of(rt).storage() == Storage::Namespace
        && object["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

fn without_rv(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    v
}

/// Drops the fields of a built-in object that its Go type does not declare, `metadata` included
/// (ObjectMeta is a struct too), and returns their paths (`.spec.bogus`, `.metadata.bogus`).
fn prune_builtin(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut unknown = crate::schema::prune_and_default(schema, object);
    if let Some(meta_schema) = schema["properties"].get("metadata") {
        if let Some(meta) = object.get_mut("metadata") {
            let found = crate::schema::prune_and_default(meta_schema, meta);
            unknown.extend(found.into_iter().map(|p| format!(".metadata{p}")));
        }
    }
    unknown
}

/// How `admission.NewForbidden` names an object being created, before any name is generated:
/// its name, else its generateName, else "Unknown".
fn admission_name(body: &Value) -> &str {
    let meta_ = &body["metadata"];
    [&meta_["name"], &meta_["generateName"]]
        .into_iter()
        .filter_map(|v| v.as_str())
        .find(|s| !s.is_empty())
        .unwrap_or("Unknown")
}

/// A built-in kind's schema for pruning what its Go type does not have (none for a custom
/// resource, whose CRD schema `Target::schema` gives).
fn builtin_pruning_schema(t: &Target) -> Option<std::sync::Arc<Value>> {
    crate::builtins::find(&t.resource.group, &t.version, &t.resource.plural)
        .filter(|_| !t.resource.is_custom())
        .and_then(|builtin| crate::builtins::pruning_schema(builtin.schema))
}

/// structured-merge-diff's conversion of an apply body into the kind's type
/// (`fieldmanager/internal/structuredmerge.go`): a field the type does not declare fails it,
/// whatever `fieldValidation` asks, with a plain error kube-apiserver answers 500 and no reason
/// (`failed to create typed patch object (ns/name; group/version, Kind=K): .bogus: field not
/// declared in schema`). The object is named as the body names it. A field under a list item is
/// named here by the item's index, where kube names an associative list's item by its keys.
fn check_apply_fields(t: &Target, applied: &Value) -> Result<(), ApiError> {
    let mut copy = applied.clone();
    let unknown = if let Some(schema) = t.schema() {
        crate::schema::prune_and_default(schema, &mut copy)
    } else if let Some(schema) = builtin_pruning_schema(t) {
        prune_builtin(&schema, &mut copy)
    } else {
        return Ok(());
    };
    if unknown.is_empty() {
        return Ok(());
    }
    let errors: Vec<String> = unknown
        .iter()
        .map(|path| format!("{path}: field not declared in schema"))
        .collect();
    let errors = match errors.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    let meta_ = &applied["metadata"];
    let api_version = applied["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Err(ApiError::new(
        500,
        "",
        format!(
            "failed to create typed patch object ({}/{}; {group}/{version}, Kind={}): {errors}",
            meta_["namespace"].as_str().unwrap_or_default(),
            meta_["name"].as_str().unwrap_or_default(),
            applied["kind"].as_str().unwrap_or_default(),
        ),
    ))
}

/// The same write with unknown fields dropped without a word: kube-apiserver decodes a webhook's
/// patched object leniently, whatever `fieldValidation` the client asked for.
fn silently(write: &WriteOptions) -> WriteOptions {
    WriteOptions {
        field_validation: FieldValidation::Ignore,
        raw_body: None,
        ..write.clone()
    }
}

/// The new object as mutating webhooks see it on CREATE: kube-apiserver calls them before
/// `BeforeCreate`, so without the fields that sets (uid, creationTimestamp, generation) and, for
/// a `generateName` create, without a name.
fn before_creation(body: &Value, requested_name: &str) -> Value {
    let mut view = body.clone();
    if let Some(m) = view["metadata"].as_object_mut() {
        for field in ["uid", "creationTimestamp", "generation"] {
            m.remove(field);
        }
        if requested_name.is_empty() {
            m.remove("name");
        }
    }
    view
}

/// The new object as mutating webhooks see it on UPDATE: kube-apiserver calls them before
/// `BeforeUpdate` bumps the generation.
fn before_update(new: &Value, current: &Value) -> Value {
    let mut view = new.clone();
    if let Some(m) = view["metadata"].as_object_mut() {
        match current["metadata"].get("generation") {
            Some(g) => {
                m.insert("generation".into(), g.clone());
            }
            None => {
                m.remove("generation");
            }
        }
    }
    view
}

/// Where kube-apiserver's etcd keeps an object (`/registry/<prefix>/<namespace>/<name>`), as its
/// storage errors name it: the resource's name, but for the prefixes the built-in REST storages
/// set themselves, and `<group>/<resource>` for custom resources and the aggregator's and
/// apiextensions' own kinds.
fn etcd_key(rt: &ResourceType, namespace: &str, name: &str) -> String {
    let prefix = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "services") => "services/specs".to_string(),
        ("", "endpoints") => "services/endpoints".to_string(),
        ("", "nodes") => "minions".to_string(),
        ("", "replicationcontrollers") => "controllers".to_string(),
        ("networking.k8s.io", "ingresses") => "ingress".to_string(),
        ("apiextensions.k8s.io" | "apiregistration.k8s.io", plural) => {
            format!("{}/{plural}", rt.group)
        }
        (_, plural) if rt.is_custom() => format!("{}/{plural}", rt.group),
        (_, plural) => plural.to_string(),
    };
    if rt.namespaced {
        format!("/registry/{prefix}/{namespace}/{name}")
    } else {
        format!("/registry/{prefix}/{name}")
    }
}

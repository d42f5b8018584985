//! Built-in validation as kube-apiserver 1.32 validates (issue 22): manifests kube-apiserver
//! refuses, each refused by the sandbox in its words. Every case goes through the real
//! `kubectl create -f` (what the user reads) and through a plain client (the `Status`: code,
//! message, and each cause's reason and field), and cites the rule in k/k 1.32 that refuses it.
//! `core` is `pkg/apis/core/validation/validation.go`, `apps`, `batch`, `networking` the same
//! file of their group, `objectmeta` apimachinery's `pkg/api/validation/objectmeta.go`.

use kube::api::{Api, ApiResource, DynamicObject, PostParams};

use super::{Kubectl, common, path_str};

/// What kube-apiserver answers.
enum Expect {
    /// 422 Invalid with these causes: (reason, field, message).
    Invalid(&'static [(&'static str, &'static str, &'static str)]),
    /// 400 BadRequest: the body does not decode.
    BadRequest(&'static str),
}

struct Case {
    /// The rule, as file and function in kube's source.
    rule: &'static str,
    /// group, version, kind, plural
    resource: (&'static str, &'static str, &'static str, &'static str),
    name: &'static str,
    manifest: String,
    expect: Expect,
}

const REQ: &str = "FieldValueRequired";
const INV: &str = "FieldValueInvalid";
const UNS: &str = "FieldValueNotSupported";
const DUP: &str = "FieldValueDuplicate";
const LONG: &str = "FieldValueTooLong";

fn workload(kind: &str, name: &str, spec: &str, template_labels: &str, pod: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n{spec}  template:\n    metadata: {{labels: {template_labels}}}\n    spec: {pod}\n"
    )
}

fn pod(name: &str, spec: &str) -> String {
    format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

fn job(name: &str, spec: &str, restart: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: {name}}}\nspec:\n{spec}  template:\n    spec: {{restartPolicy: {restart}, containers: [{{name: c, image: busybox}}]}}\n"
    )
}

const POD: &str = "{containers: [{name: web, image: nginx}]}";
const APP_WEB: &str = "  selector: {matchLabels: {app: web}}\n";

fn cases() -> Vec<Case> {
    let deployment = ("apps", "v1", "Deployment", "deployments");
    let pods = ("", "v1", "Pod", "pods");
    let jobs = ("batch", "v1", "Job", "jobs");
    let services = ("", "v1", "Service", "services");
    let configmaps = ("", "v1", "ConfigMap", "configmaps");
    let ingresses = ("networking.k8s.io", "v1", "Ingress", "ingresses");
    let pvcs = ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims");
    let service = |name: &str, spec: &str| {
        format!("apiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec: {spec}\n")
    };
    let ingress = |path: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: ing}}\nspec:\n  rules:\n  - host: example.com\n    http:\n      paths:\n      - {path}\n        backend: {{service: {{name: web, port: {{number: 80}}}}}}\n"
        )
    };
    let pvc = |spec: &str| {
        format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data}}\nspec: {spec}\n"
        )
    };
    let cron = |schedule: &str| {
        format!(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata: {{name: cron}}\nspec:\n  schedule: \"{schedule}\"\n  jobTemplate:\n    spec:\n      template:\n        spec: {{restartPolicy: OnFailure, containers: [{{name: c, image: busybox}}]}}\n"
        )
    };
    let config_map = |name: &str, rest: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n{rest}\n")
    };
    vec![
        Case {
            rule: "apps ValidateDeploymentSpec → objectmeta ValidateNonnegativeField",
            resource: deployment,
            name: "web",
            manifest: workload(
                "Deployment",
                "web",
                &format!("  replicas: -1\n{APP_WEB}"),
                "{app: web}",
                POD,
            ),
            expect: Expect::Invalid(&[(
                INV,
                "spec.replicas",
                "Invalid value: -1: must be greater than or equal to 0",
            )]),
        },
        Case {
            rule: "apps ValidatePodTemplateSpecForReplicaSet (selector.Matches(template.Labels))",
            resource: deployment,
            name: "web",
            manifest: workload("Deployment", "web", APP_WEB, "{app: other}", POD),
            expect: Expect::Invalid(&[(
                INV,
                "spec.template.metadata.labels",
                "Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
            )]),
        },
        Case {
            rule: "apps ValidateDeploymentSpec (spec.Selector == nil → Required; labels.Nothing() matches no template)",
            resource: deployment,
            name: "web",
            manifest: workload("Deployment", "web", "", "{app: web}", POD),
            expect: Expect::Invalid(&[
                (REQ, "spec.selector", "Required value"),
                (
                    INV,
                    "spec.template.metadata.labels",
                    "Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`",
                ),
            ]),
        },
        Case {
            rule: "core ValidatePodTemplateSpec → ValidateLabels(spec.Labels, fldPath.Child(\"labels\"))",
            resource: deployment,
            name: "web",
            manifest: workload("Deployment", "web", APP_WEB, "{app: web, tier: \"bad value\"}", POD),
            expect: Expect::Invalid(&[(INV, "spec.template.labels", "Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")]),
        },
        Case {
            rule: "apps ValidatePodTemplateSpecForReplicaSet (RestartPolicy must be Always)",
            resource: deployment,
            name: "web",
            manifest: workload(
                "Deployment",
                "web",
                APP_WEB,
                "{app: web}",
                "{restartPolicy: Never, containers: [{name: web, image: nginx}]}",
            ),
            expect: Expect::Invalid(&[(
                UNS,
                "spec.template.spec.restartPolicy",
                "Unsupported value: \"Never\": supported values: \"Always\"",
            )]),
        },
        Case {
            rule: "apps ValidateReplicaSetSpec → ValidateNonnegativeField",
            resource: ("apps", "v1", "ReplicaSet", "replicasets"),
            name: "rs",
            manifest: workload(
                "ReplicaSet",
                "rs",
                &format!("  replicas: -1\n{APP_WEB}"),
                "{app: web}",
                POD,
            ),
            expect: Expect::Invalid(&[(
                INV,
                "spec.replicas",
                "Invalid value: -1: must be greater than or equal to 0",
            )]),
        },
        Case {
            rule: "apps ValidateStatefulSetSpec (template RestartPolicy must be Always)",
            resource: ("apps", "v1", "StatefulSet", "statefulsets"),
            name: "db",
            manifest: workload(
                "StatefulSet",
                "db",
                &format!("  serviceName: db\n{APP_WEB}"),
                "{app: web}",
                "{restartPolicy: OnFailure, containers: [{name: web, image: nginx}]}",
            ),
            expect: Expect::Invalid(&[(
                UNS,
                "spec.template.spec.restartPolicy",
                "Unsupported value: \"OnFailure\": supported values: \"Always\"",
            )]),
        },
        Case {
            rule: "apps ValidateDaemonSetSpec (selector.Matches(spec.Template.Labels))",
            resource: ("apps", "v1", "DaemonSet", "daemonsets"),
            name: "agent",
            manifest: workload("DaemonSet", "agent", APP_WEB, "{app: agent}", POD),
            expect: Expect::Invalid(&[(
                INV,
                "spec.template.metadata.labels",
                "Invalid value: map[string]string{\"app\":\"agent\"}: `selector` does not match template `labels`",
            )]),
        },
        Case {
            rule: "core validateContainers (len(containers) == 0 → Required)",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: []}"),
            expect: Expect::Invalid(&[(REQ, "spec.containers", "Required value")]),
        },
        Case {
            rule: "core validateContainerCommon → ValidateDNS1123Label",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: Web_1, image: nginx}]}"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.containers[0].name",
                "Invalid value: \"Web_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            )]),
        },
        Case {
            rule: "core validateContainerCommon (allNames.Has → Duplicate)",
            resource: pods,
            name: "p",
            manifest: pod(
                "p",
                "{containers: [{name: app, image: nginx}, {name: app, image: redis}]}",
            ),
            expect: Expect::Invalid(&[(
                DUP,
                "spec.containers[1].name",
                "Duplicate value: \"app\"",
            )]),
        },
        Case {
            rule: "core validateContainers (len(ctr.Image) == 0 → Required)",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: app}]}"),
            expect: Expect::Invalid(&[(REQ, "spec.containers[0].image", "Required value")]),
        },
        Case {
            rule: "core validateContainerPorts → IsValidPortNum",
            resource: pods,
            name: "p",
            manifest: pod(
                "p",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 70000}]}]}",
            ),
            expect: Expect::Invalid(&[(
                INV,
                "spec.containers[0].ports[0].containerPort",
                "Invalid value: 70000: must be between 1 and 65535, inclusive",
            )]),
        },
        Case {
            rule: "core validateContainerPorts (supportedPortProtocols)",
            resource: pods,
            name: "p",
            manifest: pod(
                "p",
                "{containers: [{name: app, image: nginx, ports: [{containerPort: 80, protocol: HTTP}]}]}",
            ),
            expect: Expect::Invalid(&[(
                UNS,
                "spec.containers[0].ports[0].protocol",
                "Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            )]),
        },
        Case {
            rule: "core validateContainerCommon → validatePullPolicy",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: app, image: nginx, imagePullPolicy: Sometimes}]}"),
            expect: Expect::Invalid(&[(UNS, "spec.containers[0].imagePullPolicy", "Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"")]),
        },
        Case {
            rule: "core ValidateVolumeMounts (IsMatchedVolume → NotFound)",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: app, image: nginx, volumeMounts: [{name: data, mountPath: /data}]}]}"),
            expect: Expect::Invalid(&[("FieldValueNotFound", "spec.containers[0].volumeMounts[0].name", "Not found: \"data\"")]),
        },
        Case {
            rule: "core ValidateVolumes → validateVolumeSource (numVolumes == 0)",
            resource: pods,
            name: "p",
            manifest: pod("p", "{volumes: [{name: data}], containers: [{name: app, image: nginx}]}"),
            expect: Expect::Invalid(&[(REQ, "spec.volumes[0]", "Required value: must specify a volume type")]),
        },
        Case {
            rule: "core ValidateVolumes (allNames.Has → Duplicate)",
            resource: pods,
            name: "p",
            manifest: pod("p", "{volumes: [{name: data, emptyDir: {}}, {name: data, emptyDir: {}}], containers: [{name: app, image: nginx}]}"),
            expect: Expect::Invalid(&[(DUP, "spec.volumes[1].name", "Duplicate value: \"data\"")]),
        },
        Case {
            rule: "apimachinery pkg/apis/meta/v1/validation ValidateLabels → IsValidLabelValue",
            resource: configmaps,
            name: "cm",
            manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, labels: {tier: \"bad value\"}}\n".into(),
            expect: Expect::Invalid(&[(INV, "metadata.labels", "Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")]),
        },
        Case {
            rule: "apimachinery pkg/apis/meta/v1/validation ValidateLabelName → IsQualifiedName",
            resource: configmaps,
            name: "cm",
            manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, labels: {\"-tier\": x}}\n".into(),
            expect: Expect::Invalid(&[(INV, "metadata.labels", "Invalid value: \"-tier\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")]),
        },
        Case {
            rule: "objectmeta ValidateAnnotations → IsQualifiedName(strings.ToLower(k))",
            resource: configmaps,
            name: "cm",
            manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, annotations: {\"example_com/note\": x}}\n".into(),
            expect: Expect::Invalid(&[(INV, "metadata.annotations", "Invalid value: \"example_com/note\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")]),
        },
        Case {
            rule: "core validateRestartPolicy",
            resource: pods,
            name: "p",
            manifest: pod(
                "p",
                "{restartPolicy: Sometimes, containers: [{name: app, image: nginx}]}",
            ),
            expect: Expect::Invalid(&[(
                UNS,
                "spec.restartPolicy",
                "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            )]),
        },
        Case {
            rule: "apimachinery pkg/api/resource/quantity.go ParseQuantity (ErrFormatWrong), at decoding",
            resource: pods,
            name: "p",
            manifest: pod(
                "p",
                "{containers: [{name: app, image: nginx, resources: {requests: {cpu: lots}}}]}",
            ),
            expect: Expect::BadRequest(
                "Pod in version \"v1\" cannot be handled as a Pod: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        },
        Case {
            rule: "sigs.k8s.io/json UnmarshalTypeError (the schema's integer/int32 type), at decoding",
            resource: deployment,
            name: "web",
            manifest: workload("Deployment", "web", &format!("  replicas: \"3\"\n{APP_WEB}"), "{app: web}", POD),
            expect: Expect::BadRequest("Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"),
        },
        Case {
            rule: "sigs.k8s.io/json UnmarshalTypeError (a fraction for an int32), at decoding",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: app, image: nginx, ports: [{containerPort: 8080.5}]}]}"),
            expect: Expect::BadRequest("Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal number 8080.5 into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32"),
        },
        Case {
            rule: "sigs.k8s.io/json UnmarshalTypeError (the schema's boolean type), at decoding",
            resource: pods,
            name: "p",
            manifest: pod("p", "{hostNetwork: \"yes\", containers: [{name: app, image: nginx}]}"),
            expect: Expect::BadRequest("Pod in version \"v1\" cannot be handled as a Pod: json: cannot unmarshal string into Go struct field PodSpec.spec.hostNetwork of type bool"),
        },
        Case {
            rule: "core ValidateResourceRequirements (request above limit; Quantity.String() canonical)",
            resource: pods,
            name: "p",
            manifest: pod(
                "p",
                "{containers: [{name: app, image: nginx, resources: {requests: {cpu: 2000m}, limits: {cpu: 1000m}}}]}",
            ),
            expect: Expect::Invalid(&[(
                INV,
                "spec.containers[0].resources.requests[cpu]",
                "Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            )]),
        },
        Case {
            rule: "core ValidateResourceRequirements → ValidateResourceQuantityValue → ValidateNonnegativeQuantity",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: app, image: nginx, resources: {limits: {memory: -1Gi}}}]}"),
            expect: Expect::Invalid(&[
                // SetDefaults_Pod copied the limit into the unset request first.
                (INV, "spec.containers[0].resources.limits[memory]", "Invalid value: \"-1Gi\": must be greater than or equal to 0"),
                (INV, "spec.containers[0].resources.requests[memory]", "Invalid value: \"-1Gi\": must be greater than or equal to 0"),
            ]),
        },
        Case {
            rule: "core ValidateResourceRequirements → validateContainerResourceName (validateResourceName, IsStandardContainerResourceName)",
            resource: pods,
            name: "p",
            manifest: pod("p", "{containers: [{name: app, image: nginx, resources: {requests: {cpus: \"1\"}}}]}"),
            expect: Expect::Invalid(&[
                (INV, "spec.containers[0].resources.requests[cpus]", "Invalid value: \"cpus\": must be a standard resource type or fully qualified"),
                (INV, "spec.containers[0].resources.requests[cpus]", "Invalid value: \"cpus\": must be a standard resource for containers"),
            ]),
        },
        Case {
            // Worded as kube-apiserver 1.32 answered the differential's
            // `invalid/job-restart-always`: a Required value, whatever the policy.
            rule: "batch validateJobSpec (RestartPolicy OnFailure or Never)",
            resource: jobs,
            name: "job",
            manifest: job("job", "", "Always"),
            expect: Expect::Invalid(&[(
                REQ,
                "spec.template.spec.restartPolicy",
                "Required value: valid values: \"OnFailure\", \"Never\"",
            )]),
        },
        Case {
            rule: "batch validateJobSpec → ValidateNonnegativeField(parallelism)",
            resource: jobs,
            name: "job",
            manifest: job("job", "  parallelism: -1\n", "Never"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.parallelism",
                "Invalid value: -1: must be greater than or equal to 0",
            )]),
        },
        Case {
            rule: "batch validateJobSpec → ValidateNonnegativeField(completions)",
            resource: jobs,
            name: "job",
            manifest: job("job", "  completions: -2\n", "Never"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.completions",
                "Invalid value: -2: must be greater than or equal to 0",
            )]),
        },
        Case {
            rule: "batch validateJobSpec → ValidateNonnegativeField(backoffLimit)",
            resource: jobs,
            name: "job",
            manifest: job("job", "  backoffLimit: -1\n", "OnFailure"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.backoffLimit",
                "Invalid value: -1: must be greater than or equal to 0",
            )]),
        },
        Case {
            rule: "batch validateScheduleFormat → robfig/cron v3 ParseStandard (normalizeFields)",
            resource: ("batch", "v1", "CronJob", "cronjobs"),
            name: "cron",
            manifest: cron("every minute"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.schedule",
                "Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]",
            )]),
        },
        Case {
            rule: "batch validateScheduleFormat → robfig/cron v3 ParseStandard (getRange)",
            resource: ("batch", "v1", "CronJob", "cronjobs"),
            name: "cron",
            manifest: cron("61 * * * *"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.schedule",
                "Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
            )]),
        },
        Case {
            rule: "core validateServicePort → IsValidPortNum(port)",
            resource: services,
            name: "svc",
            manifest: service("svc", "{ports: [{port: 70000, targetPort: 8080}]}"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.ports[0].port",
                "Invalid value: 70000: must be between 1 and 65535, inclusive",
            )]),
        },
        Case {
            rule: "core validateServicePort → ValidatePortNumOrName(targetPort)",
            resource: services,
            name: "svc",
            manifest: service("svc", "{ports: [{port: 80, targetPort: 70000}]}"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.ports[0].targetPort",
                "Invalid value: 70000: must be between 1 and 65535, inclusive",
            )]),
        },
        Case {
            rule: "core ValidateService (supportedServiceType)",
            resource: services,
            name: "svc",
            manifest: service("svc", "{type: Cheap, ports: [{port: 80}]}"),
            expect: Expect::Invalid(&[(
                UNS,
                "spec.type",
                "Unsupported value: \"Cheap\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            )]),
        },
        Case {
            rule: "core validateServicePort (allNames.Has → Duplicate)",
            resource: services,
            name: "svc",
            manifest: service(
                "svc",
                "{ports: [{name: http, port: 80}, {name: http, port: 81}]}",
            ),
            expect: Expect::Invalid(&[(DUP, "spec.ports[1].name", "Duplicate value: \"http\"")]),
        },
        Case {
            rule: "core validateServicePort (requireName when more than one port)",
            resource: services,
            name: "svc",
            manifest: service("svc", "{ports: [{name: http, port: 80}, {port: 81}]}"),
            expect: Expect::Invalid(&[(REQ, "spec.ports[1].name", "Required value")]),
        },
        Case {
            rule: "core ValidateConfigMap → IsConfigMapKey",
            resource: configmaps,
            name: "cm",
            manifest: config_map("cm", "data: {\"bad key\": x}"),
            expect: Expect::Invalid(&[(
                INV,
                "data[bad key]",
                "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            )]),
        },
        Case {
            rule: "core ValidateSecret → IsConfigMapKey",
            resource: ("", "v1", "Secret", "secrets"),
            name: "s",
            manifest:
                "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {\"bad/key\": eA==}\n"
                    .into(),
            expect: Expect::Invalid(&[(
                INV,
                "data[bad/key]",
                "Invalid value: \"bad/key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            )]),
        },
        Case {
            rule: "objectmeta ValidateAnnotations → ValidateAnnotationsSize (TotalAnnotationSizeLimitB)",
            resource: configmaps,
            name: "big",
            // 3 bytes of key and 262,142 of value: one byte over 256 KiB.
            manifest: format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big, annotations: {{big: {}}}}}\n",
                "x".repeat(262_142)
            ),
            expect: Expect::Invalid(&[(
                LONG,
                "metadata.annotations",
                "Too long: may not be more than 262144 bytes",
            )]),
        },
        Case {
            rule: "core ValidateConfigMap (totalSize > core.MaxSecretSize, at field.NewPath(\"\"))",
            resource: configmaps,
            name: "big",
            manifest: format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata: {{a: {}}}\n",
                "x".repeat(1024 * 1024 + 1)
            ),
            expect: Expect::Invalid(&[(LONG, "[]", "Too long: may not be more than 1048576 bytes")]),
        },
        Case {
            rule: "objectmeta ValidateObjectMetaAccessor → NameIsDNSSubdomain",
            resource: configmaps,
            name: "Bad_Name",
            manifest: config_map("Bad_Name", ""),
            expect: Expect::Invalid(&[(
                INV,
                "metadata.name",
                "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            )]),
        },
        Case {
            rule: "core ValidateNamespace → ValidateNamespaceName (NameIsDNSLabel)",
            resource: ("", "v1", "Namespace", "namespaces"),
            name: "bad.ns",
            manifest: "apiVersion: v1\nkind: Namespace\nmetadata: {name: bad.ns}\n".into(),
            expect: Expect::Invalid(&[(
                INV,
                "metadata.name",
                "Invalid value: \"bad.ns\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            )]),
        },
        Case {
            rule: "networking validateHTTPIngressPath (supportedPathTypes)",
            resource: ingresses,
            name: "ing",
            manifest: ingress("path: /\n        pathType: Fuzzy"),
            expect: Expect::Invalid(&[(
                UNS,
                "spec.rules[0].http.paths[0].pathType",
                "Unsupported value: \"Fuzzy\": supported values: \"Exact\", \"ImplementationSpecific\", \"Prefix\"",
            )]),
        },
        Case {
            rule: "networking validateHTTPIngressPath (PathType == nil → Required)",
            resource: ingresses,
            name: "ing",
            manifest: ingress("path: /"),
            expect: Expect::Invalid(&[(
                REQ,
                "spec.rules[0].http.paths[0].pathType",
                "Required value: pathType must be specified",
            )]),
        },
        Case {
            rule: "networking validateHTTPIngressPath (Exact/Prefix must be absolute)",
            resource: ingresses,
            name: "ing",
            manifest: ingress("path: api\n        pathType: Prefix"),
            expect: Expect::Invalid(&[(
                INV,
                "spec.rules[0].http.paths[0].path",
                "Invalid value: \"api\": must be an absolute path",
            )]),
        },
        Case {
            rule: "core ValidatePersistentVolumeClaimSpec (len(AccessModes) == 0)",
            resource: pvcs,
            name: "data",
            manifest: pvc("{resources: {requests: {storage: 1Gi}}}"),
            expect: Expect::Invalid(&[(
                REQ,
                "spec.accessModes",
                "Required value: at least 1 access mode is required",
            )]),
        },
        Case {
            rule: "core ValidatePersistentVolumeClaimSpec (Requests[storage] missing)",
            resource: pvcs,
            name: "data",
            manifest: pvc("{accessModes: [ReadWriteOnce]}"),
            expect: Expect::Invalid(&[(REQ, "spec.resources[storage]", "Required value")]),
        },
    ]
}

/// `Kind.group "name" is invalid: …` as `errors.NewInvalid` words it.
fn invalid_message(group: &str, kind: &str, name: &str, causes: &[(&str, &str, &str)]) -> String {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let errors: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    let joined = if errors.len() == 1 {
        errors[0].clone()
    } else {
        format!("[{}]", errors.join(", "))
    };
    format!("{qualified} \"{name}\" is invalid: {joined}")
}

/// What kubectl prints for an `Invalid` (`cmdutil.StandardErrorMessage`: the details' kind and
/// name, then the causes, one per line when several).
fn kubectl_invalid(kind: &str, name: &str, causes: &[(&str, &str, &str)]) -> String {
    let errors: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
    if errors.len() == 1 {
        format!("The {kind} \"{name}\" is invalid: {}", errors[0])
    } else {
        let lines: Vec<String> = errors.iter().map(|e| format!("* {e}")).collect();
        format!("The {kind} \"{name}\" is invalid: \n{}", lines.join("\n"))
    }
}

#[tokio::test]
async fn kube_apiserver_refuses_these_manifests_and_so_does_the_sandbox() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "validation").await;
    let client = common::client(&sandbox).await;
    let cases = cases();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    for (i, case) in cases.iter().enumerate() {
        let (group, version, kind, plural) = case.resource;
        let context = format!(
            "case {i} ({}): {}",
            case.rule,
            case.manifest.chars().take(300).collect::<String>()
        );

        // What the user reads.
        let file = k.file(&format!("case-{i}.yaml"), &case.manifest);
        let out = k.ns(&["create", "-f", &path_str(&file)]).await;
        assert!(!out.ok, "{context}: kubectl created it: {}", out.stdout);
        let stderr = out.stderr;
        let want = match &case.expect {
            Expect::Invalid(causes) => kubectl_invalid(kind, case.name, causes),
            Expect::BadRequest(message) => format!(
                "Error from server (BadRequest): error when creating \"{}\": {message}",
                path_str(&file)
            ),
        };
        assert_eq!(stderr.trim_end(), want, "{context}");

        // The Status itself.
        let ar = ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: if group.is_empty() {
                version.into()
            } else {
                format!("{group}/{version}")
            },
            kind: kind.into(),
            plural: plural.into(),
        };
        let api: Api<DynamicObject> = if kind == "Namespace" {
            Api::all_with(client.clone(), &ar)
        } else {
            Api::namespaced_with(client.clone(), &k.namespace, &ar)
        };
        let object: DynamicObject =
            serde_yaml_ng::from_str(&case.manifest).unwrap_or_else(|e| panic!("{context}: {e}"));
        let status = match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(status)) => status,
            other => panic!("{context}: expected a refusal, got {other:?}"),
        };
        match &case.expect {
            Expect::Invalid(causes) => {
                assert_eq!(
                    (status.code, status.reason.as_str(), status.message.clone()),
                    (
                        422,
                        "Invalid",
                        invalid_message(group, kind, case.name, causes)
                    ),
                    "{context}"
                );
                let details = status.details.as_ref().expect("details");
                assert_eq!(details.kind, kind, "{context}");
                assert_eq!(details.name, case.name, "{context}");
                let got: Vec<(String, String, String)> = details
                    .causes
                    .iter()
                    .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
                    .collect();
                let want: Vec<(String, String, String)> = causes
                    .iter()
                    .map(|(r, f, m)| (r.to_string(), f.to_string(), m.to_string()))
                    .collect();
                assert_eq!(got, want, "{context}");
            }
            Expect::BadRequest(message) => {
                assert_eq!(
                    (status.code, status.reason.as_str(), status.message.as_str()),
                    (400, "BadRequest", *message),
                    "{context}"
                );
            }
        }
    }
}

/// apps/v1's strategies keep a Deployment's, ReplicaSet's and DaemonSet's selector immutable
/// (`pkg/registry/apps/deployment/strategy.go` `ValidateUpdate` →
/// `apivalidation.ValidateImmutableField`), printing the new selector as Go's `%#v` does; the
/// rest of the spec may change.
#[tokio::test]
async fn a_selector_may_not_change_once_created() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "immutable").await;
    let deployment = |app: &str, replicas: i64| {
        workload(
            "Deployment",
            "web",
            &format!("  replicas: {replicas}\n  selector: {{matchLabels: {{app: {app}}}}}\n"),
            &format!("{{app: {app}}}"),
            POD,
        )
    };
    assert_eq!(
        k.apply_yaml("v1.yaml", &deployment("web", 1)).await.trim(),
        "deployment.apps/web created"
    );
    assert_eq!(
        k.apply_yaml("v2.yaml", &deployment("web", 3)).await.trim(),
        "deployment.apps/web configured"
    );
    let file = k.file("v3.yaml", &deployment("web2", 3));
    let out = k.ns(&["apply", "-f", &path_str(&file)]).await;
    assert!(!out.ok, "kubectl applied a new selector: {}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        "The Deployment \"web\" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
    );
    assert_eq!(
        k.jsonpath("deployment", "web", "{.spec.selector.matchLabels.app}")
            .await,
        "web"
    );
}

/// apps `ValidateStatefulSetUpdate`: only replicas, ordinals, template, updateStrategy,
/// persistentVolumeClaimRetentionPolicy and minReadySeconds may change.
#[tokio::test]
async fn a_stateful_set_spec_changes_only_where_kube_allows() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "statefulset").await;
    let stateful_set = |service: &str, replicas: i64, image: &str| {
        workload(
            "StatefulSet",
            "db",
            &format!("  serviceName: {service}\n  replicas: {replicas}\n{APP_WEB}"),
            "{app: web}",
            &format!("{{containers: [{{name: web, image: {image}}}]}}"),
        )
    };
    assert_eq!(
        k.apply_yaml("v1.yaml", &stateful_set("db", 1, "nginx"))
            .await
            .trim(),
        "statefulset.apps/db created"
    );
    assert_eq!(
        k.apply_yaml("v2.yaml", &stateful_set("db", 3, "nginx:1.27"))
            .await
            .trim(),
        "statefulset.apps/db configured"
    );
    let file = k.file("v3.yaml", &stateful_set("other", 3, "nginx:1.27"));
    let out = k.ns(&["apply", "-f", &path_str(&file)]).await;
    assert!(!out.ok, "kubectl changed serviceName: {}", out.stdout);
    assert_eq!(
        out.stderr.trim_end(),
        "The StatefulSet \"db\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
    );
}

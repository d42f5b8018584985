//! `kubectl get <kind>` and `kubectl get <kind> -o wide` print kube-apiserver's columns for
//! every built-in kind (issue 22): the column lists of k/k
//! `pkg/printers/internalversion/printers.go` (`AddHandlers`; priority-1 columns only with
//! `-o wide`), each cell as its `print<Kind>` function fills it, and `Name`/`Created At` from
//! `rest.DefaultTableConvertor` for the kinds without a printer (Roles, ClusterRoles,
//! LimitRanges, CRDs).

use super::*;

/// Objects of most kinds, namespaced ones in the test's namespace (`NS`), cluster-scoped ones
/// suffixed with it (`SFX`) so parallel tests do not meet.
const MANIFESTS: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  replicas: 2
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec: {containers: [{name: app, image: nginx}, {name: side, image: busybox}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  replicas: 3
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts}
spec:
  replicas: 1
  serviceName: sts
  selector: {matchLabels: {app: sts}}
  template:
    metadata: {labels: {app: sts}}
    spec: {containers: [{name: db, image: postgres}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec: {containers: [{name: agent, image: fluentd}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec: {restartPolicy: Never, containers: [{name: work, image: busybox}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cj}
spec:
  schedule: "*/5 * * * *"
  jobTemplate:
    spec:
      template:
        spec: {restartPolicy: OnFailure, containers: [{name: tick, image: busybox}]}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: d}
  minReplicas: 2
  maxReplicas: 5
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing}
spec:
  ingressClassName: nginx
  tls: [{hosts: [a.example.com]}]
  rules:
  - host: a.example.com
    http:
      paths: [{path: /, pathType: Prefix, backend: {service: {name: svc, port: {number: 80}}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: d}}
---
apiVersion: v1
kind: Service
metadata: {name: svc}
spec:
  selector: {app: d}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: ep}
subsets:
- addresses: [{ip: 10.0.0.1}, {ip: 10.0.0.2}]
  ports: [{port: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: pvc}
spec:
  storageClassName: manual
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc}
spec:
  replicas: 1
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: pt}
template:
  metadata: {labels: {tier: web}}
  spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: v1
kind: Secret
metadata: {name: s}
type: Opaque
data: {a: YQ==, b: Yg==}
---
apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec:
  limits: [{type: Container, default: {cpu: 500m}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rb}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: r}
subjects:
- {kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}
- {kind: Group, name: devs, apiGroup: rbac.authorization.k8s.io}
- {kind: ServiceAccount, name: robot, namespace: NS}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l}
spec: {holderIdentity: me}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np}
spec:
  podSelector: {matchLabels: {app: d}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: eps}
addressType: IPv4
ports: [{port: 80}]
endpoints: [{addresses: [10.0.0.9]}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-SFX}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: manual
  hostPath: {path: /tmp/pv}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: sc-SFX}
provisioner: example.com/disk
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: pc-SFX}
value: 1000
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: cr-SFX}
rules: [{apiGroups: [""], resources: [pods], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: crb-SFX}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cr-SFX}
subjects: [{kind: Group, name: ops, apiGroup: rbac.authorization.k8s.io}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: ic-SFX}
spec: {controller: example.com/ingress}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: rtc-SFX}
handler: runc
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: vwc-SFX}
webhooks: []
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mwc-SFX}
webhooks: []
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {a: b}
---
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: crv}
revision: 3
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: rq}
spec:
  hard: {pods: "10"}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: csc}
storageClassName: sc-SFX
capacity: 10Gi
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: csi-SFX.example.com}
spec:
  attachRequired: false
  podInfoOnMount: true
  storageCapacity: true
  requiresRepublish: false
  tokenRequests: [{audience: vault}]
  volumeLifecycleModes: [Persistent]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: csinode-SFX}
spec: {drivers: []}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va-SFX}
spec:
  # A CSI driver's name, as v1 requires (kube-apiserver refuses a path here).
  attacher: disk.example.com
  nodeName: sandbox
  source: {persistentVolumeName: pv-SFX}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: vap-SFX}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: vapb-SFX}
spec:
  policyName: vap-SFX
  validationActions: [Deny]
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: pl-SFX}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 5
    limitResponse:
      type: Queue
      queuing: {queues: 8, handSize: 4, queueLengthLimit: 20}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: fs-SFX}
spec:
  priorityLevelConfiguration: {name: pl-SFX}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.x-SFX.example.com}
spec:
  group: x-SFX.example.com
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
"#;

/// `(kind, name, header, row, wide header, wide row)`: `AGE` in a row is an age (`is_age`),
/// `CREATED` an RFC 3339 time, `*` anything; a `-o wide` line is the plain one followed by the
/// wide columns (kubectl keeps the columns' order).
type Case = (
    &'static str,
    String,
    &'static [&'static str],
    Vec<String>,
    &'static [&'static str],
    Vec<String>,
);

fn strings(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// The cells of `line` under each of `names` in `header` (kubectl aligns columns, so a cell
/// starts where its header does and may contain spaces: `80, 443`).
fn cells(header: &str, line: &str, names: &[&str]) -> Vec<String> {
    let mut starts = Vec::new();
    let mut from = 0;
    for name in names {
        let at = header[from..]
            .find(name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
            + from;
        starts.push(at);
        from = at + name.len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let end = starts
                .get(i + 1)
                .copied()
                .unwrap_or(line.len())
                .min(line.len());
            line.get(s.min(line.len())..end)
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .collect()
}

fn check(kind: &str, got: &[String], want: &[String]) {
    assert_eq!(got.len(), want.len(), "{kind}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        match w.as_str() {
            "AGE" => assert!(is_age(g), "{kind}: age {g:?} in {got:?}"),
            "CREATED" => assert!(
                g.parse::<jiff::Timestamp>().is_ok() && g.ends_with('Z'),
                "{kind}: creation time {g:?} in {got:?}"
            ),
            "*" => {}
            _ => assert_eq!(g, w, "{kind}: {got:?} vs {want:?}"),
        }
    }
}

#[tokio::test]
async fn kubectl_get_prints_kube_apiservers_columns_for_every_builtin_kind() {
    let sandbox = common::sandbox().await;
    let k = Kubectl::new(&sandbox, "printers").await;
    let ns = k.namespace.clone();
    let sfx = ns.clone();
    let manifests = MANIFESTS.replace("NS", &ns).replace("SFX", &sfx);
    let path = k.file("all.yaml", &manifests);
    k.ns(&["apply", "-f", &path_str(&path)]).await.out();
    let cluster_ip = k.jsonpath("service", "svc", "{.spec.clusterIP}").await;
    let job_uid = k.jsonpath("job", "j", "{.metadata.uid}").await;
    let job_selector = format!("batch.kubernetes.io/controller-uid={job_uid}");
    let v = |cells: &[&str]| strings(cells);
    let cases: Vec<Case> = vec![
        (
            "deployments",
            "d".into(),
            &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
            v(&["d", "0/2", "0", "0", "AGE"]),
            &["CONTAINERS", "IMAGES", "SELECTOR"],
            v(&["app,side", "nginx,busybox", "app=d"]),
        ),
        (
            "replicasets",
            "rs".into(),
            &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
            v(&["rs", "3", "0", "0", "AGE"]),
            &["CONTAINERS", "IMAGES", "SELECTOR"],
            v(&["app", "nginx", "app=rs"]),
        ),
        (
            "statefulsets",
            "sts".into(),
            &["NAME", "READY", "AGE"],
            v(&["sts", "0/1", "AGE"]),
            &["CONTAINERS", "IMAGES"],
            v(&["db", "postgres"]),
        ),
        (
            "daemonsets",
            "ds".into(),
            &[
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE",
            ],
            v(&["ds", "0", "0", "0", "0", "0", "<none>", "AGE"]),
            &["CONTAINERS", "IMAGES", "SELECTOR"],
            v(&["agent", "fluentd", "app=ds"]),
        ),
        (
            "jobs",
            "j".into(),
            &["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
            v(&["j", "Running", "0/1", "", "AGE"]),
            &["CONTAINERS", "IMAGES", "SELECTOR"],
            vec!["work".into(), "busybox".into(), job_selector],
        ),
        (
            "cronjobs",
            "cj".into(),
            &[
                "NAME",
                "SCHEDULE",
                "TIMEZONE",
                "SUSPEND",
                "ACTIVE",
                "LAST SCHEDULE",
                "AGE",
            ],
            v(&["cj", "*/5 * * * *", "<none>", "False", "0", "<none>", "AGE"]),
            &["CONTAINERS", "IMAGES", "SELECTOR"],
            v(&["tick", "busybox", "<none>"]),
        ),
        (
            "horizontalpodautoscalers",
            "hpa".into(),
            &[
                "NAME",
                "REFERENCE",
                "TARGETS",
                "MINPODS",
                "MAXPODS",
                "REPLICAS",
                "AGE",
            ],
            v(&[
                "hpa",
                "Deployment/d",
                "cpu: <unknown>/80%",
                "2",
                "5",
                "0",
                "AGE",
            ]),
            &[],
            vec![],
        ),
        (
            "ingresses",
            "ing".into(),
            &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
            v(&["ing", "nginx", "a.example.com", "", "80, 443", "AGE"]),
            &[],
            vec![],
        ),
        (
            "poddisruptionbudgets",
            "pdb".into(),
            &[
                "NAME",
                "MIN AVAILABLE",
                "MAX UNAVAILABLE",
                "ALLOWED DISRUPTIONS",
                "AGE",
            ],
            v(&["pdb", "1", "N/A", "0", "AGE"]),
            &[],
            vec![],
        ),
        (
            "services",
            "svc".into(),
            &[
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE",
            ],
            vec![
                "svc".into(),
                "ClusterIP".into(),
                cluster_ip,
                "<none>".into(),
                "80/TCP".into(),
                "AGE".into(),
            ],
            &["SELECTOR"],
            v(&["app=d"]),
        ),
        (
            "endpoints",
            "ep".into(),
            &["NAME", "ENDPOINTS", "AGE"],
            v(&["ep", "10.0.0.1:8080,10.0.0.2:8080", "AGE"]),
            &[],
            vec![],
        ),
        (
            "pods",
            "p".into(),
            &["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
            v(&["p", "0/1", "Pending", "0", "AGE"]),
            &["IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
            v(&["<none>", "<none>", "<none>", "<none>"]),
        ),
        (
            "nodes",
            "sandbox".into(),
            &["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            v(&["sandbox", "Ready", "<none>", "AGE", "v1.32.0-lien-sandbox"]),
            &[
                "INTERNAL-IP",
                "EXTERNAL-IP",
                "OS-IMAGE",
                "KERNEL-VERSION",
                "CONTAINER-RUNTIME",
            ],
            v(&["127.0.0.1", "<none>", "*", "*", "*"]),
        ),
        (
            "persistentvolumeclaims",
            "pvc".into(),
            &[
                "NAME",
                "STATUS",
                "VOLUME",
                "CAPACITY",
                "ACCESS MODES",
                "STORAGECLASS",
                "VOLUMEATTRIBUTESCLASS",
                "AGE",
            ],
            v(&["pvc", "*", "", "", "", "manual", "<unset>", "AGE"]),
            &["VOLUMEMODE"],
            v(&["*"]),
        ),
        (
            "persistentvolumes",
            format!("pv-{sfx}"),
            &[
                "NAME",
                "CAPACITY",
                "ACCESS MODES",
                "RECLAIM POLICY",
                "STATUS",
                "CLAIM",
                "STORAGECLASS",
                "VOLUMEATTRIBUTESCLASS",
                "REASON",
                "AGE",
            ],
            vec![
                format!("pv-{sfx}"),
                "1Gi".into(),
                "RWO".into(),
                "Retain".into(),
                "*".into(),
                "".into(),
                "manual".into(),
                "<unset>".into(),
                "".into(),
                "AGE".into(),
            ],
            &["VOLUMEMODE"],
            v(&["*"]),
        ),
        (
            "replicationcontrollers",
            "rc".into(),
            &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
            v(&["rc", "1", "0", "0", "AGE"]),
            &["CONTAINERS", "IMAGES", "SELECTOR"],
            v(&["app", "nginx", "app=rc"]),
        ),
        (
            "podtemplates",
            "pt".into(),
            &["NAME", "CONTAINERS", "IMAGES", "POD LABELS"],
            v(&["pt", "app", "nginx", "tier=web"]),
            &[],
            vec![],
        ),
        (
            "secrets",
            "s".into(),
            &["NAME", "TYPE", "DATA", "AGE"],
            v(&["s", "Opaque", "2", "AGE"]),
            &[],
            vec![],
        ),
        (
            "serviceaccounts",
            "default".into(),
            &["NAME", "SECRETS", "AGE"],
            v(&["default", "0", "AGE"]),
            &[],
            vec![],
        ),
        (
            "limitranges",
            "lr".into(),
            &["NAME", "CREATED AT"],
            v(&["lr", "CREATED"]),
            &[],
            vec![],
        ),
        (
            "roles",
            "r".into(),
            &["NAME", "CREATED AT"],
            v(&["r", "CREATED"]),
            &[],
            vec![],
        ),
        (
            "rolebindings",
            "rb".into(),
            &["NAME", "ROLE", "AGE"],
            v(&["rb", "Role/r", "AGE"]),
            &["USERS", "GROUPS", "SERVICEACCOUNTS"],
            vec!["alice".into(), "devs".into(), format!("{ns}/robot")],
        ),
        (
            "clusterroles",
            format!("cr-{sfx}"),
            &["NAME", "CREATED AT"],
            vec![format!("cr-{sfx}"), "CREATED".into()],
            &[],
            vec![],
        ),
        (
            "clusterrolebindings",
            format!("crb-{sfx}"),
            &["NAME", "ROLE", "AGE"],
            vec![
                format!("crb-{sfx}"),
                format!("ClusterRole/cr-{sfx}"),
                "AGE".into(),
            ],
            &["USERS", "GROUPS", "SERVICEACCOUNTS"],
            v(&["", "ops", ""]),
        ),
        (
            "leases",
            "l".into(),
            &["NAME", "HOLDER", "AGE"],
            v(&["l", "me", "AGE"]),
            &[],
            vec![],
        ),
        (
            "networkpolicies",
            "np".into(),
            &["NAME", "POD-SELECTOR", "AGE"],
            v(&["np", "app=d", "AGE"]),
            &[],
            vec![],
        ),
        (
            "endpointslices",
            "eps".into(),
            &["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
            v(&["eps", "IPv4", "80", "10.0.0.9", "AGE"]),
            &[],
            vec![],
        ),
        (
            "storageclasses",
            format!("sc-{sfx}"),
            &[
                "NAME",
                "PROVISIONER",
                "RECLAIMPOLICY",
                "VOLUMEBINDINGMODE",
                "ALLOWVOLUMEEXPANSION",
                "AGE",
            ],
            vec![
                format!("sc-{sfx}"),
                "example.com/disk".into(),
                "Delete".into(),
                "Immediate".into(),
                "false".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "priorityclasses",
            format!("pc-{sfx}"),
            &["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
            vec![
                format!("pc-{sfx}"),
                "1000".into(),
                "false".into(),
                "AGE".into(),
                "*".into(),
            ],
            &[],
            vec![],
        ),
        (
            "ingressclasses",
            format!("ic-{sfx}"),
            &["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
            vec![
                format!("ic-{sfx}"),
                "example.com/ingress".into(),
                "<none>".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "runtimeclasses",
            format!("rtc-{sfx}"),
            &["NAME", "HANDLER", "AGE"],
            vec![format!("rtc-{sfx}"), "runc".into(), "AGE".into()],
            &[],
            vec![],
        ),
        (
            "validatingwebhookconfigurations",
            format!("vwc-{sfx}"),
            &["NAME", "WEBHOOKS", "AGE"],
            vec![format!("vwc-{sfx}"), "0".into(), "AGE".into()],
            &[],
            vec![],
        ),
        (
            "mutatingwebhookconfigurations",
            format!("mwc-{sfx}"),
            &["NAME", "WEBHOOKS", "AGE"],
            vec![format!("mwc-{sfx}"), "0".into(), "AGE".into()],
            &[],
            vec![],
        ),
        (
            "customresourcedefinitions",
            "widgets.smoke.lien.dev".into(),
            &["NAME", "CREATED AT"],
            v(&["widgets.smoke.lien.dev", "CREATED"]),
            &[],
            vec![],
        ),
        (
            "configmaps",
            "cm".into(),
            &["NAME", "DATA", "AGE"],
            v(&["cm", "1", "AGE"]),
            &[],
            vec![],
        ),
        (
            "namespaces",
            ns.clone(),
            &["NAME", "STATUS", "AGE"],
            vec![ns.clone(), "Active".into(), "AGE".into()],
            &[],
            vec![],
        ),
        (
            "controllerrevisions",
            "crv".into(),
            &["NAME", "CONTROLLER", "REVISION", "AGE"],
            v(&["crv", "<none>", "3", "AGE"]),
            &[],
            vec![],
        ),
        (
            "resourcequotas",
            "rq".into(),
            // kube-apiserver v1.32.13 puts AGE second (measured: tools/table-descriptions).
            &["NAME", "AGE", "REQUEST", "LIMIT"],
            // Status.Hard is the quota controller's, which does not run.
            v(&["rq", "AGE", "", ""]),
            &[],
            vec![],
        ),
        (
            "csistoragecapacities",
            "csc".into(),
            // The default convertor's, as kube-apiserver v1.32.13 answers (measured).
            &["NAME", "CREATED AT"],
            v(&["csc", "CREATED"]),
            &[],
            vec![],
        ),
        (
            "csidrivers",
            format!("csi-{sfx}.example.com"),
            &[
                "NAME",
                "ATTACHREQUIRED",
                "PODINFOONMOUNT",
                "STORAGECAPACITY",
                "TOKENREQUESTS",
                "REQUIRESREPUBLISH",
                "MODES",
                "AGE",
            ],
            vec![
                format!("csi-{sfx}.example.com"),
                "false".into(),
                "true".into(),
                "true".into(),
                "vault".into(),
                "false".into(),
                "Persistent".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "csinodes",
            format!("csinode-{sfx}"),
            &["NAME", "DRIVERS", "AGE"],
            vec![format!("csinode-{sfx}"), "0".into(), "AGE".into()],
            &[],
            vec![],
        ),
        (
            "volumeattachments",
            format!("va-{sfx}"),
            &["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"],
            vec![
                format!("va-{sfx}"),
                "disk.example.com".into(),
                format!("pv-{sfx}"),
                "sandbox".into(),
                "false".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "validatingadmissionpolicies",
            format!("vap-{sfx}"),
            &["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
            vec![
                format!("vap-{sfx}"),
                "1".into(),
                "<unset>".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "validatingadmissionpolicybindings",
            format!("vapb-{sfx}"),
            &["NAME", "POLICYNAME", "PARAMREF", "AGE"],
            vec![
                format!("vapb-{sfx}"),
                format!("vap-{sfx}"),
                "<unset>".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "prioritylevelconfigurations",
            format!("pl-{sfx}"),
            &[
                "NAME",
                "TYPE",
                "NOMINALCONCURRENCYSHARES",
                "QUEUES",
                "HANDSIZE",
                "QUEUELENGTHLIMIT",
                "AGE",
            ],
            vec![
                format!("pl-{sfx}"),
                "Limited".into(),
                "5".into(),
                "8".into(),
                "4".into(),
                "20".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
        (
            "flowschemas",
            format!("fs-{sfx}"),
            &[
                "NAME",
                "PRIORITYLEVEL",
                "MATCHINGPRECEDENCE",
                "DISTINGUISHERMETHOD",
                "AGE",
                "MISSINGPL",
            ],
            vec![
                format!("fs-{sfx}"),
                format!("pl-{sfx}"),
                "500".into(),
                "ByUser".into(),
                "AGE".into(),
                "?".into(),
            ],
            &[],
            vec![],
        ),
        (
            "apiservices",
            format!("v1.x-{sfx}.example.com"),
            &["NAME", "SERVICE", "AVAILABLE", "AGE"],
            // AVAILABLE is the availability controller's condition (a local APIService
            // becomes True), which does not run here: `Unknown` until a client sets it.
            vec![
                format!("v1.x-{sfx}.example.com"),
                "Local".into(),
                "*".into(),
                "AGE".into(),
            ],
            &[],
            vec![],
        ),
    ];
    widget_crd(&k).await;
    for (kind, name, header, row, wide_header, wide_row) in cases {
        for wide in [false, true] {
            let mut args = vec!["get", kind, name.as_str()];
            if wide {
                args.extend(["-o", "wide"]);
            }
            let out = k.ns(&args).await.out();
            let lines: Vec<&str> = out.lines().collect();
            assert_eq!(lines.len(), 2, "{args:?}:\n{out}");
            let mut names: Vec<&str> = header.to_vec();
            let mut want = row.clone();
            if wide {
                names.extend(wide_header.iter());
                want.extend(wide_row.iter().cloned());
            }
            let words: Vec<&str> = lines[0].split_whitespace().collect();
            assert_eq!(
                words,
                names.iter().flat_map(|n| n.split(' ')).collect::<Vec<_>>(),
                "{args:?} header:\n{out}"
            );
            check(kind, &cells(lines[0], lines[1], &names), &want);
        }
    }
    sandbox.shutdown().await;
}

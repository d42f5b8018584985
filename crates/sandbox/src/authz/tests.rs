//! The RBAC decisions and request mapping, against what Kubernetes documents.

use std::collections::HashMap;

use serde_json::json;

use super::*;

fn alice() -> UserInfo {
    UserInfo::new("alice", "", &["dev", "system:authenticated"])
}

fn cluster_role(name: &str, rules: Value) -> Role {
    Role::from_object(&json!({"metadata": {"name": name}, "rules": rules})).expect("role")
}

fn role(ns: &str, name: &str, rules: Value) -> Role {
    Role::from_object(&json!({"metadata": {"name": name, "namespace": ns}, "rules": rules}))
        .expect("role")
}

fn binding(ns: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Binding {
    Binding::from_object(&json!({"metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": kind, "name": role},
        "subjects": subjects}))
    .expect("binding")
}

fn user_subject(name: &str) -> Value {
    json!([{"apiGroup": RBAC_GROUP, "kind": "User", "name": name}])
}

fn resource(
    user: UserInfo,
    verb: &str,
    group: &str,
    res: &str,
    ns: &str,
    name: &str,
) -> Attributes {
    let (resource, subresource) = res.split_once('/').unwrap_or((res, ""));
    Attributes {
        user,
        verb: verb.into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: ns.into(),
        name: name.into(),
        ..Attributes::default()
    }
}

fn rule(v: Value) -> PolicyRule {
    PolicyRule::deserialize(&v).expect("rule")
}

#[test]
fn rules_match_like_rbacv1helpers() {
    let a = resource(alice(), "update", "", "configmaps", "team-b", "settings");
    let cases = [
        (
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}),
            true,
        ),
        (
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
            true,
        ),
        (
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}),
            false,
        ),
        (
            json!({"apiGroups": ["apps"], "resources": ["configmaps"], "verbs": ["update"]}),
            false,
        ),
        (
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["update"]}),
            false,
        ),
        (
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["update"]}),
            true,
        ),
        (
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["other"], "verbs": ["update"]}),
            false,
        ),
        // A rule without apiGroups matches no resource request.
        (
            json!({"resources": ["configmaps"], "verbs": ["update"]}),
            false,
        ),
    ];
    for (r, want) in cases {
        assert_eq!(rule_allows(&a, &rule(r.clone())), want, "{r}");
    }
    // resourceNames never match a request without a name (list, create).
    let list = resource(alice(), "list", "", "configmaps", "team-b", "");
    let named = rule(
        json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["list"]}),
    );
    assert!(!rule_allows(&list, &named));
}

#[test]
fn subresources_match_exactly_or_through_star_slash() {
    let status = resource(alice(), "update", "apps", "deployments/status", "ns", "web");
    let by = |resources: Value| {
        rule_allows(
            &status,
            &rule(json!({"apiGroups": ["apps"], "resources": resources, "verbs": ["update"]})),
        )
    };
    assert!(by(json!(["deployments/status"])));
    assert!(by(json!(["*/status"])));
    assert!(by(json!(["*"])));
    // The resource alone does not grant its subresources.
    assert!(!by(json!(["deployments"])));
    assert!(!by(json!(["*/scale"])));
    assert!(!by(json!(["deployments/scale"])));
}

#[test]
fn non_resource_urls_match_exactly_or_by_prefix() {
    let a = Attributes {
        user: alice(),
        verb: "get".into(),
        path: "/apis/apps/v1".into(),
        ..Attributes::default()
    };
    let by = |urls: Value| {
        rule_allows(
            &a,
            &rule(json!({"nonResourceURLs": urls, "verbs": ["get"]})),
        )
    };
    assert!(by(json!(["/apis/*"])));
    assert!(by(json!(["*"])));
    assert!(by(json!(["/apis/apps/v1"])));
    assert!(!by(json!(["/apis"])));
    assert!(!by(json!(["/api/*"])));
}

#[test]
fn bindings_grant_to_users_groups_and_service_accounts() {
    let edit = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update"]}]);
    let policy = RbacPolicy {
        roles: vec![role("team-a", "cm-editor", edit.clone())],
        cluster_roles: vec![cluster_role("cm-editor", edit)],
        role_bindings: vec![
            binding(
                "team-a",
                "alice-edits",
                "Role",
                "cm-editor",
                user_subject("alice"),
            ),
            binding(
                "team-b",
                "dev-edits",
                "ClusterRole",
                "cm-editor",
                json!([{"apiGroup": RBAC_GROUP, "kind": "Group", "name": "dev"}]),
            ),
            // A ServiceAccount subject without a namespace is in the binding's namespace.
            binding(
                "team-c",
                "sa-edits",
                "ClusterRole",
                "cm-editor",
                json!([{"kind": "ServiceAccount", "name": "deployer"}]),
            ),
        ],
        cluster_role_bindings: vec![],
    };
    let can = |user: UserInfo, ns: &str| {
        authorize(
            &policy,
            &resource(user, "update", "", "configmaps", ns, "x"),
        )
    };
    let d = can(alice(), "team-a");
    assert_eq!(
        d,
        Decision::Allow(
            "RBAC: allowed by RoleBinding \"alice-edits/team-a\" of Role \"cm-editor\" to User \"alice\"".into()
        )
    );
    assert!(can(alice(), "team-b").allowed(), "through the dev group");
    assert_eq!(can(alice(), "team-c"), Decision::NoOpinion(String::new()));
    let bob = UserInfo::new("bob", "", &["system:authenticated"]);
    assert!(!can(bob.clone(), "team-a").allowed());
    assert!(!can(bob.clone(), "team-b").allowed());
    let sa = UserInfo::service_account("team-c", "deployer");
    let d = can(sa.clone(), "team-c");
    assert_eq!(
        d.reason(),
        "RBAC: allowed by RoleBinding \"sa-edits/team-c\" of ClusterRole \"cm-editor\" to ServiceAccount \"deployer/team-c\""
    );
    // The same name in another namespace is another service account.
    assert!(!can(UserInfo::service_account("team-a", "deployer"), "team-c").allowed());
    // A RoleBinding never grants cluster-wide, not even through a ClusterRole.
    assert!(!can(alice(), "").allowed());
}

#[test]
fn cluster_role_bindings_grant_everywhere_and_masters_always() {
    let policy = RbacPolicy {
        cluster_roles: vec![cluster_role(
            "reader",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]),
        )],
        cluster_role_bindings: vec![binding(
            "",
            "alice-reads",
            "ClusterRole",
            "reader",
            user_subject("alice"),
        )],
        ..RbacPolicy::default()
    };
    let get = authorize(
        &policy,
        &resource(alice(), "get", "apps", "deployments", "any", "web"),
    );
    assert_eq!(
        get.reason(),
        "RBAC: allowed by ClusterRoleBinding \"alice-reads\" of ClusterRole \"reader\" to User \"alice\""
    );
    assert!(
        authorize(
            &policy,
            &resource(alice(), "list", "", "namespaces", "", "")
        )
        .allowed()
    );
    assert!(
        !authorize(
            &policy,
            &resource(alice(), "delete", "", "configmaps", "any", "x")
        )
        .allowed()
    );
    // A binding to a role that does not exist (yet) grants nothing.
    let dangling = RbacPolicy {
        cluster_role_bindings: vec![binding(
            "",
            "b",
            "ClusterRole",
            "missing",
            user_subject("alice"),
        )],
        ..RbacPolicy::default()
    };
    assert!(
        !authorize(
            &dangling,
            &resource(alice(), "get", "", "configmaps", "a", "x")
        )
        .allowed()
    );
    // system:masters needs no binding.
    let admin = UserInfo::new("root", "", &["system:masters"]);
    assert!(
        authorize(
            &RbacPolicy::default(),
            &resource(admin, "delete", "x.io", "things", "", "t")
        )
        .allowed()
    );
}

fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn http_methods_map_to_verbs_like_request_info_factory() {
    let u = alice();
    let at = |method: &str, path: &str, query: &[(&str, &str)]| {
        let a = request_attributes(&u, method, path, &q(query));
        (
            a.verb,
            a.api_group,
            a.resource,
            a.subresource,
            a.namespace,
            a.name,
        )
    };
    let s = |v: &str| v.to_string();
    assert_eq!(
        at("GET", "/api/v1/namespaces/a/configmaps/b", &[]),
        (s("get"), s(""), s("configmaps"), s(""), s("a"), s("b"))
    );
    assert_eq!(at("GET", "/api/v1/namespaces/a/configmaps", &[]).0, "list");
    assert_eq!(
        at(
            "GET",
            "/api/v1/namespaces/a/configmaps",
            &[("watch", "true")]
        )
        .0,
        "watch"
    );
    assert_eq!(
        at("GET", "/api/v1/configmaps", &[("watch", "1")]).0,
        "watch"
    );
    // A list or watch of one name is about that object.
    let one = at(
        "GET",
        "/api/v1/namespaces/a/configmaps",
        &[("fieldSelector", "metadata.name=b"), ("watch", "true")],
    );
    assert_eq!((one.0.as_str(), one.5.as_str()), ("watch", "b"));
    assert_eq!(
        at("POST", "/apis/apps/v1/namespaces/a/deployments", &[]).0,
        "create"
    );
    assert_eq!(
        at(
            "PUT",
            "/apis/apps/v1/namespaces/a/deployments/w/status",
            &[]
        ),
        (
            s("update"),
            s("apps"),
            s("deployments"),
            s("status"),
            s("a"),
            s("w")
        )
    );
    assert_eq!(
        at("PATCH", "/api/v1/namespaces/a/configmaps/b", &[]).0,
        "patch"
    );
    assert_eq!(
        at("DELETE", "/api/v1/namespaces/a/configmaps/b", &[]).0,
        "delete"
    );
    assert_eq!(
        at("DELETE", "/api/v1/namespaces/a/configmaps", &[]).0,
        "deletecollection"
    );
    // A namespace is in itself; its finalize subresource too.
    assert_eq!(
        at("GET", "/api/v1/namespaces/a", &[]),
        (s("get"), s(""), s("namespaces"), s(""), s("a"), s("a"))
    );
    assert_eq!(
        at("PUT", "/api/v1/namespaces/a/finalize", &[]),
        (
            s("update"),
            s(""),
            s("namespaces"),
            s("finalize"),
            s("a"),
            s("a")
        )
    );
    assert_eq!(at("GET", "/api/v1/namespaces", &[]).0, "list");
    // Cluster-scoped custom resources.
    assert_eq!(
        at("GET", "/apis/lien.dev/v1alpha1/clusterusages/x", &[]).2,
        "clusterusages"
    );
    // Discovery and the rest are non-resource requests.
    for path in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/openapi/v3",
        "/version",
    ] {
        let a = request_attributes(&u, "GET", path, &q(&[]));
        assert!(!a.resource_request, "{path}");
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", path));
    }
}

#[test]
fn forbidden_messages_are_kube_apiservers() {
    let a = resource(alice(), "update", "", "configmaps", "team-b", "settings");
    let e = forbidden(&a, "");
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        "configmaps \"settings\" is forbidden: User \"alice\" cannot update resource \"configmaps\" in API group \"\" in the namespace \"team-b\""
    );
    let a = resource(
        alice(),
        "list",
        "rbac.authorization.k8s.io",
        "clusterroles",
        "",
        "",
    );
    assert_eq!(
        forbidden(&a, "").message,
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
    );
    let a = resource(alice(), "update", "apps", "deployments/status", "n", "w");
    assert!(
        forbidden(&a, "")
            .message
            .contains("cannot update resource \"deployments/status\"")
    );
    let a = Attributes {
        user: alice(),
        verb: "get".into(),
        path: "/metrics".into(),
        ..Attributes::default()
    };
    assert_eq!(
        forbidden(&a, "").message,
        "forbidden: User \"alice\" cannot get path \"/metrics\""
    );
}

#[test]
fn impersonation_checks_each_field() {
    let admin = UserInfo::new("admin", "", &["system:authenticated"]);
    let mut extra = BTreeMap::new();
    extra.insert("scopes".to_string(), vec!["view".to_string()]);
    let requested = UserInfo {
        username: "system:serviceaccount:ns:sa".into(),
        uid: "u-1".into(),
        groups: vec!["g1".into()],
        extra: extra.clone(),
    };
    let target = impersonated_user(
        "system:serviceaccount:ns:sa",
        vec!["g1".into()],
        "u-1".into(),
        extra,
    );
    assert_eq!(
        target.groups,
        vec![
            "g1",
            "system:serviceaccounts",
            "system:serviceaccounts:ns",
            "system:authenticated"
        ]
    );
    let checks: Vec<(String, String, String, String, String)> =
        impersonation_attributes(&admin, &requested)
            .into_iter()
            .map(|a| {
                assert_eq!(a.verb, "impersonate");
                (a.api_group, a.resource, a.subresource, a.namespace, a.name)
            })
            .collect();
    let s = |v: &str| v.to_string();
    assert_eq!(
        checks,
        vec![
            (s(""), s("serviceaccounts"), s(""), s("ns"), s("sa")),
            (s(""), s("groups"), s(""), s(""), s("g1")),
            (
                s("authentication.k8s.io"),
                s("uids"),
                s(""),
                s(""),
                s("u-1")
            ),
            (
                s("authentication.k8s.io"),
                s("userextras"),
                s("scopes"),
                s(""),
                s("view")
            ),
        ]
    );
    let plain = impersonated_user("alice", vec![], String::new(), BTreeMap::new());
    assert_eq!(plain.groups, vec!["system:authenticated"]);
    assert_eq!(
        impersonation_attributes(&admin, &plain)[0].resource,
        "users"
    );
}

#[test]
fn reviews_name_a_user_or_are_about_the_requester() {
    let sar = json!({"spec": {"user": "alice", "groups": ["dev"], "extra": {"k": ["v"]}, "uid": "u1",
        "resourceAttributes": {"verb": "update", "resource": "configmaps", "namespace": "b", "name": "x"}}});
    let a = review_attributes(&sar, None).expect("valid");
    assert_eq!(a.user.username, "alice");
    assert_eq!(a.user.extra.get("k"), Some(&vec!["v".to_string()]));
    assert_eq!(
        (
            a.verb.as_str(),
            a.resource.as_str(),
            a.namespace.as_str(),
            a.name.as_str()
        ),
        ("update", "configmaps", "b", "x")
    );
    let me = alice();
    let ssar = json!({"spec": {"nonResourceAttributes": {"path": "/api", "verb": "get"}}});
    let a = review_attributes(&ssar, Some(&me)).expect("valid");
    assert_eq!(
        (
            a.user.username.as_str(),
            a.resource_request,
            a.path.as_str()
        ),
        ("alice", false, "/api")
    );
    let e =
        review_attributes(&json!({"spec": {"resourceAttributes": {}}}), None).expect_err("no user");
    assert_eq!(e.code, 422);
    // Named as kube-apiserver names it, from an object without TypeMeta.
    assert!(
        e.message
            .starts_with(".authorization.k8s.io \"\" is invalid: "),
        "{}",
        e.message
    );
    assert!(
        e.message
            .contains("at least one of user or group must be specified"),
        "{}",
        e.message
    );
    let e = review_attributes(&json!({"spec": {"user": "a"}}), None).expect_err("no attributes");
    assert!(
        e.message
            .contains("exactly one of nonResourceAttributes or resourceAttributes"),
        "{}",
        e.message
    );
    assert_eq!(
        review_status(&Decision::NoOpinion(String::new())),
        json!({"allowed": false})
    );
    assert_eq!(
        review_status(&Decision::Allow("RBAC: x".into())),
        json!({"allowed": true, "reason": "RBAC: x"})
    );
}

#[test]
fn rbac_objects_are_validated() {
    let bad_role = json!({"rules": [{"resources": ["configmaps"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": []},
        {"nonResourceURLs": ["/x"], "verbs": ["get"]}]});
    let fields: Vec<String> = validate_rbac("Role", &bad_role, None)
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        vec![
            "rules[0].apiGroups",
            "rules[1].verbs",
            "rules[2].nonResourceURLs"
        ]
    );
    assert!(
        validate_rbac(
            "ClusterRole",
            &json!({"rules": [{"nonResourceURLs": ["/x"], "verbs": ["get"]}]}),
            None
        )
        .is_empty()
    );
    let crb = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "r"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "r"}]});
    let fields: Vec<String> = validate_rbac("ClusterRoleBinding", &crb, None)
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(
        fields,
        vec!["roleRef.kind", "subjects[0].namespace", "subjects[1].kind"]
    );
    let rb = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "r"},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": "alice"}]});
    assert!(validate_rbac("RoleBinding", &rb, None).is_empty());
    let mut changed = rb.clone();
    changed["roleRef"]["name"] = json!("other");
    let causes = validate_rbac("RoleBinding", &changed, Some(&rb));
    assert_eq!(causes.len(), 1);
    assert!(causes[0].message.contains("cannot change roleRef"));
}

#[test]
fn authorization_modes_parse_as_kube_apiserver_spells_them() {
    assert_eq!("RBAC".parse(), Ok(Authorization::Rbac));
    assert_eq!("AlwaysAllow".parse(), Ok(Authorization::AlwaysAllow));
    assert!("rbac".parse::<Authorization>().is_err());
}

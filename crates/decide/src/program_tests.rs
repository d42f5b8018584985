//! Unit tests of a rule's programs: compilation naming every bad field, keys, `when`,
//! children, back references and the policy expression.

use lien_api::{CascadeRuleSpec, DependencyKeys, DependencyRuleSpec, KindRef, PropagationPolicy};
use serde_json::{Value, json};

use lien_cel::EvalError;

use super::{CascadeProgram, ChildRef, DependencyProgram};

fn nfs() -> Value {
    json!({
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephNFS",
        "metadata": {"name": "my-nfs", "namespace": "rook-ceph", "labels": {"app": "nfs"}},
        "spec": {"rados": {"pool": "replicapool", "namespace": "nfs-ns"}, "server": {"active": 1}},
    })
}

fn dep_spec(keys: Option<(&str, &str)>, when: Option<&str>) -> DependencyRuleSpec {
    DependencyRuleSpec {
        of: KindRef {
            api_version: "ceph.rook.io/v1".into(),
            kind: "CephBlockPool".into(),
        },
        by: KindRef {
            api_version: "ceph.rook.io/v1".into(),
            kind: "CephNFS".into(),
        },
        keys: keys.map(|(of, by)| DependencyKeys {
            of: of.into(),
            by: by.into(),
        }),
        when: when.map(Into::into),
        reason: "the NFS export stores its data in this pool".into(),
        ..Default::default()
    }
}

#[test]
fn a_dependency_program_compiles_and_evaluates_keys_and_when() {
    let program = DependencyProgram::compile(&dep_spec(
        Some((
            "[has(self.spec.name) ? self.spec.name : self.metadata.name]",
            "[self.spec.rados.pool]",
        )),
        Some("self.spec.server.active > 0"),
    ))
    .expect("compiles");
    assert!(program.keyed());
    let pool = json!({"metadata": {"name": "replicapool"}, "spec": {}});
    assert_eq!(program.keys_of(&pool), Ok(vec!["replicapool".to_string()]));
    assert_eq!(program.keys_by(&nfs()), Ok(vec!["replicapool".to_string()]));
    assert_eq!(program.when(&nfs()), Ok(true));

    let unkeyed = DependencyProgram::compile(&dep_spec(None, None)).expect("compiles");
    assert!(!unkeyed.keyed());
    assert_eq!(unkeyed.keys_of(&pool), Ok(vec![]));
    assert_eq!(unkeyed.keys_by(&nfs()), Ok(vec![]));
    assert_eq!(unkeyed.when(&nfs()), Ok(true));
}

#[test]
fn a_dependency_program_reports_every_bad_field() {
    let errors = DependencyProgram::compile(&dep_spec(
        Some(("[self.metadata.name", "[self.spec.rados.pool]")),
        Some("nope(self)"),
    ))
    .expect_err("two bad fields");
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["spec.keys.of", "spec.when"]);
    assert!(
        errors[1]
            .to_string()
            .starts_with("spec.when: undeclared function 'nope'")
    );
}

fn cascade_spec(children: &str, policy: Option<&str>) -> CascadeRuleSpec {
    CascadeRuleSpec {
        parent: KindRef {
            api_version: "example.org/v1".into(),
            kind: "DatabaseClaim".into(),
        },
        children: children.into(),
        propagation_policy: PropagationPolicy::Background,
        propagation_policy_expression: policy.map(Into::into),
        child_kinds: vec![lien_api::CascadeChildKind {
            of: KindRef {
                api_version: "example.org/v1".into(),
                kind: "XDatabase".into(),
            },
            back_reference: "has(self.spec.claimRef) ? self.spec.claimRef : null".into(),
        }],
    }
}

#[test]
fn a_back_reference_yields_the_parents_a_child_names_and_only_for_listed_kinds() {
    let program = CascadeProgram::compile(&cascade_spec("[]", None)).expect("compiles");
    assert!(program.allows("example.org", "XDatabase"));
    assert!(!program.allows("", "ConfigMap"));
    assert!(!program.allows("other.org", "XDatabase"));
    assert!(
        program
            .back_references("", "ConfigMap", &json!({"spec": {}}))
            .is_none(),
        "a kind outside childKinds has no back reference"
    );
    let child = json!({"spec": {"claimRef": {"apiVersion": "example.org/v1", "kind": "DatabaseClaim",
        "name": "my-db", "namespace": "team-a", "uid": "u1"}}});
    let refs = program
        .back_references("example.org", "XDatabase", &child)
        .expect("listed")
        .expect("evaluates");
    assert_eq!(
        refs,
        vec![super::ParentRef {
            group: Some("example.org".into()),
            kind: "DatabaseClaim".into(),
            name: "my-db".into(),
            namespace: Some("team-a".into()),
            uid: Some("u1".into()),
        }]
    );
    // No claimRef: null, no parent.
    let none = program
        .back_references("example.org", "XDatabase", &json!({"spec": {}}))
        .expect("listed")
        .expect("evaluates");
    assert!(none.is_empty());
    // A reference without a name is an error naming what is missing.
    let bad = json!({"spec": {"claimRef": {"kind": "DatabaseClaim"}}});
    let e = program
        .back_references("example.org", "XDatabase", &bad)
        .expect("listed")
        .expect_err("no name");
    assert!(e.to_string().contains("`name` is missing"), "{e}");
}

#[test]
fn a_back_reference_that_does_not_compile_names_its_field() {
    let mut spec = cascade_spec("[]", None);
    spec.child_kinds[0].back_reference = "self.spec.(".into();
    let errors = CascadeProgram::compile(&spec).expect_err("does not compile");
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0]
            .to_string()
            .starts_with("spec.childKinds[0].backReference:"),
        "{}",
        errors[0]
    );
}

#[test]
fn a_cascade_program_yields_children_and_the_policy_expression_wins() {
    let program = CascadeProgram::compile(&cascade_spec(
        "[{'apiVersion': 'v1', 'kind': 'Secret', 'name': self.spec.secret}, \
          {'apiVersion': 'example.org/v1', 'kind': 'Database', 'name': self.metadata.name, 'namespace': 'dbs'}]",
        Some("has(self.spec.policy) ? self.spec.policy : null"),
    ))
    .expect("compiles");
    let parent =
        json!({"metadata": {"name": "db1"}, "spec": {"secret": "creds", "policy": "Foreground"}});
    assert_eq!(
        program.children(&parent),
        Ok(vec![
            ChildRef {
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: "creds".into(),
                namespace: None
            },
            ChildRef {
                api_version: "example.org/v1".into(),
                kind: "Database".into(),
                name: "db1".into(),
                namespace: Some("dbs".into())
            },
        ])
    );
    assert_eq!(program.policy(&parent), Ok(PropagationPolicy::Foreground));
    // No value from the expression: the spec's policy.
    let plain = json!({"metadata": {"name": "db1"}, "spec": {"secret": "creds"}});
    assert_eq!(program.policy(&plain), Ok(PropagationPolicy::Background));
    // An invalid policy value is an error naming it.
    let bad = json!({"metadata": {"name": "db1"}, "spec": {"secret": "creds", "policy": "Orphan"}});
    let e = program.policy(&bad).expect_err("Orphan is no policy");
    assert!(matches!(e, EvalError::InvalidValue(_)), "{e}");
    assert!(e.to_string().contains("\"Orphan\""), "{e}");
    let e = CascadeProgram::compile(&cascade_spec("[]", Some("1")))
        .expect("compiles")
        .policy(&plain)
        .expect_err("an int");
    assert!(matches!(e, EvalError::TypeMismatch { .. }), "{e}");
    // Without an expression, the spec's policy.
    let mut spec = cascade_spec("[]", None);
    spec.propagation_policy = PropagationPolicy::Foreground;
    let program = CascadeProgram::compile(&spec).expect("compiles");
    assert_eq!(program.policy(&plain), Ok(PropagationPolicy::Foreground));
    assert_eq!(program.children(&plain), Ok(vec![]));
}

#[test]
fn a_cascade_program_refuses_malformed_children() {
    let program =
        CascadeProgram::compile(&cascade_spec("self.spec.children", None)).expect("compiles");
    let e = program
        .children(&json!({"spec": {"children": [{"apiVersion": "v1", "kind": "Secret"}]}}))
        .expect_err("no name");
    assert!(e.to_string().contains("child 0: `name` is missing"), "{e}");
    let e = program
        .children(&json!({"spec": {"children": ["a"]}}))
        .expect_err("not a map");
    assert!(matches!(e, EvalError::TypeMismatch { .. }), "{e}");
    let e = program
        .children(&json!({"spec": {"children": {"a": 1}}}))
        .expect_err("not a list");
    assert!(matches!(e, EvalError::TypeMismatch { .. }), "{e}");
    let errors =
        CascadeProgram::compile(&cascade_spec("[", Some("bogus()"))).expect_err("both bad");
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        ["spec.children", "spec.propagationPolicyExpression"]
    );
}

#[test]
fn programs_are_send_sync_and_clone() {
    fn assert_traits<T: Clone + std::fmt::Debug + Send + Sync>() {}
    assert_traits::<DependencyProgram>();
    assert_traits::<CascadeProgram>();
}

#[test]
fn lien_cel_bounds_expressions_as_the_crds_do() {
    // lien-cel holds its own copy, so that it needs no Lien types; the CRDs' schema bound and
    // the compile-time bound must be one number.
    assert_eq!(
        lien_cel::MAX_EXPRESSION_CHARS,
        lien_api::MAX_EXPRESSION_CHARS
    );
}

/// Issue 28, finding 6: what Lien keeps of an object from a rule's CEL is bounded per object —
/// a DependencyRule's keys (count and bytes), a CascadeRule's children (count, and each field
/// within Kubernetes' own bounds) and back references — and an object beyond a bound is an
/// evaluation error naming the bound, so it shows in the rule's status.
#[test]
fn what_a_rule_keeps_of_an_object_is_bounded() {
    use super::{MAX_BACK_REFERENCES_PER_CHILD, MAX_CHILDREN_PER_PARENT, MAX_KEYS_PER_OBJECT};
    let p = DependencyProgram::compile(&dep_spec(
        Some(("[self.metadata.name]", "self.spec.keys")),
        None,
    ))
    .expect("compiles");
    let with_keys = |keys: Vec<String>| json!({"metadata": {"name": "n"}, "spec": {"keys": keys}});
    let many: Vec<String> = (0..=MAX_KEYS_PER_OBJECT).map(|i| format!("k{i}")).collect();
    let e = p.keys_by(&with_keys(many)).expect_err("too many keys");
    assert!(
        e.to_string().contains("257 distinct keys")
            && e.to_string().contains("MAX_KEYS_PER_OBJECT"),
        "{e}"
    );
    // Repeats are one key each.
    let repeated: Vec<String> = (0..1000).map(|i| format!("k{}", i % 3)).collect();
    assert_eq!(
        p.keys_by(&with_keys(repeated)).expect("three keys"),
        ["k0", "k1", "k2"]
    );
    let e = p
        .keys_by(&with_keys(vec!["x".repeat(10_000)]))
        .expect_err("a key too long");
    assert!(e.to_string().contains("MAX_KEY_BYTES"), "{e}");

    let c = CascadeProgram::compile(&cascade_spec("self.spec.children", None)).expect("compiles");
    let children = |n: usize, name: &str| {
        let list: Vec<Value> = (0..n)
            .map(|i| json!({"apiVersion": "v1", "kind": "Secret", "name": format!("{name}{i}")}))
            .collect();
        json!({"spec": {"children": list}})
    };
    assert_eq!(
        c.bounded_children(&children(MAX_CHILDREN_PER_PARENT, "s"))
            .expect("at the bound")
            .len(),
        MAX_CHILDREN_PER_PARENT
    );
    let e = c
        .bounded_children(&children(20_000, "s"))
        .expect_err("beyond the bound");
    assert_eq!(
        e,
        crate::cascade::CascadeError::TooManyChildren { count: 20_000 }
    );
    assert!(e.to_string().contains("at most 256"), "{e}");
    let e = c
        .bounded_children(&children(1, &"n".repeat(300)))
        .expect_err("no name is that long");
    assert!(e.to_string().contains("`name` is 301 bytes long"), "{e}");

    let refs: Vec<Value> = (0..=MAX_BACK_REFERENCES_PER_CHILD)
        .map(|i| json!({"kind": "DatabaseClaim", "name": format!("c{i}")}))
        .collect();
    let e = c
        .back_references(
            "example.org",
            "XDatabase",
            &json!({"spec": {"claimRef": refs}}),
        )
        .expect("listed")
        .expect_err("too many");
    assert!(
        e.to_string().contains("MAX_BACK_REFERENCES_PER_CHILD"),
        "{e}"
    );
}

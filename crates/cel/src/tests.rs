//! Unit tests of compilation, evaluation, errors and the cost bound.

use serde_json::{Value, json};

use crate::{EvalError, Expression};

fn nfs() -> Value {
    json!({
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephNFS",
        "metadata": {"name": "my-nfs", "namespace": "rook-ceph", "labels": {"app": "nfs"}},
        "spec": {"rados": {"pool": "replicapool", "namespace": "nfs-ns"}, "server": {"active": 1}},
    })
}

fn compile(source: &str) -> Expression {
    Expression::compile("spec.keys.by", source).expect("compiles")
}

fn compile_err(source: &str) -> String {
    Expression::compile("spec.keys.by", source)
        .expect_err("must not compile")
        .to_string()
}

#[test]
fn a_syntax_error_names_the_field_and_the_position() {
    let e = compile_err("[self.spec.rados.pool");
    assert!(e.starts_with("spec.keys.by: syntax error: "), "{e}");
    assert!(e.contains("<input>:1:"), "{e}");
}

#[test]
fn an_empty_expression_is_refused() {
    assert!(compile_err("  ").contains("must not be empty"));
}

#[test]
fn an_unknown_function_is_refused_at_compile_time() {
    let e = compile_err("[self.spec.rados.pool.toUpperCase()]");
    assert!(e.contains("undeclared function 'toUpperCase'"), "{e}");
    let e = compile_err("frobnicate(self) ? [] : []");
    assert!(e.contains("undeclared function 'frobnicate'"), "{e}");
    // Known functions, member, global and qualified, compile.
    compile("[self.metadata.name.lowerAscii(), string(size(self.spec))]");
    compile("lists.range(3).map(i, string(i))");
    compile("self.metadata.name.findAll('[a-z]+')");
    compile("[optional.of(self.metadata.name).orValue('')]");
    compile("self.spec.rados.pool.matches('^[a-z]+$') ? ['x'] : []");
    compile("['a', 'b'].sort()");
}

#[test]
fn an_unbound_identifier_is_refused_with_the_fix() {
    let e = compile_err("[spec.rados.pool]");
    assert!(e.contains("undeclared reference to 'spec'"), "{e}");
    assert!(e.contains("self.spec"), "{e}");
    // Comprehension variables and type names are bound.
    compile("self.spec.rados.map(k, k).filter(k, type(k) == string)");
}

#[test]
fn an_over_long_expression_is_refused() {
    let long = format!("['{}']", "a".repeat(crate::MAX_EXPRESSION_CHARS));
    let e = compile_err(&long);
    assert!(e.contains("characters long, at most 4096"), "{e}");
    // Short enough in characters, too many nodes.
    let wide = format!("[{}].map(x, x)", vec!["1"; 2000].join(","));
    assert!(wide.len() <= crate::MAX_EXPRESSION_CHARS);
    let e = compile_err(&wide);
    assert!(e.contains("too large"), "{e}");
}

#[test]
fn comprehensions_nested_too_deep_are_refused() {
    let e = compile_err("[1].map(a, [1].map(b, [1].map(c, [1].map(d, 'x')))).flatten(3)");
    assert!(e.contains("nested 4 deep, at most 3"), "{e}");
    compile("[1].map(a, [1].map(b, [1].map(c, 'x')))");
}

#[test]
fn each_typed_result_evaluates() {
    let obj = nfs();
    assert_eq!(
        compile("[self.spec.rados.pool, self.metadata.namespace + '/' + self.metadata.name]")
            .eval_strings(&obj),
        Ok(vec!["replicapool".into(), "rook-ceph/my-nfs".into()])
    );
    assert_eq!(
        compile("self.spec.server.active == 1 && 'app' in self.metadata.labels").eval_bool(&obj),
        Ok(true)
    );
    assert_eq!(
        compile("{'pool': self.spec.rados.pool, 'n': self.spec.server.active + 1, 'l': [true, null, 1.5]}")
            .eval_json(&obj),
        Ok(json!({"pool": "replicapool", "n": 2, "l": [true, null, 1.5]}))
    );
}

#[test]
fn a_result_of_the_wrong_type_is_an_error_naming_what_it_got() {
    let obj = nfs();
    let e = compile("self.spec.rados.pool")
        .eval_strings(&obj)
        .expect_err("string, not list");
    assert_eq!(
        e,
        EvalError::TypeMismatch {
            expected: "list(string)".into(),
            got: "string".into()
        }
    );
    let e = compile("['a', self.spec.server.active]")
        .eval_strings(&obj)
        .expect_err("an int element");
    assert_eq!(
        e.to_string(),
        "type mismatch: expected list(string), got a list whose element 1 is int (1)"
    );
    let e = compile("self.spec.rados").eval_bool(&obj).expect_err("map");
    assert_eq!(e.to_string(), "type mismatch: expected bool, got map");
    let e = compile("self.spec.rados.pool + 1")
        .eval_json(&obj)
        .expect_err("no overload");
    assert!(matches!(e, EvalError::Failed(_)), "{e}");
}

#[test]
fn a_missing_field_is_an_error_and_has_is_the_way_to_test() {
    let obj = nfs();
    let e = compile("[self.spec.pool]")
        .eval_strings(&obj)
        .expect_err("no spec.pool");
    assert_eq!(e, EvalError::NoSuchKey { key: "pool".into() });
    assert!(e.to_string().contains("has("), "{e}");
    assert_eq!(
        compile("has(self.spec.pool) ? [self.spec.pool] : []").eval_strings(&obj),
        Ok(vec![])
    );
    assert_eq!(
        compile("[self.spec.?pool.orValue('none')]").eval_strings(&obj),
        Ok(vec!["none".into()])
    );
}

#[test]
fn nested_comprehensions_over_a_large_list_exceed_the_cost_limit() {
    let items: Vec<Value> = (0..2_000).map(|i| json!(format!("item-{i}"))).collect();
    let obj = json!({"spec": {"items": items}});
    // 2,000 × 2,000 = 4,000,000 iterations: over the 1,000,000-unit limit.
    let e = compile("self.spec.items.map(a, self.spec.items.filter(b, a == b)).flatten()")
        .eval_strings(&obj)
        .expect_err("too costly");
    assert_eq!(
        e,
        EvalError::CostLimitExceeded {
            limit: crate::COST_LIMIT
        }
    );
    assert!(e.to_string().starts_with("cost limit exceeded"), "{e}");
    // An exists whose error CEL would absorb still counts as over the limit.
    let e = compile(
        "self.spec.items.exists(a, self.spec.items.exists(b, a + b == 'x') || a == 'item-1999')",
    )
    .eval_bool(&obj)
    .expect_err("too costly even though the answer is true");
    assert_eq!(
        e,
        EvalError::CostLimitExceeded {
            limit: crate::COST_LIMIT
        }
    );
    // One pass over the same list is cheap.
    let ok = compile("self.spec.items.filter(a, a.endsWith('9'))")
        .eval_strings(&obj)
        .expect("within the limit");
    assert_eq!(ok.len(), 200);
}

#[test]
fn values_built_to_explode_exceed_the_cost_limit_before_they_are_built() {
    let obj = nfs();
    let e = compile("lists.range(1000000000).map(i, string(i))")
        .eval_strings(&obj)
        .expect_err("too costly");
    assert_eq!(
        e,
        EvalError::CostLimitExceeded {
            limit: crate::COST_LIMIT
        }
    );
    // Each replace multiplies the string by 1,000: the third would be a 1e9-byte string.
    let thousand = "x".repeat(1000);
    let src = format!(
        "['ab'.replace('', '{thousand}').replace('', '{thousand}').replace('', '{thousand}')]"
    );
    let e = compile(&src).eval_strings(&obj).expect_err("too costly");
    assert_eq!(
        e,
        EvalError::CostLimitExceeded {
            limit: crate::COST_LIMIT
        }
    );
    // A loop doubling a string through concatenation.
    let e = compile("lists.range(30).map(i, self.metadata.name).map(s, s + s + s + s).flatten()")
        .eval_strings(&obj);
    assert!(e.is_ok(), "small: {e:?}");
}

#[test]
fn the_budget_is_per_evaluation() {
    let items: Vec<Value> = (0..600).map(|i| json!(i)).collect();
    let obj = json!({"spec": {"items": items}});
    // 601 + 600 × (601 + 600) = 721,201 units (the outer range; per element, the inner range
    // and 600 charged `a + b`): within the limit once, over it twice, so the second evaluation
    // passes only because each evaluation starts with a fresh budget.
    let expr = compile("self.spec.items.exists(a, self.spec.items.exists(b, a + b < 0))");
    for _ in 0..2 {
        assert_eq!(expr.eval_bool(&obj), Ok(false));
    }
}

#[test]
fn expressions_are_send_sync_and_clone() {
    fn assert_traits<T: Clone + std::fmt::Debug + Send + Sync>() {}
    assert_traits::<Expression>();
}

#[test]
fn only_what_the_expression_reads_is_converted_and_results_are_the_same() {
    use crate::access::Access;
    let access = |src: &str| {
        let program = crate::compile_program(src).expect("parses");
        Access::of(program.expression())
    };
    // Field chains and has() tests: a tree of paths.
    let a = access("has(self.spec.csi) && self.spec.csi.driver == 'x' ? [self.metadata.name] : []");
    let Access::Fields(top) = &a else {
        panic!("fields expected: {a:?}")
    };
    assert_eq!(top.keys().collect::<Vec<_>>(), ["metadata", "spec"]);
    // `self` as a value, by index or rebound: everything.
    assert_eq!(access("[string(self)]"), Access::Whole);
    assert_eq!(access("[self['spec']]"), Access::Whole);
    assert_eq!(access("[1].map(self, self)"), Access::Whole);

    // The pruned conversion gives the same answers, errors included, as the whole object.
    let obj = nfs();
    for (src, expected) in [
        (
            "has(self.spec.rados) ? [self.spec.rados.pool] : []",
            Ok(vec!["replicapool".to_string()]),
        ),
        (
            "has(self.spec.nothing) ? ['x'] : ['y']",
            Ok(vec!["y".to_string()]),
        ),
        ("has(self.spec) ? ['s'] : []", Ok(vec!["s".to_string()])),
        (
            "[self.spec.rados.missing]",
            Err(EvalError::NoSuchKey {
                key: "missing".into(),
            }),
        ),
        (
            "self.metadata.labels.map(k, k + '=' + self.metadata.labels[k])",
            Ok(vec!["app=nfs".to_string()]),
        ),
        (
            "[self.spec.server.active.name]",
            Err(compile("[1.name]").eval_strings(&obj).expect_err("int")),
        ),
        ("[string(size(self.spec))]", Ok(vec!["2".to_string()])),
    ] {
        assert_eq!(compile(src).eval_strings(&obj), expected, "{src}");
    }
}

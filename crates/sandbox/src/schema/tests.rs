//! Table tests of `validate` and `validate_crd_schema`, messages included.

use serde_json::{Value, json};

use super::{validate, validate_crd_schema};
use crate::error::Cause;

/// `(reason, field, message)` of each cause, for compact expectations.
fn triples(causes: &[Cause]) -> Expect {
    causes
        .iter()
        .map(|c| (c.reason.clone(), c.field.clone(), c.message.clone()))
        .collect()
}

/// Expected causes as `(reason, field, message)`.
type Expect = Vec<(String, String, String)>;

fn t(reason: &str, field: &str, message: &str) -> (String, String, String) {
    (reason.into(), field.into(), message.into())
}

/// A root schema with `spec` described by `spec`.
fn with_spec(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

#[test]
fn openapi_keywords() {
    let cases: Vec<(&str, Value, Value, Expect)> = vec![
        (
            "integer given a string",
            json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}),
            json!({"replicas": "3"}),
            vec![t(
                "FieldValueTypeInvalid",
                "spec.replicas",
                "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            )],
        ),
        (
            "integer accepts an integral float, number accepts an integer",
            json!({"type": "object", "properties": {"i": {"type": "integer"}, "n": {"type": "number"}}}),
            json!({"i": 2.0, "n": 3}),
            vec![],
        ),
        (
            "integer refuses a fraction",
            json!({"type": "object", "properties": {"i": {"type": "integer"}}}),
            json!({"i": 2.5}),
            vec![t(
                "FieldValueTypeInvalid",
                "spec.i",
                "Invalid value: \"number\": spec.i in body must be of type integer: \"number\"",
            )],
        ),
        (
            "null needs nullable",
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}),
            json!({"a": null, "b": null}),
            vec![t(
                "FieldValueTypeInvalid",
                "spec.a",
                "Invalid value: \"null\": spec.a in body must be of type string: \"null\"",
            )],
        ),
        (
            "required",
            json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}}}),
            json!({"a": "x"}),
            vec![t("FieldValueRequired", "spec.b", "Required value")],
        ),
        (
            "enum of strings",
            json!({"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}),
            json!({"mode": "x"}),
            vec![t(
                "FieldValueNotSupported",
                "spec.mode",
                "Unsupported value: \"x\": supported values: \"a\", \"b\"",
            )],
        ),
        (
            "enum of integers",
            json!({"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}}),
            json!({"n": 5}),
            vec![t(
                "FieldValueNotSupported",
                "spec.n",
                "Unsupported value: 5: supported values: \"1\", \"2\"",
            )],
        ),
        (
            "maximum and minimum",
            json!({"type": "object", "properties": {
                "n": {"type": "integer", "maximum": 3},
                "m": {"type": "integer", "minimum": 1, "exclusiveMinimum": true},
                "f": {"type": "number", "maximum": 1.5, "exclusiveMaximum": true},
                "g": {"type": "number", "minimum": 2}}}),
            json!({"n": 5, "m": 1, "f": 1.5, "g": 0.5}),
            vec![
                t(
                    "FieldValueInvalid",
                    "spec.n",
                    "Invalid value: 5: spec.n in body should be less than or equal to 3",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.m",
                    "Invalid value: 1: spec.m in body should be greater than 1",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.f",
                    "Invalid value: 1.5: spec.f in body should be less than 1.5",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.g",
                    "Invalid value: 0.5: spec.g in body should be greater than or equal to 2",
                ),
            ],
        ),
        (
            "multipleOf",
            json!({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}}),
            json!({"n": 7}),
            vec![t(
                "FieldValueInvalid",
                "spec.n",
                "Invalid value: 7: spec.n in body should be a multiple of 5",
            )],
        ),
        (
            "string lengths and pattern",
            json!({"type": "object", "properties": {
                "long": {"type": "string", "maxLength": 3},
                "short": {"type": "string", "minLength": 3},
                "pat": {"type": "string", "pattern": "^[a-z]+$"}}}),
            json!({"long": "abcd", "short": "ab", "pat": "A1"}),
            vec![
                t(
                    "FieldValueTooLong",
                    "spec.long",
                    "Too long: may not be more than 3 bytes",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.short",
                    "Invalid value: \"ab\": spec.short in body should be at least 3 chars long",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.pat",
                    "Invalid value: \"A1\": spec.pat in body should match '^[a-z]+$'",
                ),
            ],
        ),
        (
            "maxLength counts characters, not bytes",
            json!({"type": "object", "properties": {"s": {"type": "string", "maxLength": 2}}}),
            json!({"s": "éé"}),
            vec![],
        ),
        (
            "items",
            json!({"type": "object", "properties": {
                "few": {"type": "array", "minItems": 2, "items": {"type": "string"}},
                "many": {"type": "array", "maxItems": 1, "items": {"type": "integer"}}}}),
            json!({"few": [1], "many": [1, 2]}),
            vec![
                t(
                    "FieldValueTypeInvalid",
                    "spec.few[0]",
                    "Invalid value: \"integer\": spec.few[0] in body must be of type string: \"integer\"",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.few",
                    "Invalid value: 1: spec.few in body should have at least 2 items",
                ),
                t(
                    "FieldValueTooMany",
                    "spec.many",
                    "Too many: 2: must have at most 1 item",
                ),
            ],
        ),
        (
            "properties counts stop the object's other checks",
            json!({"type": "object", "properties": {
                "few": {"type": "object", "minProperties": 2, "required": ["x"], "additionalProperties": {"type": "string"}},
                "many": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}}}}),
            json!({"few": {"a": "b"}, "many": {"a": "b", "c": "d"}}),
            vec![
                t(
                    "FieldValueInvalid",
                    "spec.few",
                    "Invalid value: 1: spec.few in body should have at least 2 properties",
                ),
                t(
                    "FieldValueTooMany",
                    "spec.many",
                    "Too many: 2: must have at most 1 item",
                ),
            ],
        ),
        (
            "additionalProperties values are checked under dotted names",
            json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            json!({"labels": {"a": 1}}),
            vec![t(
                "FieldValueTypeInvalid",
                "spec.labels.a",
                "Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
            )],
        ),
        (
            "formats",
            json!({"type": "object", "properties": {
                "t": {"type": "string", "format": "date-time"},
                "ok": {"type": "string", "format": "date-time"},
                "u": {"type": "string", "format": "uuid"},
                "i": {"type": "integer", "format": "int32"},
                "other": {"type": "string", "format": "something-unknown"}}}),
            json!({"t": "yesterday", "ok": "2024-01-02T03:04:05Z", "u": "nope", "i": 7, "other": "x"}),
            vec![
                t(
                    "FieldValueTypeInvalid",
                    "spec.t",
                    "Invalid value: \"yesterday\": spec.t in body must be of type date-time: \"yesterday\"",
                ),
                t(
                    "FieldValueTypeInvalid",
                    "spec.u",
                    "Invalid value: \"nope\": spec.u in body must be of type uuid: \"nope\"",
                ),
            ],
        ),
        (
            "int-or-string",
            json!({"type": "object", "properties": {
                "a": {"x-kubernetes-int-or-string": true},
                "b": {"x-kubernetes-int-or-string": true},
                "c": {"x-kubernetes-int-or-string": true}}}),
            json!({"a": 1, "b": "50%", "c": true}),
            vec![
                t(
                    "FieldValueInvalid",
                    "<nil>",
                    "Invalid value: \"\": spec.c must validate at least one schema (anyOf)",
                ),
                t(
                    "FieldValueTypeInvalid",
                    "spec.c",
                    "Invalid value: \"boolean\": spec.c in body must be of type integer: \"boolean\"",
                ),
            ],
        ),
        (
            "list-type set and map",
            json!({"type": "object", "properties": {
                "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}}}),
            json!({"set": ["a", "b", "a"], "map": [{"name": "x", "v": 1}, {"name": "x", "v": 2}]}),
            vec![
                t(
                    "FieldValueDuplicate",
                    "spec.set[2]",
                    "Duplicate value: \"a\"",
                ),
                t(
                    "FieldValueDuplicate",
                    "spec.map[1]",
                    "Duplicate value: map[string]interface {}{\"name\":\"x\"}",
                ),
            ],
        ),
    ];
    for (name, spec, spec_value, want) in cases {
        let got = validate(&with_spec(spec), &json!({"spec": spec_value}), None);
        assert_eq!(triples(&got), want, "{name}");
    }
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "x-kubernetes-preserve-unknown-fields": true}}}));
    let cases = vec![
        (json!({"apiVersion": "v1", "kind": "Pod"}), vec![]),
        (
            json!({"kind": ""}),
            vec![
                t(
                    "FieldValueRequired",
                    "spec.template.apiVersion",
                    "Required value: must not be empty",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.template.kind",
                    "Invalid value: \"\": must not be empty",
                ),
            ],
        ),
    ];
    for (template, want) in cases {
        let got = validate(&schema, &json!({"spec": {"template": template}}), None);
        assert_eq!(triples(&got), want, "{template}");
    }
}

#[test]
fn ratcheting_skips_unchanged_values_on_update() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 1},
        "b": {"type": "string", "maxLength": 1}}}));
    let old = json!({"spec": {"a": "too long", "b": "x"}});
    let new = json!({"spec": {"a": "too long", "b": "yy"}});
    assert_eq!(
        triples(&validate(&schema, &new, Some(&old))),
        vec![t(
            "FieldValueTooLong",
            "spec.b",
            "Too long: may not be more than 1 byte"
        )]
    );
    assert_eq!(validate(&schema, &new, None).len(), 2);
}

fn rule_schema(rules: Value) -> Value {
    with_spec(json!({
        "type": "object",
        "x-kubernetes-validations": rules,
        "properties": {
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "name": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "ratio": {"type": "number"},
            "my-field": {"type": "string"},
            "when": {"type": "string", "format": "date-time"}
        }
    }))
}

#[test]
fn cel_rules() {
    let spec = json!({"min": 5, "max": 3, "name": "Web", "tags": ["b", "a"], "ratio": 1,
                      "my-field": "v", "when": "2024-01-02T03:04:05Z"});
    let cases: Vec<(&str, Value, Expect)> = vec![
        ("passing rule", json!([{"rule": "self.min <= 10"}]), vec![]),
        (
            "default message",
            json!([{"rule": "self.min <= self.max"}]),
            vec![t(
                "FieldValueInvalid",
                "spec",
                "Invalid value: \"object\": failed rule: self.min <= self.max",
            )],
        ),
        (
            "message, reason and fieldPath",
            json!([{"rule": "self.min <= self.max", "message": " min must not exceed max ",
                    "reason": "FieldValueForbidden", "fieldPath": ".min"}]),
            vec![t(
                "FieldValueForbidden",
                "spec.min",
                "Forbidden: min must not exceed max",
            )],
        ),
        (
            "required and duplicate reasons",
            json!([{"rule": "false", "message": "need it", "reason": "FieldValueRequired"},
                   {"rule": "false", "message": "dup", "reason": "FieldValueDuplicate"}]),
            vec![
                t("FieldValueRequired", "spec", "Required value: need it"),
                t("FieldValueDuplicate", "spec", "Duplicate value: \"object\""),
            ],
        ),
        (
            "messageExpression",
            json!([{"rule": "self.min <= self.max", "message": "fallback",
                    "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)"}]),
            vec![t(
                "FieldValueInvalid",
                "spec",
                "Invalid value: \"object\": min 5 exceeds max 3",
            )],
        ),
        (
            "blank messageExpression falls back to message",
            json!([{"rule": "false", "message": "fallback", "messageExpression": "' '"}]),
            vec![t(
                "FieldValueInvalid",
                "spec",
                "Invalid value: \"object\": fallback",
            )],
        ),
        (
            "missing field is an evaluation error",
            json!([{"rule": "self.nope == 1"}]),
            vec![t(
                "FieldValueInvalid",
                "spec",
                "Invalid value: \"object\": no such key: nope evaluating rule: self.nope == 1",
            )],
        ),
        (
            "runtime errors read like cel-go's",
            json!([{"rule": "self.min / 0 == 1"},
                   {"rule": "self.tags[5] == 'a'", "message": "bad tag"},
                   {"rule": "self.name + 1 == 'x'"}]),
            vec![
                t(
                    "FieldValueInvalid",
                    "spec",
                    "Invalid value: \"object\": division by zero evaluating rule: self.min / 0 == 1",
                ),
                t(
                    "FieldValueInvalid",
                    "spec",
                    "Invalid value: \"object\": index out of bounds: 5 evaluating rule: bad tag",
                ),
                t(
                    "FieldValueInvalid",
                    "spec",
                    "Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.name + 1 == 'x'",
                ),
            ],
        ),
        (
            "has, macros and string functions",
            json!([{"rule": "has(self.name) && !has(self.nope)"},
                   {"rule": "self.tags.all(t, t.size() == 1) && self.tags.exists(t, t == 'a')"},
                   {"rule": "self.name.lowerAscii() == 'web' && self.name.startsWith('W')"},
                   {"rule": "self.name.matches('^[A-Z][a-z]+$')"},
                   {"rule": "self.tags.map(t, t + 'x') == ['bx', 'ax'] && self.tags.filter(t, t > 'a') == ['b']"}]),
            vec![],
        ),
        (
            "Kubernetes list and regex library",
            json!([{"rule": "!self.tags.isSorted() && ['a', 'b'].isSorted()"},
                   {"rule": "[1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3"},
                   {"rule": "self.tags.indexOf('a') == 1 && ['a', 'a'].lastIndexOf('a') == 1"},
                   {"rule": "'abc123'.find('[0-9]+') == '123' && 'a1b2'.findAll('[0-9]') == ['1', '2']"}]),
            vec![],
        ),
        (
            "schema types: number is a double, date-time a timestamp, dashes escaped",
            json!([{"rule": "self.ratio == 1.0"},
                   {"rule": "self.when < timestamp('2025-01-01T00:00:00Z')"},
                   {"rule": "self.my__dash__field == 'v'"}]),
            vec![],
        ),
    ];
    for (name, rules, want) in cases {
        let got = validate(&rule_schema(rules), &json!({"spec": spec}), None);
        assert_eq!(triples(&got), want, "{name}");
    }
}

#[test]
fn cel_rule_paths_on_root_items_and_maps() {
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('ok')", "message": "bad name"}],
        "properties": {
            "spec": {"type": "object", "properties": {
                "items": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self != 'bad'"}]}},
                "byName": {"type": "object", "additionalProperties": {"type": "integer",
                    "x-kubernetes-validations": [{"rule": "self > 0"}]}}
            }}
        }
    });
    let object = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "nope"},
                        "spec": {"items": ["good", "bad"], "byName": {"a": 1, "b": 0}}});
    assert_eq!(
        triples(&validate(&schema, &object, None)),
        vec![
            t(
                "FieldValueInvalid",
                "<nil>",
                "Invalid value: \"object\": bad name"
            ),
            t(
                "FieldValueInvalid",
                "spec.items[1]",
                "Invalid value: \"string\": failed rule: self != 'bad'"
            ),
            t(
                "FieldValueInvalid",
                "spec.byName[b]",
                "Invalid value: \"integer\": failed rule: self > 0"
            ),
        ]
    );
}

#[test]
fn transition_rules_need_an_old_value() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "immutable": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "Value is immutable"}]},
        "grow": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": true,
             "message": "may only grow"}]}
    }}));
    let old = json!({"spec": {"immutable": "a", "grow": 5}});
    let empty = json!({"spec": {}});
    let cases = vec![
        (json!({"spec": {"immutable": "a", "grow": 1}}), None, vec![]),
        (
            json!({"spec": {"immutable": "b", "grow": 4}}),
            Some(&old),
            vec![
                t(
                    "FieldValueInvalid",
                    "spec.immutable",
                    "Invalid value: \"string\": Value is immutable",
                ),
                t(
                    "FieldValueInvalid",
                    "spec.grow",
                    "Invalid value: \"integer\": may only grow",
                ),
            ],
        ),
        (
            json!({"spec": {"immutable": "a", "grow": 6}}),
            Some(&old),
            vec![],
        ),
        // A field absent from the old object has no oldSelf: only optionalOldSelf rules run.
        (
            json!({"spec": {"immutable": "z", "grow": 1}}),
            Some(&empty),
            vec![],
        ),
    ];
    for (object, old, want) in cases {
        assert_eq!(triples(&validate(&schema, &object, old)), want, "{object}");
    }
}

#[test]
fn transition_rules_correlate_map_list_items_by_key() {
    let schema = with_spec(json!({"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                  "items": {"type": "object",
                            "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}],
                            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}}}));
    let old = json!({"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}});
    let new = json!({"spec": {"ports": [{"name": "b", "port": 3}, {"name": "c", "port": 9}]}});
    assert_eq!(
        triples(&validate(&schema, &new, Some(&old))),
        vec![t(
            "FieldValueInvalid",
            "spec.ports[0]",
            "Invalid value: \"object\": port is immutable"
        )]
    );
}

#[test]
fn type_errors_block_cel_rules() {
    let schema = rule_schema(json!([{"rule": "self.min <= self.max"}]));
    let got = validate(&schema, &json!({"spec": {"min": "x", "max": 1}}), None);
    assert_eq!(
        triples(&got),
        vec![
            t(
                "FieldValueTypeInvalid",
                "spec.min",
                "Invalid value: \"string\": spec.min in body must be of type integer: \"string\""
            ),
            t(
                "FieldValueInvalid",
                "<nil>",
                "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
            ),
        ]
    );
}

#[test]
fn crd_schema_checks() {
    let p = "spec.validation.openAPIV3Schema";
    let cases: Vec<(&str, Value, Expect)> = vec![
        (
            "a good schema",
            json!({"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": "self.a > 0", "messageExpression": "'a is ' + string(self.a)"}],
                "properties": {"a": {"type": "integer"}, "p": {"x-kubernetes-int-or-string": true},
                               "free": {"x-kubernetes-preserve-unknown-fields": true},
                               "l": {"type": "array", "items": {"type": "string"}}}}}}),
            vec![],
        ),
        (
            "missing types",
            json!({"properties": {"spec": {"properties": {"l": {"type": "array", "items": {}}, "m": {"type": "array"}}}}}),
            vec![
                t(
                    "FieldValueRequired",
                    &format!("{p}.type"),
                    "Required value: must not be empty at the root",
                ),
                t(
                    "FieldValueRequired",
                    &format!("{p}.properties[spec].type"),
                    "Required value: must not be empty for specified object fields",
                ),
                t(
                    "FieldValueRequired",
                    &format!("{p}.properties[spec].properties[l].items.type"),
                    "Required value: must not be empty for specified array items",
                ),
                t(
                    "FieldValueRequired",
                    &format!("{p}.properties[spec].properties[m].items"),
                    "Required value: must be specified",
                ),
            ],
        ),
        (
            "forbidden keywords",
            json!({"type": "object", "properties": {"spec": {"type": "object", "$ref": "#/x",
                   "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
            vec![
                t(
                    "FieldValueForbidden",
                    &format!("{p}.properties[spec].$ref"),
                    "Forbidden: $ref is not supported",
                ),
                t(
                    "FieldValueForbidden",
                    &format!("{p}.properties[spec].additionalProperties"),
                    "Forbidden: additionalProperties and properties are mutual exclusive",
                ),
            ],
        ),
        (
            "rules that do not compile",
            json!({"type": "object", "properties": {"spec": {"type": "object",
                "x-kubernetes-validations": [{"rule": ""}, {"rule": "self.a >"}, {"rule": "true", "reason": "Nope"}]}}}),
            vec![
                t(
                    "FieldValueRequired",
                    &format!("{p}.properties[spec].x-kubernetes-validations[0].rule"),
                    "Required value",
                ),
                (
                    "FieldValueInvalid".into(),
                    format!("{p}.properties[spec].x-kubernetes-validations[1].rule"),
                    String::new(),
                ),
                t(
                    "FieldValueNotSupported",
                    &format!("{p}.properties[spec].x-kubernetes-validations[2].reason"),
                    "Unsupported value: \"Nope\": supported values: \"FieldValueInvalid\", \"FieldValueForbidden\", \"FieldValueRequired\", \"FieldValueDuplicate\"",
                ),
            ],
        ),
        (
            // Measured against kube-apiserver v1.32.13 (differential case `crd/crd-invalid-default`).
            "a default its own schema refuses",
            json!({"type": "object", "properties": {
                "n": {"type": "integer", "default": "x"},
                "ok": {"type": "integer", "default": 3},
                "l": {"type": "array", "items": {"type": "string", "maxLength": 2, "default": "abc"}}}}),
            vec![
                t(
                    "FieldValueTypeInvalid",
                    &format!("{p}.properties[n].default"),
                    "Invalid value: \"string\":   in body must be of type integer: \"string\"",
                ),
                t(
                    "FieldValueTooLong",
                    &format!("{p}.properties[l].items.default"),
                    "Too long: may not be more than 2 bytes",
                ),
            ],
        ),
    ];
    for (name, schema, want) in cases {
        let got = triples(&validate_crd_schema(&schema));
        assert_eq!(got.len(), want.len(), "{name}: {got:#?}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!((&g.0, &g.1), (&w.0, &w.1), "{name}");
            if w.2.is_empty() {
                // The compiler's own text follows the fixed prefix.
                assert!(
                    g.2.starts_with(
                        "Invalid value: \"self.a >\": compilation failed: ERROR: <input>:1:"
                    ),
                    "{name}: {}",
                    g.2
                );
            } else {
                assert_eq!(g.2, w.2, "{name}");
            }
        }
    }
}

/// cel-go refuses reserved words as identifiers; a field named `namespace` must be written
/// `__namespace__` in a rule, and a string literal may still contain the word.
#[test]
fn reserved_identifiers_do_not_compile() {
    let schema = |rule: &str| {
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"namespace": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": rule}]}}})
    };
    let errs = validate_crd_schema(&schema("has(self.namespace)"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .message
            .ends_with("compilation failed: ERROR: <input>:1:10: reserved identifier: namespace"),
        "{}",
        errs[0].message
    );
    assert!(
        validate_crd_schema(&schema("has(self.__namespace__) || 'namespace' == 'x'")).is_empty()
    );
    let obj = json!({"spec": {"namespace": "a"}});
    let rule_ok = schema("self.__namespace__ == 'a'");
    assert!(validate(&rule_ok, &obj, None).is_empty());
}

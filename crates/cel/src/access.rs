//! What of `self` an expression can read, so that evaluation converts only that part of the
//! object to CEL.
//!
//! Converting a whole object (every map, every string) costs more than evaluating a typical key
//! expression: a 1.5 KB PersistentVolume is ~60 allocations, of which the Rook pack's PV keys
//! read the `spec.csi` subtree only. At compile time the expression's field selections on
//! `self` are collected as a tree of paths; a path ends where the chain ends (`self.spec.csi`
//! passed to a function, indexed, iterated or tested with `has()`), and the whole subtree below
//! it is kept. Everything else is left out: no expression can observe it, so results and errors
//! (`no such key`, `has()`) are the same as with the whole object. An expression that uses
//! `self` otherwise than through field selection (`self` alone, `self['spec']`, a comprehension
//! variable named `self`) reads everything.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::Value as CelValue;
use cel::common::ast::{Expr, IdedExpr};
use cel::objects::{Key, Map as CelMap};
use serde_json::Value;

use crate::env::json_to_cel;

/// The part of an object an expression reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Access {
    /// The whole value.
    Whole,
    /// Only these fields (each with what is read of it).
    Fields(BTreeMap<String, Access>),
}

impl Access {
    /// What `expr` reads of `self`.
    pub(crate) fn of(expr: &IdedExpr) -> Access {
        let mut access = Access::Fields(BTreeMap::new());
        if collect(expr, &mut access) {
            access
        } else {
            Access::Whole
        }
    }

    fn add(&mut self, path: &[&str]) {
        let Access::Fields(fields) = self else {
            return;
        };
        match path.split_first() {
            None => *self = Access::Whole,
            Some((first, rest)) => fields
                .entry((*first).to_string())
                .or_insert_with(|| Access::Fields(BTreeMap::new()))
                .add(rest),
        }
    }

    /// Keeps the fields along `path` without reading the last one's value: a `has()` test.
    fn touch(&mut self, path: &[&str]) {
        let Access::Fields(fields) = self else {
            return;
        };
        if let Some((first, rest)) = path.split_first() {
            fields
                .entry((*first).to_string())
                .or_insert_with(|| Access::Fields(BTreeMap::new()))
                .touch(rest);
        }
    }

    /// Converts the part of `value` this access reads.
    pub(crate) fn to_cel(&self, value: &Value) -> CelValue {
        match (self, value) {
            (Access::Fields(fields), Value::Object(map)) => {
                let out: std::collections::HashMap<Key, CelValue> = fields
                    .iter()
                    .filter_map(|(name, access)| {
                        map.get(name)
                            .map(|v| (Key::String(Arc::new(name.clone())), access.to_cel(v)))
                    })
                    .collect();
                CelValue::Map(CelMap { map: Arc::new(out) })
            }
            // Whole, or a selection on something that is not a map: selecting on it fails the
            // same way whatever it holds, so it is converted as it is.
            _ => json_to_cel(value),
        }
    }
}

/// A chain of field selections on `self`, outermost last: `self.spec.csi` is `[spec, csi]`.
fn self_path(expr: &IdedExpr) -> Option<Vec<&str>> {
    match &expr.expr {
        Expr::Ident(name) if name == "self" => Some(Vec::new()),
        Expr::Select(select) if !select.test => {
            let mut path = self_path(&select.operand)?;
            path.push(select.field.as_str());
            Some(path)
        }
        _ => None,
    }
}

/// Adds what `expr` reads of `self` to `access`; false when it may read anything.
fn collect(expr: &IdedExpr, access: &mut Access) -> bool {
    if let Some(path) = self_path(expr) {
        if path.is_empty() {
            // `self` used as a value.
            return false;
        }
        access.add(&path);
        return true;
    }
    match &expr.expr {
        Expr::Select(select) if select.test => match self_path(&select.operand) {
            // `has(self.a.b)` needs to know whether `b` is in `self.a`, not what it holds.
            Some(mut path) => {
                path.push(select.field.as_str());
                access.touch(&path);
                true
            }
            None => collect(&select.operand, access),
        },
        Expr::Select(select) => collect(&select.operand, access),
        Expr::Comprehension(c) => {
            if c.iter_var == "self"
                || c.iter_var2.as_deref() == Some("self")
                || c.accu_var == "self"
            {
                return false;
            }
            [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .all(|e| collect(e, access))
        }
        Expr::Call(call) => {
            call.target.iter().all(|t| collect(t, access))
                && call.args.iter().all(|a| collect(a, access))
        }
        Expr::List(list) => list.elements.iter().all(|e| collect(e, access)),
        Expr::Map(map) => map.entries.iter().all(|e| match &e.expr {
            cel::common::ast::EntryExpr::MapEntry(m) => {
                collect(&m.key, access) && collect(&m.value, access)
            }
            cel::common::ast::EntryExpr::StructField(f) => collect(&f.value, access),
        }),
        Expr::Struct(s) => s.entries.iter().all(|e| match &e.expr {
            cel::common::ast::EntryExpr::MapEntry(m) => {
                collect(&m.key, access) && collect(&m.value, access)
            }
            cel::common::ast::EntryExpr::StructField(f) => collect(&f.value, access),
        }),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => true,
    }
}

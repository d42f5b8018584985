//! Bounding what one evaluation may cost.
//!
//! Kubernetes bounds every CEL expression with a cost limit, estimated statically from the
//! schema's `maxItems`/`maxLength` and tracked at runtime (one unit per comprehension
//! iteration, string and list operations by the size they traverse or build, 1,000,000 units
//! per expression). The `cel` crate has no cost tracking, so Lien builds its own, in two parts:
//!
//! **Static** (at compile time, before anything runs):
//! - at most [`MAX_NODES`] AST nodes after macro expansion (the source itself is at most
//!   [`crate::MAX_EXPRESSION_CHARS`] characters), so the work of one pass over the expression
//!   is a constant;
//! - comprehensions (`map`, `filter`, `all`, `exists`, `exists_one`) nested at most
//!   [`MAX_COMPREHENSION_DEPTH`] deep, since nesting multiplies: three levels over a 100-element
//!   list already iterate a million times. Deeper nesting is refused with a message saying so.
//!
//! **Runtime** (the expression is rewritten at compile time so that evaluation meters itself):
//! - every comprehension's range is charged its size before the loop starts (an upper bound on
//!   the iterations: `exists` may stop early);
//! - every function or operator call that can build a value (`+`, `replace`, `join`, `split`,
//!   `format`, `flatten`, `lists.range`, conversions, ...) is charged 1 plus the size of its
//!   result: one unit per list or map element, one per 10 bytes of a string, as Kubernetes'
//!   string traversal factor of 0.1. Only the operators that return booleans or an existing
//!   value (`&&`, `||`, `!`, `?:`, comparisons, `in`, indexing, `size`, `has`) are not charged;
//! - the two calls whose result could be large before it is charged are charged up front:
//!   `lists.range(n)` is charged `n` before it allocates, and `s.replace(old, new)` is charged
//!   for its worst-case result `(size(s) + 1) × size(new)` before it runs.
//!
//! One evaluation may spend [`COST_LIMIT`] units, Kubernetes' per-expression limit. Past it the
//! charging call fails, which stops the evaluation (a failure inside `exists`/`all` that CEL's
//! error absorption would hide still marks the evaluation as over budget: the result is
//! [`crate::EvalError::CostLimitExceeded`] whatever the expression returned). What it protects
//! against: an expression that multiplies its input (nested comprehensions over a large list,
//! repeated concatenation, `lists.range(1000000000)`), evaluated for every object of a kind by
//! the controller, can take neither unbounded time nor unbounded memory; each evaluation costs
//! at most about `COST_LIMIT` elementary steps, each bounded by the size of the expression.
//!
//! The budget is a thread-local counter: evaluation is synchronous and never re-entrant, so the
//! counter set before `Value::resolve` and read after it belongs to that evaluation alone.

use std::cell::Cell;

use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelBytes, CelInt, CelString, DYN_TYPE, INT_TYPE};
use cel::common::value::CowVal;
use cel::{Context, Env, ExecutionError, Value as CelValue};

/// The units one evaluation may spend (Kubernetes' `PerCallLimit`).
pub const COST_LIMIT: u64 = 1_000_000;

/// The most AST nodes an expression may have once its macros are expanded.
pub const MAX_NODES: usize = 2_000;

/// The deepest comprehensions may nest.
pub const MAX_COMPREHENSION_DEPTH: usize = 3;

const RANGE: &str = "@lien_range";
const SIZE: &str = "@lien_size";
const PRECHARGE: &str = "@lien_precharge";
const REPLACE_GUARD: &str = "@lien_replace_guard";

thread_local! {
    static SPENT: Cell<u64> = const { Cell::new(0) };
}

fn charge(units: u64) -> Result<(), ExecutionError> {
    let spent = SPENT.with(|s| {
        let total = s.get().saturating_add(units);
        s.set(total);
        total
    });
    if spent > COST_LIMIT {
        Err(ExecutionError::function_error(
            "cost",
            format!("cost limit exceeded ({COST_LIMIT} units)"),
        ))
    } else {
        Ok(())
    }
}

/// Runs one evaluation with a fresh budget; `Err(spent)` when it went over the limit, whatever
/// the evaluation returned.
pub(crate) fn metered<T>(evaluate: impl FnOnce() -> T) -> Result<T, u64> {
    SPENT.with(|s| s.set(0));
    let out = evaluate();
    let spent = SPENT.with(|s| s.replace(0));
    if spent > COST_LIMIT {
        Err(spent)
    } else {
        Ok(out)
    }
}

/// The units a value is charged: its elements, or one per 10 bytes of a string.
fn size_units(value: &CowVal<'_, '_>) -> u64 {
    if let Some(s) = value.downcast_ref::<CelString>() {
        return s.inner().len() as u64 / 10;
    }
    if let Some(b) = value.downcast_ref::<CelBytes>() {
        return b.inner().len() as u64 / 10;
    }
    value
        .as_sizer()
        .map(|s| (*s.size().inner()).max(0) as u64)
        .unwrap_or(0)
}

type CelResult<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn first<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    args.into_iter()
        .next()
        .ok_or_else(ExecutionError::missing_argument_or_target)
}

/// `@lien_range(r)`: a comprehension's range, charged its size.
fn range<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let value = first(args)?;
    let units = value
        .as_sizer()
        .map(|s| (*s.size().inner()).max(0) as u64)
        .unwrap_or(0);
    charge(1 + units)?;
    Ok(value)
}

/// `@lien_size(v)`: a built value, charged 1 plus its size.
fn size<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let value = first(args)?;
    charge(1 + size_units(&value))?;
    Ok(value)
}

/// `@lien_precharge(n)`: the argument of `lists.range`, charged `n` before the list exists.
fn precharge<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let value = first(args)?;
    if let Some(n) = value.downcast_ref::<CelInt>() {
        charge((*n.inner()).max(0) as u64)?;
    }
    Ok(value)
}

/// `@lien_replace_guard(s, new)`: the target of `s.replace(old, new)`, charged the worst-case
/// size of the result before it is built.
fn replace_guard<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> CelResult<'b, 'v> {
    let mut args = args.into_iter();
    let target = args
        .next()
        .ok_or_else(ExecutionError::missing_argument_or_target)?;
    if let (Some(s), Some(new)) = (
        target.downcast_ref::<CelString>(),
        args.next()
            .as_ref()
            .and_then(|n| n.downcast_ref::<CelString>().map(|n| n.inner().len())),
    ) {
        let worst = (s.inner().len() as u64 + 1).saturating_mul(new as u64);
        charge(worst / 10)?;
    }
    Ok(target)
}

pub(crate) fn add_cost_functions(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(RANGE, "lien_range_dyn", vec![DYN_TYPE], range)?;
    env.add_overload(SIZE, "lien_size_dyn", vec![DYN_TYPE], size)?;
    env.add_overload(PRECHARGE, "lien_precharge_int", vec![INT_TYPE], precharge)?;
    env.add_overload(PRECHARGE, "lien_precharge_dyn", vec![DYN_TYPE], precharge)?;
    env.add_overload(
        REPLACE_GUARD,
        "lien_replace_guard_dyn_dyn",
        vec![DYN_TYPE, DYN_TYPE],
        replace_guard,
    )?;
    Ok(())
}

// ---- static checks ------------------------------------------------------------------------

/// What the static pass found wrong, as a message for the user.
pub(crate) fn check(expr: &IdedExpr) -> Result<(), String> {
    let nodes = count_nodes(expr);
    if nodes > MAX_NODES {
        return Err(format!(
            "the expression is too large: {nodes} nodes once its macros are expanded, at most {MAX_NODES}; split it or simplify it"
        ));
    }
    let depth = comprehension_depth(expr);
    if depth > MAX_COMPREHENSION_DEPTH {
        return Err(format!(
            "comprehensions (map, filter, all, exists, exists_one) are nested {depth} deep, at most {MAX_COMPREHENSION_DEPTH}: nesting multiplies the cost of evaluation; flatten the expression"
        ));
    }
    let mut scope = vec!["self".to_string()];
    check_references(expr, &mut scope)
}

fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) => call
            .target
            .iter()
            .map(|t| t.as_ref())
            .chain(call.args.iter())
            .collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(map) => map
            .entries
            .iter()
            .flat_map(|e| entry_children(&e.expr))
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|e| entry_children(&e.expr))
            .collect(),
        Expr::Select(select) => vec![select.operand.as_ref()],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => vec![],
    }
}

fn entry_children(entry: &EntryExpr) -> Vec<&IdedExpr> {
    match entry {
        EntryExpr::StructField(f) => vec![&f.value],
        EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
    }
}

fn count_nodes(expr: &IdedExpr) -> usize {
    1 + children(expr).into_iter().map(count_nodes).sum::<usize>()
}

/// How deep comprehensions nest: the range and initial value of a comprehension are evaluated
/// once, outside its loop; its condition, step and result are inside.
fn comprehension_depth(expr: &IdedExpr) -> usize {
    match &expr.expr {
        Expr::Comprehension(c) => {
            let inside = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .map(comprehension_depth)
                .max()
                .unwrap_or(0);
            let outside = comprehension_depth(&c.iter_range).max(comprehension_depth(&c.accu_init));
            (1 + inside).max(outside)
        }
        _ => children(expr)
            .into_iter()
            .map(comprehension_depth)
            .max()
            .unwrap_or(0),
    }
}

/// Type names CEL lets an expression use as values (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "timestamp",
    "type",
    "uint",
    "optional_type",
];

/// Every identifier is bound (`self`, a comprehension variable, a type name) and every function
/// exists in the environment.
fn check_references(expr: &IdedExpr, scope: &mut Vec<String>) -> Result<(), String> {
    match &expr.expr {
        Expr::Ident(name) => {
            if name.starts_with('@')
                || scope.iter().any(|s| s == name)
                || TYPE_NAMES.contains(&name.as_str())
            {
                Ok(())
            } else {
                Err(format!(
                    "undeclared reference to '{name}': only `self` (the object) is bound; write `self.{name}` for a field of the object"
                ))
            }
        }
        Expr::Call(call) => {
            let qualified = check_function(call)?;
            if let Some(target) = &call.target
                && !qualified
            {
                check_references(target, scope)?;
            }
            call.args
                .iter()
                .try_for_each(|a| check_references(a, scope))
        }
        Expr::Comprehension(c) => {
            check_references(&c.iter_range, scope)?;
            check_references(&c.accu_init, scope)?;
            let pushed = 2 + usize::from(c.iter_var2.is_some());
            scope.push(c.iter_var.clone());
            scope.push(c.accu_var.clone());
            if let Some(v) = &c.iter_var2 {
                scope.push(v.clone());
            }
            let inner = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .try_for_each(|e| check_references(e, scope));
            scope.truncate(scope.len() - pushed);
            inner
        }
        _ => children(expr)
            .into_iter()
            .try_for_each(|c| check_references(c, scope)),
    }
}

fn is_operator(name: &str) -> bool {
    !name.starts_with(|c: char| c.is_ascii_alphabetic())
}

fn null_literal() -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Literal(LiteralValue::Null),
    }
}

/// Whether `call` names a function of the environment: it is called with no arguments in an
/// empty context, where an unknown function fails as an undeclared reference to its own name
/// and a known one with anything else (no matching overload, most likely). Returns whether the
/// call is to a qualified function (`lists.range`), whose target is a namespace, not a value.
fn check_function(call: &CallExpr) -> Result<bool, String> {
    if is_operator(&call.func_name) {
        return Ok(false);
    }
    let probe = |target: Option<IdedExpr>| {
        let expr = IdedExpr {
            id: 0,
            expr: Expr::Call(CallExpr {
                func_name: call.func_name.clone(),
                target: target.map(Box::new),
                args: vec![],
            }),
        };
        let ctx = Context::with_env(crate::env::env());
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            CelValue::resolve(&expr, &ctx)
        }))
        .unwrap_or_else(|_| Err(ExecutionError::InternalError("panic".into())))
    };
    let unknown = |r: &Result<CelValue, ExecutionError>| matches!(r, Err(ExecutionError::UndeclaredReference(n)) if n.as_str() == call.func_name);
    let Some(target) = &call.target else {
        return if unknown(&probe(None)) {
            Err(unknown_function(&call.func_name))
        } else {
            Ok(false)
        };
    };
    if target.expr.qualified_name_root_public().is_some() {
        let as_written = probe(Some(target.as_ref().clone()));
        if unknown(&as_written) {
            return Err(unknown_function(&call.func_name));
        }
        if !matches!(as_written, Err(ExecutionError::UndeclaredReference(_))) {
            // The target named a function namespace: `lists.range(...)`.
            return Ok(true);
        }
    }
    if unknown(&probe(Some(null_literal()))) {
        Err(unknown_function(&call.func_name))
    } else {
        Ok(false)
    }
}

trait QualifiedRoot {
    fn qualified_name_root_public(&self) -> Option<&str>;
}

impl QualifiedRoot for Expr {
    fn qualified_name_root_public(&self) -> Option<&str> {
        let mut expr = self;
        loop {
            match expr {
                Expr::Ident(name) => return Some(name),
                Expr::Select(select) if !select.test => expr = &select.operand.expr,
                _ => return None,
            }
        }
    }
}

fn unknown_function(name: &str) -> String {
    format!(
        "undeclared function '{name}': not in Lien's CEL library (the CEL standard library, the strings and lists extensions, and Kubernetes' isSorted, sum, min, max, indexOf, lastIndexOf, find, findAll); check its spelling"
    )
}

// ---- the metering rewrite -----------------------------------------------------------------

/// Calls that return a boolean or a value that already exists: not charged.
const UNCHARGED: &[&str] = &[
    "_&&_",
    "_||_",
    "!_",
    "_?_:_",
    "@not_strictly_false",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "@in",
    "_[_]",
    "_[?_]",
    "_?._",
    "size",
    "has",
    "startsWith",
    "endsWith",
    "contains",
    "matches",
];

fn wrap(func: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Call(CallExpr {
            func_name: func.to_string(),
            target: None,
            args,
        }),
    }
}

/// Rewrites `expr` so that evaluating it charges its cost (see the module doc).
pub(crate) fn meter(expr: IdedExpr) -> IdedExpr {
    let IdedExpr { id, expr } = expr;
    match expr {
        Expr::Comprehension(c) => {
            let ComprehensionExpr {
                iter_range,
                iter_var,
                iter_var2,
                accu_var,
                accu_init,
                loop_cond,
                loop_step,
                result,
            } = *c;
            IdedExpr {
                id,
                expr: Expr::Comprehension(Box::new(ComprehensionExpr {
                    iter_range: wrap(RANGE, vec![meter(iter_range)]),
                    iter_var,
                    iter_var2,
                    accu_var,
                    accu_init: meter(accu_init),
                    // The shapes of the condition and step are left as the macros wrote them
                    // (only their operands are rewritten), so that the interpreter still
                    // recognises `map`/`filter` and `all`/`exists` and runs them in place.
                    loop_cond: meter(loop_cond),
                    loop_step: meter(loop_step),
                    result: meter(result),
                })),
            }
        }
        Expr::Call(call) => {
            let CallExpr {
                func_name,
                target,
                args,
            } = call;
            // A macro's accumulator step (`@result + [x]`, `@result + 1`) is charged through
            // the comprehension's range; it must keep its shape.
            let accumulates = func_name == "_+_"
                && matches!(args.first().map(|a| &a.expr), Some(Expr::Ident(n)) if n.starts_with('@'));
            let mut args: Vec<IdedExpr> = args.into_iter().map(meter).collect();
            let mut target = target.map(|t| Box::new(meter(*t)));
            if func_name == "range" || func_name == "lists.range" {
                args = args.into_iter().map(|a| wrap(PRECHARGE, vec![a])).collect();
            }
            if func_name == "replace"
                && let (Some(t), Some(new)) = (target.take(), args.get(1).cloned())
            {
                target = Some(Box::new(wrap(REPLACE_GUARD, vec![*t, new])));
            }
            let call = IdedExpr {
                id,
                expr: Expr::Call(CallExpr {
                    func_name: func_name.clone(),
                    target,
                    args,
                }),
            };
            if accumulates || UNCHARGED.contains(&func_name.as_str()) {
                call
            } else {
                wrap(SIZE, vec![call])
            }
        }
        Expr::List(mut list) => {
            list.elements = list.elements.into_iter().map(meter).collect();
            IdedExpr {
                id,
                expr: Expr::List(list),
            }
        }
        Expr::Map(mut map) => {
            for entry in &mut map.entries {
                meter_entry(&mut entry.expr);
            }
            IdedExpr {
                id,
                expr: Expr::Map(map),
            }
        }
        Expr::Struct(mut s) => {
            for entry in &mut s.entries {
                meter_entry(&mut entry.expr);
            }
            IdedExpr {
                id,
                expr: Expr::Struct(s),
            }
        }
        Expr::Select(mut select) => {
            // A name (`self.spec.x`) is resolved as one qualified name; rewriting its operand
            // would change nothing but speed, and select chains build nothing.
            let operand = std::mem::take(select.operand.as_mut());
            *select.operand = meter(operand);
            IdedExpr {
                id,
                expr: Expr::Select(select),
            }
        }
        other @ (Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified) => {
            IdedExpr { id, expr: other }
        }
    }
}

fn meter_entry(entry: &mut EntryExpr) {
    match entry {
        EntryExpr::StructField(f) => f.value = meter(std::mem::take(&mut f.value)),
        EntryExpr::MapEntry(e) => {
            e.key = meter(std::mem::take(&mut e.key));
            e.value = meter(std::mem::take(&mut e.value));
        }
    }
}

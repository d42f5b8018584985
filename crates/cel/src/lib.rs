//! Lien's one CEL engine, for the whole project: the rules' expressions (DependencyRule keys
//! and `when`, CascadeRule children and policy, whose programs are `lien_decide::program`) and
//! the sandbox's `x-kubernetes-validations` and webhook `matchConditions` are all compiled and
//! evaluated here. Generic: it knows none of Lien's types, so the sandbox uses it without them.
//!
//! - [`env()`], [`compile_program`]: the environment (the `cel` crate's standard library, its
//!   strings and lists extensions, Kubernetes' list and regex functions) and compilation with a
//!   process-wide cache;
//! - [`json_to_cel`]: JSON to CEL for schema-less objects (the sandbox converts with a schema);
//! - [`Expression`]: one expression over `self` (the whole object as JSON), compiled once with a
//!   bounded cost ([`cost`]) and evaluated to strings, a bool or JSON;
//!
//! Missing fields are errors, as in Kubernetes: `self.spec.pool` on an object without
//! `spec.pool` fails with [`EvalError::NoSuchKey`]; `has(self.spec.pool)` tests for it, and
//! `self.spec.?pool.orValue('')` reads it optionally.
//!
//! Pure: no I/O, no clock, no global state but the compile cache and the per-thread budget of
//! the evaluation in progress.

mod access;
pub mod cost;
mod env;
mod expression;

#[cfg(test)]
mod tests;

pub use cost::COST_LIMIT;
pub use env::{compile_program, env, json_to_cel};
pub use expression::{CompileError, EvalError, Expression, MAX_EXPRESSION_CHARS};

/// The `cel` crate, for the few callers (the sandbox) that build their own contexts.
pub use cel;

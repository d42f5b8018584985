//! Generates the sandbox's built-in API from k8s-openapi 0.24 (Kubernetes 1.32), which is itself
//! generated from kube-apiserver's published OpenAPI document:
//!
//! 1. `cargo run -p lien-sandbox-gen -- scan`: reads k8s-openapi's source (found with `cargo
//!    metadata`) and writes `crates/sandbox-gen/src/types.rs`, the list of every GA type that
//!    implements `Resource`, so that step 2 can name them.
//! 2. `cargo run -p lien-sandbox-gen -- write`: writes `crates/sandbox/src/builtins/table.rs`
//!    (the resource table: group, version, kind, plural, scope, verbs, subresources, short names,
//!    categories) and `crates/sandbox/data/openapi-definitions.json.gz` (every schema those
//!    types reach, with descriptions, as OpenAPI definitions).
//!
//! Both take `--out PATH` / `--out-dir DIR` so `.ci/check-generated` can diff against what is
//! committed.

mod scan;
mod tables;
#[rustfmt::skip]
mod types;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use schemars::JsonSchema;
use schemars::r#gen::{SchemaGenerator, SchemaSettings};
use serde_json::{Value, json};

use scan::{Found, Scope};

/// A scanned type with the code that puts its schema (and every schema it reaches) into a
/// generator.
pub struct Typed {
    found: Found,
    schema_name: String,
    add: fn(&mut SchemaGenerator),
}

fn add_schema<T: JsonSchema>(generator: &mut SchemaGenerator) {
    generator.subschema_for::<T>();
}

pub fn typed<T: JsonSchema>(found: Found) -> Typed {
    Typed {
        found,
        schema_name: T::schema_name(),
        add: add_schema::<T>,
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("scan") => {
            let out = flag(&args, "--out")
                .unwrap_or_else(|| workspace_root().join("crates/sandbox-gen/src/types.rs"));
            run_scan(&out)
        }
        Some("write") => {
            let root = flag(&args, "--out-dir").unwrap_or_else(workspace_root);
            run_write(&root)
        }
        _ => Err("usage: lien-sandbox-gen scan [--out FILE] | write [--out-dir DIR]".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<PathBuf> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
}

/// k8s-openapi 0.24's `src/v1_32`, located through `cargo metadata` (works offline once fetched).
fn k8s_openapi_source() -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
        ])
        .arg(workspace_root().join("Cargo.toml"))
        .output()
        .map_err(|e| format!("running cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let meta: Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata: {e}"))?;
    let manifest = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            p["name"] == "k8s-openapi"
                && p["version"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("0.24."))
        })
        .and_then(|p| p["manifest_path"].as_str())
        .ok_or("k8s-openapi 0.24 is not in the workspace's dependency graph")?;
    Ok(Path::new(manifest)
        .parent()
        .ok_or("manifest without a directory")?
        .join("src/v1_32"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// Every GA `Resource` type of the source tree, sorted by Rust path.
fn scan_tree(src: &Path) -> Result<Vec<Found>, String> {
    let mut files = Vec::new();
    rust_files(src, &mut files)?;
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).map_err(|e| e.to_string())?;
        let module: Vec<String> = rel
            .parent()
            .map(|p| {
                p.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        found.extend(scan::scan_file(&module.join("::"), &text)?);
    }
    found.retain(Found::is_ga);
    found.sort_by(|a, b| a.rust_path.cmp(&b.rust_path));
    Ok(found)
}

fn run_scan(out: &Path) -> Result<(), String> {
    let found = scan_tree(&k8s_openapi_source()?)?;
    let mut s = String::from(
        "// @generated by `cargo run -p lien-sandbox-gen -- scan` from k8s-openapi 0.24 (Kubernetes 1.32):\n\
         // every GA type that implements `Resource`. Do not edit.\n\n\
         use crate::scan::{Found, Scope};\n\n\
         pub fn all() -> Vec<crate::Typed> {\n    vec![\n",
    );
    for f in &found {
        s.push_str(&format!(
            "        crate::typed::<{}>(Found {{ rust_path: {:?}.into(), group: {:?}.into(), version: {:?}.into(), kind: {:?}.into(), plural: {:?}.into(), scope: Scope::{:?}, list_kind: {}, has_status: {} }}),\n",
            f.rust_path,
            f.rust_path,
            f.group,
            f.version,
            f.kind,
            f.plural,
            f.scope,
            f.list_kind
                .as_ref()
                .map_or("None".to_string(), |k| format!("Some({k:?}.into())")),
            f.has_status,
        ));
    }
    s.push_str("    ]\n}\n");
    std::fs::write(out, s).map_err(|e| format!("{}: {e}", out.display()))?;
    eprintln!("{} types -> {}", found.len(), out.display());
    Ok(())
}

fn lookup<'a, T>(table: &'a [(&str, &str, T)], group: &str, plural: &str) -> Option<&'a T> {
    table
        .iter()
        .find(|(g, p, _)| *g == group && *p == plural)
        .map(|(_, _, t)| t)
}

/// The discovery verbs of a resource.
pub fn verbs(f: &Found) -> &'static [&'static str] {
    if let Some(v) = lookup(tables::VERB_EXCEPTIONS, &f.group, &f.plural) {
        return v;
    }
    if f.list_kind.is_some() {
        tables::STORE_VERBS
    } else {
        tables::CREATE_ONLY
    }
}

/// A listable resource with a `status` field has the `status` subresource (every such storage in
/// k/k registers a StatusREST); create-only reviews carry a status in the response only.
pub fn has_status_subresource(f: &Found) -> bool {
    f.list_kind.is_some() && f.has_status
}

fn str_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("&[{}]", quoted.join(", "))
}

fn table_rs(types: &[Typed]) -> String {
    let mut s = String::from(
        "// @generated by `cargo run -p lien-sandbox-gen -- write` from k8s-openapi 0.24 (Kubernetes 1.32)\n\
         // and crates/sandbox-gen/src/tables.rs. Do not edit.\n\n\
         use super::{Builtin, Subresource};\n\n\
         pub const BUILTINS: &[Builtin] = &[\n",
    );
    for t in types.iter().filter(|t| t.found.is_resource()) {
        let f = &t.found;
        let mut subs = Vec::new();
        if has_status_subresource(f) {
            subs.push(format!(
                "Subresource {{ name: \"status\", group: {:?}, version: {:?}, kind: {:?}, verbs: &[\"get\", \"patch\", \"update\"] }}",
                f.group, f.version, f.kind
            ));
        }
        for (name, g, v, k, verbs) in lookup(tables::SUBRESOURCES, &f.group, &f.plural)
            .copied()
            .unwrap_or(&[])
        {
            let (g, v) = if v.is_empty() {
                (f.group.as_str(), f.version.as_str())
            } else {
                (*g, *v)
            };
            subs.push(format!(
                "Subresource {{ name: {name:?}, group: {g:?}, version: {v:?}, kind: {k:?}, verbs: {} }}",
                str_list(verbs)
            ));
        }
        s.push_str(&format!(
            "    Builtin {{ group: {:?}, version: {:?}, kind: {:?}, list_kind: {:?}, plural: {:?}, namespaced: {}, verbs: {}, short_names: {}, categories: {}, schema: {:?}, subresources: &[{}] }},\n",
            f.group,
            f.version,
            f.kind,
            f.list_kind.clone().unwrap_or_default(),
            f.plural,
            f.scope == Scope::Namespaced,
            str_list(verbs(f)),
            str_list(lookup(tables::SHORT_NAMES, &f.group, &f.plural).copied().unwrap_or(&[])),
            str_list(lookup(tables::CATEGORIES, &f.group, &f.plural).copied().unwrap_or(&[])),
            t.schema_name,
            subs.join(", "),
        ));
    }
    s.push_str("];\n");
    s
}

/// Every schema reachable from the types, by name, with `x-kubernetes-group-version-kind` on the
/// types' own schemas as kube-apiserver's documents have it. `$ref`s point at
/// `#/components/schemas/NAME` (the sandbox rewrites them for v2).
fn definitions(types: &[Typed]) -> Result<BTreeMap<String, Value>, String> {
    let mut generator = SchemaSettings::openapi3().into_generator();
    for t in types {
        (t.add)(&mut generator);
    }
    let mut defs: BTreeMap<String, Value> = BTreeMap::new();
    for (name, schema) in generator.take_definitions() {
        defs.insert(
            name,
            serde_json::to_value(schema).map_err(|e| e.to_string())?,
        );
    }
    let mut gvks: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for t in types {
        gvks.entry(&t.schema_name).or_default().push(json!({
            "group": t.found.group, "version": t.found.version, "kind": t.found.kind,
        }));
    }
    for (name, list) in gvks {
        let def = defs
            .get_mut(name)
            .ok_or_else(|| format!("no definition named {name}"))?;
        def["x-kubernetes-group-version-kind"] = Value::Array(list);
    }
    Ok(defs)
}

fn run_write(root: &Path) -> Result<(), String> {
    let types = types::all();
    let table_path = root.join("crates/sandbox/src/builtins/table.rs");
    let defs_path = root.join("crates/sandbox/data/openapi-definitions.json.gz");
    for p in [&table_path, &defs_path] {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
    }
    std::fs::write(&table_path, table_rs(&types))
        .map_err(|e| format!("{}: {e}", table_path.display()))?;
    let defs = definitions(&types)?;
    let json = serde_json::to_vec(&defs).map_err(|e| e.to_string())?;
    // No name or mtime in the header, so the bytes depend on the content only.
    let mut gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::best());
    gz.write_all(&json).map_err(|e| e.to_string())?;
    let bytes = gz.finish().map_err(|e| e.to_string())?;
    std::fs::write(&defs_path, bytes).map_err(|e| format!("{}: {e}", defs_path.display()))?;
    eprintln!(
        "{} resources -> {}; {} definitions -> {}",
        types.iter().filter(|t| t.found.is_resource()).count(),
        table_path.display(),
        defs.len(),
        defs_path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(group: &str, plural: &str, listable: bool, has_status: bool) -> Found {
        Found {
            rust_path: String::new(),
            group: group.into(),
            version: "v1".into(),
            kind: "K".into(),
            plural: plural.into(),
            scope: Scope::Namespaced,
            list_kind: listable.then(|| "KList".into()),
            has_status,
        }
    }

    #[test]
    fn listable_resources_get_the_store_verbs_and_reviews_create_only() {
        assert_eq!(
            verbs(&found("apps", "deployments", true, true)),
            tables::STORE_VERBS
        );
        assert_eq!(
            verbs(&found(
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                false,
                true
            )),
            ["create"]
        );
        assert!(!verbs(&found("", "namespaces", true, true)).contains(&"deletecollection"));
        assert_eq!(
            verbs(&found("", "componentstatuses", true, false)),
            ["get", "list"]
        );
    }

    #[test]
    fn status_subresource_needs_a_listable_type_with_a_status_field() {
        assert!(has_status_subresource(&found(
            "apps",
            "deployments",
            true,
            true
        )));
        assert!(!has_status_subresource(&found(
            "",
            "configmaps",
            true,
            false
        )));
        assert!(!has_status_subresource(&found(
            "authentication.k8s.io",
            "tokenreviews",
            false,
            true
        )));
    }

    #[test]
    fn the_scanned_table_has_what_kubectl_users_type() {
        let types = types::all();
        let table = table_rs(&types);
        for needle in [
            "plural: \"pods\", namespaced: true",
            "plural: \"cronjobs\"",
            "plural: \"nodes\", namespaced: false",
            "short_names: &[\"deploy\"], categories: &[\"all\"]",
            "name: \"scale\", group: \"autoscaling\", version: \"v1\", kind: \"Scale\"",
        ] {
            assert!(table.contains(needle), "missing {needle}");
        }
        // Alpha and beta versions are not served by a default 1.32 kube-apiserver.
        assert!(types.iter().all(|t| t.found.is_ga()));
        assert!(!table.contains("v1beta"));
    }

    #[test]
    fn definitions_carry_descriptions_and_group_version_kinds() {
        let types = types::all();
        let defs = definitions(&types).expect("definitions");
        let deploy = &defs["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(
            deploy["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        let replicas = &defs["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["replicas"];
        assert!(
            replicas["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Number of desired pods")),
            "{replicas}"
        );
        assert_eq!(
            deploy["properties"]["spec"]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
    }
}

//! `kubectl lien graph -A` and `plan` over 10,000 relations against the sandbox (issue 11,
//! "Performance"; docs/benchmarks.md "kubectl lien over 10,000 relations").
//!
//! ```text
//! cargo build --release -p lien --example plugin_load --bin lien
//! target/release/lien sandbox --no-lien --port 0 --kubeconfig /tmp/pl.kubeconfig &
//! target/release/examples/plugin_load --kubeconfig /tmp/pl.kubeconfig --lien target/release/lien
//! ```
//!
//! The fixture, in namespace `plugin-load`, is three levels of ConfigMaps: `--apps` apps, each
//! the user of its own service (`app-i` uses `svc-i`, one Usage per pair, by name), and every
//! service the user of one of `--dbs` databases (`svc-i` uses `db-(i mod dbs)`, derived by one
//! DependencyRule keyed on the service's `data.uses`). With the defaults: 5,000 Usage relations
//! plus 5,000 rule relations = 10,000 relations over 10,100 ConfigMaps. Lien itself need not run:
//! the plugin reads the API objects and derives the relations itself.
//!
//! Then it runs the real commands `--samples` times each, timing the whole process (connect,
//! discovery, lists, derivation, output): `lien graph -A -o dot`, `lien graph -A -o json`,
//! `lien plan -n plugin-load --all`, and `lien plan -n plugin-load configmap/db-0`; and checks
//! the answers (edge count, steps) so that a fast wrong answer does not pass.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

#[path = "load/mod.rs"]
mod load;

use load::{Error, create_all, resource};

const NS: &str = "plugin-load";

struct Args {
    kubeconfig: PathBuf,
    lien: PathBuf,
    apps: usize,
    dbs: usize,
    samples: usize,
    concurrency: usize,
}

fn args() -> Result<Args, Error> {
    let mut a = Args {
        kubeconfig: PathBuf::from("/tmp/pl.kubeconfig"),
        lien: PathBuf::from("target/release/lien"),
        apps: 5000,
        dbs: 100,
        samples: 5,
        concurrency: 32,
    };
    load::flags(|flag, value| {
        match flag {
            "--kubeconfig" => a.kubeconfig = value()?.into(),
            "--lien" => a.lien = value()?.into(),
            "--apps" => a.apps = value()?.parse()?,
            "--dbs" => a.dbs = value()?.parse()?,
            "--samples" => a.samples = value()?.parse()?,
            "--concurrency" => a.concurrency = value()?.parse()?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if a.dbs == 0 || a.apps == 0 {
        return Err("--apps and --dbs must be positive".into());
    }
    Ok(a)
}

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": NS}, "data": data})
}

/// Runs `lien ARGS` `samples` times; returns the last stdout and the times.
fn time(a: &Args, cmd: &[&str]) -> Result<(String, Vec<Duration>), Error> {
    let mut times = Vec::new();
    let mut last = String::new();
    for _ in 0..a.samples {
        let started = Instant::now();
        let out = Command::new(&a.lien)
            .args(cmd)
            .arg("--kubeconfig")
            .arg(&a.kubeconfig)
            .output()?;
        times.push(started.elapsed());
        if !out.status.success() {
            return Err(format!(
                "lien {}: {}",
                cmd.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )
            .into());
        }
        last = String::from_utf8(out.stdout)?;
    }
    Ok((last, times))
}

fn report(cmd: &str, times: &mut [Duration]) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "lien {cmd}: min {:.0} ms, median {:.0} ms, max {:.0} ms ({} runs)",
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1]),
        times.len()
    );
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let a = args()?;
    let client = load::client(&a.kubeconfig).await?;

    let namespaces: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("", "v1", "Namespace", "namespaces"),
    );
    let started = Instant::now();
    create_all(
        &namespaces,
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})],
        1,
    )
    .await?;
    let cms: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &resource("", "v1", "ConfigMap", "configmaps"),
    );
    let mut objects: Vec<Value> = (0..a.dbs)
        .map(|i| configmap(&format!("db-{i}"), json!({})))
        .collect();
    for i in 0..a.apps {
        objects.push(configmap(&format!("app-{i}"), json!({})));
        objects.push(configmap(
            &format!("svc-{i}"),
            json!({"uses": format!("db-{}", i % a.dbs)}),
        ));
    }
    create_all(&cms, objects, a.concurrency).await?;
    let usages: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &resource("lien.dev", "v1alpha1", "Usage", "usages"),
    );
    let usage_objects: Vec<Value> = (0..a.apps)
        .map(|i| {
            json!({"apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                   "metadata": {"name": format!("app-{i}-uses-svc-{i}"), "namespace": NS},
                   "spec": {
                       "of": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": format!("svc-{i}")}},
                       "by": {"apiVersion": "v1", "kind": "ConfigMap", "resourceRef": {"name": format!("app-{i}")}},
                       "reason": "the app calls this service"}})
        })
        .collect();
    create_all(&usages, usage_objects, a.concurrency).await?;
    let rules: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("lien.dev", "v1alpha1", "DependencyRule", "dependencyrules"),
    );
    create_all(
        &rules,
        vec![
            json!({"apiVersion": "lien.dev/v1alpha1", "kind": "DependencyRule",
            "metadata": {"name": "services-use-databases"},
            "spec": {
                "of": {"apiVersion": "v1", "kind": "ConfigMap"},
                "by": {"apiVersion": "v1", "kind": "ConfigMap"},
                "scope": "SameNamespace",
                "keys": {"of": "[self.metadata.name]",
                         "by": "has(self.data) && 'uses' in self.data ? [self.data.uses] : []"},
                "reason": "the service stores its data in this database"}}),
        ],
        1,
    )
    .await?;
    let relations = 2 * a.apps;
    println!(
        "fixture: {} ConfigMaps, {} Usages, 1 DependencyRule, {relations} relations, created in {:.1} s",
        a.dbs + 2 * a.apps,
        a.apps,
        started.elapsed().as_secs_f64()
    );

    let (dot, mut t) = time(&a, &["graph", "-A", "-o", "dot"])?;
    let edges = dot.matches(" -> ").count();
    if edges != relations {
        return Err(format!("graph -A: {edges} edges, expected {relations}").into());
    }
    report("graph -A -o dot", &mut t);
    let (json_out, mut t) = time(&a, &["graph", "-A", "-o", "json"])?;
    let parsed: Value = serde_json::from_str(&json_out)?;
    let n = parsed["edges"].as_array().map_or(0, Vec::len);
    if n != relations {
        return Err(format!("graph -A -o json: {n} edges, expected {relations}").into());
    }
    report("graph -A -o json", &mut t);
    let (plan, mut t) = time(&a, &["plan", "-n", NS, "--all", "-o", "json"])?;
    let parsed: Value = serde_json::from_str(&plan)?;
    let steps = parsed["steps"].as_array().map_or(0, Vec::len);
    if steps != 3 {
        return Err(format!("plan --all: {steps} steps, expected 3").into());
    }
    report(&format!("plan -n {NS} --all -o json"), &mut t);
    let (plan, mut t) = time(&a, &["plan", "-n", NS, "configmap/db-0"])?;
    if !plan.contains("in 3 steps") {
        return Err(format!("plan db-0: {plan}").into());
    }
    report(&format!("plan -n {NS} configmap/db-0"), &mut t);
    Ok(())
}

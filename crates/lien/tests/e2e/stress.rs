//! Refused DELETEs racing Usage churn (issue 7 §1): the API server and the webhook keep
//! answering.
//!
//! The sandbox and Lien run on a multi-threaded runtime of their own, as under `lien sandbox`;
//! the clients run on a second runtime, so that a server that stops answering is seen as a
//! client timeout (and reported) instead of freezing the test with it.

use std::time::Duration;

use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tokio::time::{Instant, timeout};

use crate::harness::*;

/// How long the churn runs.
const CHURN: Duration = Duration::from_secs(60);
/// Every request must be answered within this.
const ANSWER: Duration = Duration::from_secs(5);
/// Clients that keep trying to delete the protected ConfigMap.
const DELETERS: usize = 2;
/// Iteration caps, so that the loops end even if time misbehaves.
const MAX_DELETES: usize = 200_000;
const MAX_CHURN: usize = 50_000;

/// `what` answered within [`ANSWER`], or the reason the test fails.
async fn answered<T>(what: &str, f: impl Future<Output = T>) -> Result<T, String> {
    let start = Instant::now();
    timeout(ANSWER, f).await.map_err(|_| {
        format!(
            "{what}: no answer within {ANSWER:?} (at {:?}): the API server or the webhook stopped",
            start.elapsed()
        )
    })
}

/// Two clients DELETE a protected ConfigMap over and over (each refused with 409, so each
/// refusal is recorded by the controller) while a third creates and deletes Usages (so the
/// controller re-resolves and rewrites the index), for a minute. Every request must be answered
/// within seconds; afterwards the API server still answers and protection is still right: the
/// ConfigMap kept by a Usage is refused, the one only the churned Usages protected is not.
/// Before the fix this froze the whole runtime (a lock-order inversion between the denial
/// recorder and the event loop, both on tokio workers).
#[test]
fn refused_deletes_racing_usage_churn_keep_the_api_server_and_webhook_answering() {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("the server runtime");
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the clients' runtime");
    let env = server.block_on(async {
        let mut env = Env::start("stress").await;
        env.configmap("churned", json!({})).await;
        env.protected_configmap("kept", "keep", "the stress test keeps it")
            .await;
        wait_refused(&env.configmaps(), "kept").await;
        env
    });
    let outcome = clients.block_on(churn(&env));
    match outcome {
        Ok(summary) => {
            println!("{summary}");
            server.block_on(env.finish());
        }
        Err(failure) => {
            // The server's runtime is stuck: dropping it (or the Env, whose teardown runs on it)
            // would wait for its blocked workers forever. Leave them to the process's exit.
            server.shutdown_background();
            std::mem::forget(env);
            panic!("{failure}");
        }
    }
}

async fn churn(env: &Env) -> Result<String, String> {
    let ns = env.ns.clone();
    let end = Instant::now() + CHURN;
    let mut deleters = Vec::new();
    for d in 0..DELETERS {
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(env.new_client().await, &ns);
        deleters.push(tokio::spawn(async move {
            let mut refused = 0usize;
            while Instant::now() < end && refused < MAX_DELETES {
                let what = format!("deleter {d}: DELETE kept #{refused}");
                match answered(&what, cms.delete("kept", &DeleteParams::default())).await? {
                    Err(kube::Error::Api(s)) if s.code == 409 => refused += 1,
                    other => return Err(format!("{what}: expected a 409 refusal, got {other:?}")),
                }
            }
            Ok::<usize, String>(refused)
        }));
    }
    let usages: Api<lien_api::Usage> = Api::namespaced(env.new_client().await, &ns);
    let churner = tokio::spawn(async move {
        let mut cycles = 0usize;
        while Instant::now() < end && cycles < MAX_CHURN {
            let name = format!("churn-{cycles}");
            let usage: lien_api::Usage = serde_json::from_value(json!({
                "apiVersion": "lien.dev/v1alpha1", "kind": "Usage",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"of": {"apiVersion": "v1", "kind": "ConfigMap",
                                "resourceRef": {"name": "churned"}},
                         "reason": "churn"}}))
            .map_err(|e| e.to_string())?;
            let what = format!("create Usage {name}");
            answered(&what, usages.create(&PostParams::default(), &usage))
                .await?
                .map_err(|e| format!("{what}: {e}"))?;
            let what = format!("delete Usage {name}");
            answered(&what, usages.delete(&name, &DeleteParams::background()))
                .await?
                .map_err(|e| format!("{what}: {e}"))?;
            cycles += 1;
        }
        Ok::<usize, String>(cycles)
    });
    let mut refused = Vec::new();
    for d in deleters {
        refused.push(d.await.map_err(|e| format!("a deleter panicked: {e}"))??);
    }
    let cycles = churner
        .await
        .map_err(|e| format!("the churner panicked: {e}"))??;

    // After the churn: the API server answers, and protection is as the Usages say.
    let client = env.new_client().await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &env.ns);
    answered("GET kept after the churn", cms.get("kept"))
        .await?
        .map_err(|e| format!("GET kept after the churn: {e}"))?;
    let dry = DeleteParams::default().dry_run();
    match answered("dry-run DELETE kept", cms.delete("kept", &dry)).await? {
        Err(kube::Error::Api(s))
            if s.code == 409 && s.message.contains("the stress test keeps it") => {}
        other => return Err(format!("kept must still be refused, got {other:?}")),
    }
    // The churned Usages are gone (their finalizers removed by Lien), so "churned" is free.
    let usages: Api<lien_api::Usage> = Api::namespaced(client, &env.ns);
    let until = Instant::now() + scaled(DEADLINE);
    loop {
        let left = answered("list Usages", usages.list(&Default::default()))
            .await?
            .map_err(|e| format!("list Usages: {e}"))?
            .items
            .len();
        let free = answered("dry-run DELETE churned", cms.delete("churned", &dry))
            .await?
            .is_ok();
        if left == 1 && free {
            break;
        }
        if Instant::now() > until {
            return Err(format!(
                "{:?} after the churn: {left} Usages left (want only `keep`), \
                 churned deletable: {free}",
                scaled(DEADLINE)
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(format!(
        "stress: {refused:?} refused DELETEs and {cycles} Usage create/delete cycles in {CHURN:?}; \
         every request answered within {ANSWER:?}"
    ))
}

//! `kubectl lien plan --apply`: deletes a plan step by step, waiting for each step's objects to
//! be gone before the next, and stops at the first refusal (the webhook's message, as kubectl
//! prints it) or when a step outlasts the timeout. Progress goes to a progress bar on a
//! terminal, and to plain lines otherwise (logs, CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kube::Client;
use kube::api::DeleteParams;

use super::graph::object_label;
use super::plan::Plan;
use super::read::{Discovery, ReadError, api_for};

/// How often a step's objects are checked for being gone.
const POLL: Duration = Duration::from_millis(100);

/// Why `--apply` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A DELETE was refused (or failed).
    #[error("step {step}: deleting {object} failed; stopping.\n{source}")]
    Refused {
        /// The step (1-based).
        step: usize,
        /// The object.
        object: String,
        /// The server's answer.
        #[source]
        source: ReadError,
    },
    /// A step's objects were not gone in time.
    #[error(
        "step {step}: timed out after {timeout:?} waiting for {} to be gone (finalizers still running?); stopping",
        .waiting.join(", ")
    )]
    Timeout {
        /// The step (1-based).
        step: usize,
        /// The limit.
        timeout: Duration,
        /// What was still there.
        waiting: Vec<String>,
    },
    /// A kind of the plan is not served any more.
    #[error("step {step}: the server no longer serves the kind of {object}")]
    Unserved {
        /// The step (1-based).
        step: usize,
        /// The object.
        object: String,
    },
}

enum Progress {
    Bar(ProgressBar),
    Lines,
}

impl Progress {
    fn new(total: usize) -> Self {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} gone  {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            Progress::Bar(bar)
        } else {
            Progress::Lines
        }
    }

    fn say(&self, line: String) {
        match self {
            Progress::Bar(bar) => bar.set_message(line),
            Progress::Lines => println!("{line}"),
        }
    }

    fn gone(&self, n: usize) {
        if let Progress::Bar(bar) = self {
            bar.inc(n as u64);
        }
    }

    fn finish(&self, line: String) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
        println!("{line}");
    }

    fn abandon(&self) {
        if let Progress::Bar(bar) = self {
            bar.abandon();
        }
    }
}

/// Performs `plan`: per step, DELETE every object (background propagation, as kubectl), then
/// wait until every one is gone (404), at most `timeout` per step.
pub async fn apply(
    client: &Client,
    discovery: &Discovery,
    plan: &Plan,
    timeout: Duration,
) -> Result<(), ApplyError> {
    let total: usize = plan.steps.iter().map(Vec::len).sum();
    let steps = plan.steps.len();
    let progress = Progress::new(total);
    let result = run(client, discovery, plan, timeout, &progress).await;
    match &result {
        Ok(()) => progress.finish(format!("done: {total} objects deleted in {steps} steps")),
        Err(_) => progress.abandon(),
    }
    result
}

async fn run(
    client: &Client,
    discovery: &Discovery,
    plan: &Plan,
    timeout: Duration,
    progress: &Progress,
) -> Result<(), ApplyError> {
    let steps = plan.steps.len();
    for (i, step) in plan.steps.iter().enumerate() {
        let n = i + 1;
        let mut apis = Vec::with_capacity(step.len());
        for key in step {
            let r = discovery.for_key(key).ok_or_else(|| ApplyError::Unserved {
                step: n,
                object: object_label(key),
            })?;
            apis.push((key, api_for(client, r, key.namespace.as_deref())));
        }
        for (key, api) in &apis {
            match api.delete(&key.name, &DeleteParams::background()).await {
                Ok(_) => progress.say(format!("step {n}/{steps}: deleted {}", object_label(key))),
                // Already gone: what the step wants.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(ApplyError::Refused {
                        step: n,
                        object: object_label(key),
                        source: ReadError::from_kube(format!("deleting {}", object_label(key)), e),
                    });
                }
            }
        }
        let started = Instant::now();
        let mut waiting: Vec<_> = apis;
        loop {
            let mut still = Vec::with_capacity(waiting.len());
            for (key, api) in waiting {
                match api.get_metadata_opt(&key.name).await {
                    Ok(None) => {
                        progress.gone(1);
                        progress.say(format!("step {n}/{steps}: gone: {}", object_label(key)));
                    }
                    Ok(Some(_)) => still.push((key, api)),
                    Err(e) => {
                        return Err(ApplyError::Refused {
                            step: n,
                            object: object_label(key),
                            source: ReadError::from_kube(
                                format!("checking {} is gone", object_label(key)),
                                e,
                            ),
                        });
                    }
                }
            }
            if still.is_empty() {
                break;
            }
            if started.elapsed() >= timeout {
                return Err(ApplyError::Timeout {
                    step: n,
                    timeout,
                    waiting: still.iter().map(|(k, _)| object_label(k)).collect(),
                });
            }
            waiting = still;
            tokio::time::sleep(POLL).await;
        }
    }
    Ok(())
}

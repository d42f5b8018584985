//! `kubectl lien plan --apply`: deletes a plan step by step, waiting for each step's objects to
//! be gone before the next. The controller learns that a step's objects are gone a moment after
//! the API server does, so the next step's DELETE may still be refused by Lien's webhook (409
//! from `delete.lien.dev` or a namespace hook): such a refusal is retried with exponential
//! backoff until the step's timeout, and said once per object. Any other error stops at once
//! (the server's message, as kubectl prints it), and so does a refusal that outlasts the
//! timeout, or a step whose objects are not gone in time. Progress goes to a progress bar on a
//! terminal, and to plain lines otherwise (logs, CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject};
use lien_core::ObjectKey;

use super::delete::refused_by_lien;
use super::graph::object_label;
use super::plan::Plan;
use super::read::{Discovery, ReadError, api_for};

/// How often a step's deleted objects are checked for being gone.
const POLL: Duration = Duration::from_millis(100);
/// The first wait before a DELETE Lien refused is sent again; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest wait between two DELETEs of one object Lien refuses.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Why `--apply` stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A DELETE was refused by something other than Lien's in-use check, or failed.
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
    /// Lien still refused a DELETE (the object is in use) when the step's time was up.
    #[error(
        "step {step}: Lien still refuses to delete {object} after {timeout:?} (--timeout); stopping.\n{source}"
    )]
    StillHeld {
        /// The step (1-based).
        step: usize,
        /// The object.
        object: String,
        /// The limit.
        timeout: Duration,
        /// Lien's last refusal.
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
            Progress::Lines => crate::output::line(line),
        }
    }

    /// A line kept on screen (the bar's message is replaced by the next one).
    fn note(&self, line: String) {
        match self {
            Progress::Bar(bar) => bar.println(line),
            Progress::Lines => crate::output::line(line),
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
        crate::output::line(line);
    }

    fn abandon(&self) {
        if let Progress::Bar(bar) = self {
            bar.abandon();
        }
    }
}

/// Performs `plan`: per step, DELETE every object (background propagation, as kubectl) —
/// sent again with backoff while Lien refuses it as in use — then wait until every one is gone
/// (404), at most `timeout` per step.
pub async fn apply(
    client: &Client,
    discovery: &Discovery,
    plan: &Plan,
    timeout: Duration,
) -> Result<(), ApplyError> {
    let total = plan.count();
    let steps = plan.steps.len();
    let progress = Progress::new(total);
    let result = run(client, discovery, plan, timeout, &progress).await;
    match &result {
        Ok(()) => progress.finish(format!(
            "done: {total} object{} deleted in {steps} step{}",
            if total == 1 { "" } else { "s" },
            if steps == 1 { "" } else { "s" }
        )),
        Err(_) => progress.abandon(),
    }
    result
}

/// Where one object of a step is.
enum State {
    /// Its DELETE is to be sent at `at`; `delay` is the wait after the next refusal;
    /// `refused` is Lien's last refusal.
    ToDelete {
        at: Instant,
        delay: Duration,
        refused: Option<kube::Error>,
    },
    /// Deleted; to be checked for being gone at `at`. `uid`: the one deleted, when known — an
    /// object of the same name with another UID is a new one (a controller re-creates some
    /// objects at once: a namespace's `default` ServiceAccount, its `kube-root-ca.crt`), and the
    /// deleted one is gone.
    Deleted { at: Instant, uid: Option<String> },
}

/// The part of Lien's refusal after kube-apiserver's prefix, first line only: what holds it.
fn holder(e: &kube::Error) -> String {
    let message = match e {
        kube::Error::Api(s) => s.message.as_str(),
        _ => "",
    };
    let said = message
        .split_once("denied the request: ")
        .map_or(message, |(_, rest)| rest);
    said.lines().next().unwrap_or_default().to_owned()
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
        let started = Instant::now();
        let deadline = started + timeout;
        let mut pending: Vec<(&ObjectKey, Api<DynamicObject>, State)> =
            Vec::with_capacity(step.len());
        for key in step {
            let r = discovery.for_key(key).ok_or_else(|| ApplyError::Unserved {
                step: n,
                object: object_label(key),
            })?;
            let state = State::ToDelete {
                at: started,
                delay: RETRY_FIRST,
                refused: None,
            };
            pending.push((key, api_for(client, r, key.namespace.as_deref()), state));
        }
        loop {
            let now = Instant::now();
            let mut still = Vec::with_capacity(pending.len());
            for (key, api, state) in pending {
                match state {
                    State::ToDelete { at, .. } if at > now => still.push((key, api, state)),
                    State::ToDelete { delay, refused, .. } => {
                        match api.delete(&key.name, &DeleteParams::background()).await {
                            // A Status: deleted at once (kube-apiserver answers with the
                            // object when it stays, with finalizers, and for the few kinds
                            // that return what they deleted: those are checked at once).
                            Ok(answer) if answer.is_right() => {
                                progress.gone(1);
                                progress.say(format!(
                                    "step {n}/{steps}: deleted {}",
                                    object_label(key)
                                ));
                            }
                            Ok(answer) => {
                                progress.say(format!(
                                    "step {n}/{steps}: deleted {}",
                                    object_label(key)
                                ));
                                let uid = answer.left().and_then(|o| o.metadata.uid);
                                still.push((key, api, State::Deleted { at: now, uid }));
                            }
                            // Already gone: what the step wants.
                            Err(kube::Error::Api(s)) if s.code == 404 => {
                                progress.gone(1);
                            }
                            Err(e) if refused_by_lien(&e) => {
                                if refused.is_none() {
                                    progress.note(format!(
                                        "step {n}/{steps}: waiting for Lien to release {} ({}); retrying until --timeout {timeout:?}",
                                        object_label(key),
                                        holder(&e)
                                    ));
                                }
                                let state = State::ToDelete {
                                    at: Instant::now() + delay,
                                    delay: (delay * 2).min(RETRY_MAX),
                                    refused: Some(e),
                                };
                                still.push((key, api, state));
                            }
                            // kube-apiserver answers 409 to the DELETE of a Namespace that
                            // is already Terminating (Lien may have replayed a refused DELETE
                            // meanwhile): deleted all the same, so wait for it to be gone.
                            Err(kube::Error::Api(s)) if s.code == 409 => {
                                match being_deleted(&api, &key.name).await {
                                    Some(uid) => still.push((
                                        key,
                                        api,
                                        State::Deleted {
                                            at: now,
                                            uid: Some(uid).filter(|u| !u.is_empty()),
                                        },
                                    )),
                                    None => {
                                        return Err(ApplyError::Refused {
                                            step: n,
                                            object: object_label(key),
                                            source: ReadError::from_kube(
                                                format!("deleting {}", object_label(key)),
                                                kube::Error::Api(s),
                                            ),
                                        });
                                    }
                                }
                            }
                            Err(e) => {
                                return Err(ApplyError::Refused {
                                    step: n,
                                    object: object_label(key),
                                    source: ReadError::from_kube(
                                        format!("deleting {}", object_label(key)),
                                        e,
                                    ),
                                });
                            }
                        }
                    }
                    State::Deleted { at, .. } if at > now => still.push((key, api, state)),
                    State::Deleted { uid, .. } => match api.get_metadata_opt(&key.name).await {
                        // Gone; or its kind went with it (a CRD deleted in the same step):
                        // kube-apiserver answers a bare `404 page not found` then, which kube-rs
                        // does not take for NotFound.
                        Ok(None) => {
                            progress.gone(1);
                            progress.say(format!("step {n}/{steps}: gone: {}", object_label(key)));
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            progress.gone(1);
                            progress.say(format!("step {n}/{steps}: gone: {}", object_label(key)));
                        }
                        Ok(Some(m))
                            if uid.is_some()
                                && m.metadata.uid.is_some()
                                && m.metadata.uid != uid =>
                        {
                            progress.gone(1);
                            progress.say(format!(
                                "step {n}/{steps}: gone: {} (a new one of the same name was created since)",
                                object_label(key)
                            ));
                        }
                        Ok(Some(_)) => still.push((
                            key,
                            api,
                            State::Deleted {
                                at: Instant::now() + POLL,
                                uid,
                            },
                        )),
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
                    },
                }
            }
            pending = still;
            if pending.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(timed_out(n, timeout, pending));
            }
            // Wake for the next DELETE due, or the next check of what was deleted.
            let wake = pending
                .iter()
                .map(|(_, _, state)| match state {
                    State::ToDelete { at, .. } | State::Deleted { at, .. } => *at,
                })
                .min()
                .unwrap_or(deadline)
                .min(deadline);
            tokio::time::sleep_until(wake.into()).await;
        }
    }
    Ok(())
}

/// The UID of `name` if it exists with its deletionTimestamp set.
async fn being_deleted(api: &Api<DynamicObject>, name: &str) -> Option<String> {
    match api.get_metadata_opt(name).await {
        Ok(Some(m)) if m.metadata.deletion_timestamp.is_some() => {
            Some(m.metadata.uid.unwrap_or_default())
        }
        _ => None,
    }
}

/// The error of a step whose time is up with `pending` left: Lien's refusal if one is still
/// refused, else what is not gone.
fn timed_out(
    step: usize,
    timeout: Duration,
    pending: Vec<(&ObjectKey, Api<DynamicObject>, State)>,
) -> ApplyError {
    let mut waiting = Vec::new();
    for (key, _, state) in pending {
        match state {
            State::ToDelete {
                refused: Some(e), ..
            } => {
                return ApplyError::StillHeld {
                    step,
                    object: object_label(key),
                    timeout,
                    source: ReadError::from_kube(format!("deleting {}", object_label(key)), e),
                };
            }
            _ => waiting.push(object_label(key)),
        }
    }
    ApplyError::Timeout {
        step,
        timeout,
        waiting,
    }
}

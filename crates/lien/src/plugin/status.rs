//! `kubectl lien status`: is Lien enforcing right now? Pure: [`assess`] turns what was read
//! from the cluster ([`Facts`], gathered by `status_read`) into a [`Report`] — one verdict and
//! the checks behind it — and [`to_text`] / [`to_json`] write it.
//!
//! The verdict is about kube-apiserver's behaviour, not Lien's intentions:
//! - **enforced**: the ValidatingWebhookConfiguration sends a DELETE of an object in use to
//!   Lien, fails closed, and Lien answers;
//! - **failing closed**: it is configured but Lien does not answer (no ready endpoint, down,
//!   not ready): such a DELETE fails with an error — the object stays, but nothing is recorded
//!   or replayed and the refusal does not say who uses it;
//! - **not enforced**: no configuration, no `delete.lien.dev` hook, a failure policy that
//!   lets DELETEs through when Lien does not answer while it does not, or the running
//!   controller reporting its configuration changed — a DELETE of an object in use may go
//!   through;
//! - **unknown**: the configuration could not be read (a user without the right).

use std::fmt::Write as _;

use serde_json::{Value, json};

/// Lien's validating webhooks (`lien_webhook::configuration::names`), the one that refuses a
/// DELETE first.
pub const DELETE_HOOK: &str = lien_webhook::configuration::names::DELETE;

/// The other webhooks the configuration carries (a missing one is a warning: what it guards is
/// named).
const OTHER_HOOKS: &[(&str, &str)] = &[
    (
        lien_webhook::configuration::names::TAMPER,
        "removing the in-use label",
    ),
    (
        lien_webhook::configuration::names::BREAK_GLASS,
        "arming break-glass",
    ),
    (
        lien_webhook::configuration::names::USAGES,
        "creating Usages",
    ),
    (lien_webhook::configuration::names::RULES, "creating rules"),
    (
        lien_webhook::configuration::names::NAMESPACES,
        "deleting a Namespace in use",
    ),
    (
        lien_webhook::configuration::names::NAMESPACE_CONTENTS,
        "deleting a Namespace whose contents are in use",
    ),
    (
        lien_webhook::configuration::names::EVICTIONS,
        "evicting a Pod in use",
    ),
];

/// A CA bundle expiring sooner than this is a warning (Lien rotates its own CA well before).
pub const CA_WARN_SECONDS: i64 = 14 * 24 * 3600;

/// An object read from the cluster, or why not.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<T> {
    /// Read.
    Found(T),
    /// The API server says it does not exist.
    Missing,
    /// It could not be read (forbidden, unreachable): the error.
    Unreadable(String),
}

/// Whether the webhook answers, as far as the plugin can tell.
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    /// The configuration names a URL and `GET /readyz` there answered 200; what its
    /// `/metrics` says (`lien_webhook_client_authentication`, `lien_webhook_build_info`).
    Ready {
        url: String,
        client_authentication: Option<String>,
        version: Option<String>,
    },
    /// The URL answered, but not ready (its index still syncing): the status and body.
    NotReady { url: String, answer: String },
    /// The URL refused the connection, or its TLS does not verify against the caBundle: as
    /// for kube-apiserver, which calls the same URL with the same bundle.
    Unreachable { url: String, error: String },
    /// The configuration names a Service: its EndpointSlices' ready endpoints.
    Endpoints {
        service: String,
        ready: usize,
        total: usize,
    },
    /// The configuration names a Service that does not exist.
    NoService { service: String },
    /// Could not be told: the EndpointSlices could not be read, or the URL could not be
    /// reached from this machine in a way that says nothing of the API server's view (no such
    /// name here, no route, no answer in time).
    Unknown { what: String, error: String },
}

/// How many of one kind of Lien's objects are Ready.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceCount {
    /// `Usage`, `ClusterUsage`, `DependencyRule`, `CascadeRule`.
    pub kind: String,
    /// Ready=True.
    pub ready: usize,
    /// The others: `namespace/name` (or `name`) and their Ready reason, in order.
    pub not_ready: Vec<(String, String)>,
    /// Why they could not be listed, if they could not.
    pub error: Option<String>,
    /// The resources Lien's RBAC does not grant that the `NotPermitted` ones name.
    pub not_permitted: std::collections::BTreeSet<String>,
}

/// Everything `status` reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    /// The ValidatingWebhookConfiguration (`lien`).
    pub configuration: Lookup<Value>,
    /// The MutatingWebhookConfiguration (`lien`).
    pub mutating: Lookup<Value>,
    /// Whether the webhook answers (`None`: not asked, there is no configuration to follow).
    pub reach: Option<Reach>,
    /// Lien's Deployment, where the configuration names a Service (`None`: Lien runs outside
    /// the cluster, at a URL).
    pub deployment: Option<Lookup<Value>>,
    /// The leader-election Lease.
    pub lease: Lookup<Value>,
    /// The unix times at which the caBundle's certificates expire (an error if it does not
    /// parse).
    pub ca_not_after: Result<Vec<i64>, String>,
    /// The running controller's own word: the message of a Usage's `Ready=False` condition
    /// with reason `WebhookNotConfigured` (it compares the configuration with the one it
    /// wants, every field).
    pub controller_says: Option<String>,
    /// Usages, ClusterUsages and rules.
    pub sources: Vec<SourceCount>,
    /// This plugin's version.
    pub plugin_version: String,
    /// Now, unix seconds.
    pub now: i64,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// As it should be.
    Ok,
    /// Works, but needs a look.
    Warn,
    /// Protection or Lien's promises do not hold.
    Fail,
    /// Could not be told.
    Unknown,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Check {
    /// What was checked.
    pub name: &'static str,
    /// How it came out.
    pub level: Level,
    /// In words.
    pub detail: String,
}

/// Whether a DELETE of an object in use is refused by Lien right now.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// kube-apiserver asks Lien and Lien answers.
    Enforced,
    /// kube-apiserver asks Lien, Lien does not answer: the DELETE fails with an error.
    FailingClosed(String),
    /// A DELETE of an object in use may go through.
    NotEnforced(String),
    /// Could not be told.
    Unknown(String),
}

impl Verdict {
    /// `enforced`, `failing-closed`, `not-enforced`, `unknown`.
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Enforced => "enforced",
            Verdict::FailingClosed(_) => "failing-closed",
            Verdict::NotEnforced(_) => "not-enforced",
            Verdict::Unknown(_) => "unknown",
        }
    }

    /// The one-line warning `why`, `plan` and `graph` print before claiming protection
    /// (`None` when enforced, or when it cannot be told: nothing is claimed either way then).
    pub fn warning(&self) -> Option<String> {
        match self {
            Verdict::Enforced | Verdict::Unknown(_) => None,
            Verdict::FailingClosed(why) => Some(format!(
                "warning: Lien is not answering ({why}): a DELETE of an object in use fails with an error instead of Lien's refusal, and nothing is recorded or replayed — see `kubectl lien status`"
            )),
            Verdict::NotEnforced(why) => Some(format!(
                "warning: protection is NOT enforced ({why}): a DELETE of an object in use may go through — see `kubectl lien status`"
            )),
        }
    }
}

/// The verdict and the checks behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The verdict.
    pub verdict: Verdict,
    /// Every check, in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// `status`'s exit status: 0 only when enforced.
    pub fn enforced(&self) -> bool {
        self.verdict == Verdict::Enforced
    }
}

fn check(name: &'static str, level: Level, detail: impl Into<String>) -> Check {
    Check {
        name,
        level,
        detail: detail.into(),
    }
}

fn hooks(config: &Value) -> &[Value] {
    config["webhooks"].as_array().map_or(&[][..], Vec::as_slice)
}

fn hook<'a>(config: &'a Value, name: &str) -> Option<&'a Value> {
    hooks(config).iter().find(|h| h["name"] == name)
}

/// Whether `rules` send a DELETE of every resource to the hook.
fn covers_every_delete(rules: &Value) -> bool {
    let has = |r: &Value, field: &str, want: &str| {
        r[field]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "*" || v == want))
    };
    rules.as_array().is_some_and(|rules| {
        rules.iter().any(|r| {
            has(r, "operations", "DELETE")
                && has(r, "apiGroups", "*")
                && r["resources"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|v| v == "*" || v == "*/*"))
        })
    })
}

/// Where the configuration sends reviews: its URL, or `namespace/name` of its Service.
pub fn client_target(config: &Value) -> Option<ClientTarget> {
    let client = &hook(config, DELETE_HOOK)?["clientConfig"];
    if let Some(url) = client["url"].as_str() {
        return Some(ClientTarget::Url(url.to_owned()));
    }
    let s = &client["service"];
    Some(ClientTarget::Service {
        namespace: s["namespace"].as_str()?.to_owned(),
        name: s["name"].as_str()?.to_owned(),
    })
}

/// Where kube-apiserver calls Lien.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientTarget {
    /// A URL (Lien outside the cluster).
    Url(String),
    /// A Service.
    Service { namespace: String, name: String },
}

/// The webhook configuration's checks: whether the DELETE hook fails open (`failurePolicy:
/// Ignore`), or the verdict's reason when protection is off whatever Lien does.
fn configuration_checks(facts: &Facts, checks: &mut Vec<Check>) -> Result<bool, Verdict> {
    let name = "webhook configuration";
    let config = match &facts.configuration {
        Lookup::Found(c) => c,
        Lookup::Missing => {
            let why = "ValidatingWebhookConfiguration lien is missing";
            checks.push(check(
                name,
                Level::Fail,
                format!("{why}: kube-apiserver asks no one before deleting an object in use (`lien run` creates it at start)"),
            ));
            return Err(Verdict::NotEnforced(why.to_owned()));
        }
        Lookup::Unreadable(e) => {
            checks.push(check(
                name,
                Level::Unknown,
                format!("ValidatingWebhookConfiguration lien could not be read: {e}"),
            ));
            return Err(Verdict::Unknown(format!(
                "the webhook configuration could not be read: {e}"
            )));
        }
    };
    let Some(delete) = hook(config, DELETE_HOOK) else {
        let why = format!("ValidatingWebhookConfiguration lien has no {DELETE_HOOK} webhook");
        checks.push(check(
            name,
            Level::Fail,
            format!("{why}: nothing refuses a DELETE of an object in use"),
        ));
        return Err(Verdict::NotEnforced(why));
    };
    if !covers_every_delete(&delete["rules"]) {
        let why = format!(
            "{DELETE_HOOK}'s rules do not send every DELETE (operations DELETE, resources */*)"
        );
        checks.push(check(name, Level::Fail, why.clone()));
        return Err(Verdict::NotEnforced(why));
    }
    let policy = delete["failurePolicy"].as_str().unwrap_or("Fail");
    let missing: Vec<String> = OTHER_HOOKS
        .iter()
        .filter(|(h, _)| hook(config, h).is_none())
        .map(|(h, what)| format!("{h} ({what})"))
        .collect();
    let mut detail = format!(
        "ValidatingWebhookConfiguration lien: {} webhooks, {DELETE_HOOK} failurePolicy {policy}",
        hooks(config).len()
    );
    let fails_open = policy == "Ignore";
    if fails_open {
        detail.push_str(": a DELETE goes through whenever Lien does not answer");
    }
    if !missing.is_empty() {
        write!(detail, "; missing: {}", missing.join(", ")).ok();
    }
    let level = if missing.is_empty() && !fails_open {
        Level::Ok
    } else {
        Level::Warn
    };
    checks.push(check(name, level, detail));
    match &facts.mutating {
        Lookup::Found(m) => {
            use lien_webhook::configuration::names::{GUARD, SEAL};
            let absent: Vec<String> = [
                (SEAL, "`kubectl lien delete --when-free` requests are not sealed, so Lien does not act on them"),
                (GUARD, "a new Usage is unguarded until Lien's controller adds its finalizer"),
            ]
            .into_iter()
            .filter(|(name, _)| hook(m, name).is_none())
            .map(|(name, what)| format!("{name} is missing: {what}"))
            .collect();
            if absent.is_empty() {
                checks.push(check(
                    "mutating configuration",
                    Level::Ok,
                    "MutatingWebhookConfiguration lien: deletion requests and replay records are sealed, Usages guarded from their creation",
                ));
            } else {
                checks.push(check(
                    "mutating configuration",
                    Level::Warn,
                    format!("MutatingWebhookConfiguration lien: {}", absent.join("; ")),
                ));
            }
        }
        Lookup::Missing => checks.push(check(
            "mutating configuration",
            Level::Warn,
            "MutatingWebhookConfiguration lien (seal.lien.dev, guard.lien.dev) is missing: `kubectl lien delete --when-free` requests are not sealed, so Lien does not act on them, and a new Usage is unguarded until Lien's controller adds its finalizer",
        )),
        Lookup::Unreadable(e) => checks.push(check(
            "mutating configuration",
            Level::Unknown,
            format!("MutatingWebhookConfiguration lien could not be read: {e}"),
        )),
    }
    if let Some(said) = &facts.controller_says {
        checks.push(check(
            "controller",
            Level::Fail,
            format!("the running controller reports its configuration changed: {said}"),
        ));
        return Err(Verdict::NotEnforced(format!(
            "the webhook configuration was changed: {said}"
        )));
    }
    Ok(fails_open)
}

fn reach_check(facts: &Facts, checks: &mut Vec<Check>) -> Option<String> {
    let name = "webhook";
    let (level, detail, down) = match facts.reach.as_ref()? {
        Reach::Ready { url, .. } => (Level::Ok, format!("answering at {url} (ready)"), None),
        // It answers reviews meanwhile (a replica just started): neither down nor known good.
        Reach::NotReady { url, answer } => (
            Level::Warn,
            format!(
                "{url} answers but is not ready ({answer}): its index is still syncing; ask again in a moment"
            ),
            None,
        ),
        Reach::Unreachable { url, error } => (
            Level::Fail,
            format!("{url} does not answer: {error}"),
            Some(format!("the webhook at {url} does not answer")),
        ),
        Reach::Endpoints {
            service,
            ready,
            total,
        } => {
            if *ready > 0 {
                (
                    Level::Ok,
                    format!("Service {service}: {ready} of {total} endpoints ready"),
                    None,
                )
            } else {
                (
                    Level::Fail,
                    format!("Service {service}: no ready endpoint ({total} in all)"),
                    Some(format!("Service {service} has no ready endpoint")),
                )
            }
        }
        Reach::NoService { service } => (
            Level::Fail,
            format!("Service {service}, which the configuration names, does not exist"),
            Some(format!("Service {service} does not exist")),
        ),
        Reach::Unknown { what, error } => (
            Level::Unknown,
            format!("{what} could not be read: {error}"),
            None,
        ),
    };
    checks.push(check(name, level, detail));
    down
}

/// The container that runs `lien run` in Lien's Deployment.
fn lien_container(deployment: &Value) -> Option<&Value> {
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array()?;
    containers
        .iter()
        .find(|c| c["name"] == "lien")
        .or_else(|| containers.first())
}

fn deployment_checks(facts: &Facts, checks: &mut Vec<Check>) {
    let Some(deployment) = &facts.deployment else {
        checks.push(check(
            "replicas",
            Level::Unknown,
            "Lien runs outside the cluster (the configuration names a URL): its replicas are not visible from here",
        ));
        // What the webhook itself says on /metrics.
        let (mode, version) = match &facts.reach {
            Some(Reach::Ready {
                client_authentication,
                version,
                ..
            }) => (client_authentication.as_deref(), version.as_deref()),
            _ => (None, None),
        };
        checks.push(client_authentication_check(mode));
        checks.push(version_check(version, &facts.plugin_version));
        return;
    };
    let d = match deployment {
        Lookup::Found(d) => d,
        Lookup::Missing => {
            checks.push(check(
                "replicas",
                Level::Warn,
                "no Deployment lien beside the Service: replicas, client authentication and version not checked",
            ));
            return;
        }
        Lookup::Unreadable(e) => {
            checks.push(check(
                "replicas",
                Level::Unknown,
                format!("Deployment lien could not be read: {e}"),
            ));
            return;
        }
    };
    let want = d["spec"]["replicas"].as_u64().unwrap_or(1);
    let ready = d["status"]["readyReplicas"].as_u64().unwrap_or(0);
    let level = if ready == 0 {
        Level::Fail
    } else if ready < want {
        Level::Warn
    } else {
        Level::Ok
    };
    checks.push(check(
        "replicas",
        level,
        format!("Deployment lien: {ready} of {want} ready"),
    ));
    let container = lien_container(d);
    let args: Vec<&str> = container
        .into_iter()
        .flat_map(|c| {
            ["command", "args"].into_iter().flat_map(move |f| {
                c[f].as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
            })
        })
        .collect();
    let env_set = container.is_some_and(|c| {
        c["env"].as_array().is_some_and(|env| {
            env.iter().any(|e| {
                e["name"] == "LIEN_CLIENT_CA_FILE"
                    && e["value"].as_str().is_some_and(|v| !v.is_empty())
            })
        })
    });
    let mode = if env_set || args.iter().any(|a| a.starts_with("--client-ca-file")) {
        "client_certificate"
    } else {
        "answer_only"
    };
    checks.push(client_authentication_check(Some(mode)));
    let image = container.and_then(|c| c["image"].as_str()).unwrap_or("");
    let tag = image
        .rsplit_once('@')
        .map_or(image, |(i, _)| i)
        .rsplit_once(':')
        .map(|(_, t)| t.trim_start_matches('v'))
        .filter(|t| !t.contains('/'));
    match tag {
        Some(t) => checks.push(version_check(Some(t), &facts.plugin_version)),
        None => checks.push(check(
            "version",
            Level::Unknown,
            format!(
                "the image {image:?} has no version tag; plugin {}",
                facts.plugin_version
            ),
        )),
    }
}

/// How the webhook authenticates the API server (`lien_webhook_client_authentication`'s
/// modes), and what that means for refusals.
fn client_authentication_check(mode: Option<&str>) -> Check {
    let name = "client authentication";
    match mode {
        Some("client_certificate") => check(
            name,
            Level::Ok,
            "client certificates (--client-ca-file): refusals are recorded, replayed and reported as events",
        ),
        Some("answer_only") => check(
            name,
            Level::Warn,
            "no --client-ca-file: refused DELETEs are not recorded (no replay, no refusal events); `kubectl lien delete --when-free` is how a deletion waits for its object to be free",
        ),
        Some("trust_all") => check(
            name,
            Level::Warn,
            "trusts every caller (a sandbox or test setting): anyone who reaches the port can have a refusal recorded",
        ),
        Some(other) => check(name, Level::Unknown, format!("mode {other:?}")),
        None => check(name, Level::Unknown, "not told by the webhook"),
    }
}

/// The server's version against the plugin's.
fn version_check(server: Option<&str>, plugin: &str) -> Check {
    match server {
        Some(v) if v == plugin => check("version", Level::Ok, format!("server and plugin {v}")),
        Some(v) => check(
            "version",
            Level::Warn,
            format!("server {v}, plugin {plugin}: the plugin reads what its version knows"),
        ),
        None => check(
            "version",
            Level::Unknown,
            format!("the server's version is not told; plugin {plugin}"),
        ),
    }
}

fn lease_check(facts: &Facts, checks: &mut Vec<Check>) {
    let name = "leader";
    match &facts.lease {
        Lookup::Found(l) => {
            let holder = l["spec"]["holderIdentity"].as_str().unwrap_or("");
            let duration = l["spec"]["leaseDurationSeconds"].as_i64().unwrap_or(15);
            let renewed = l["spec"]["renewTime"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| facts.now - t.as_second());
            match renewed {
                Some(age) if !holder.is_empty() && age <= duration => checks.push(check(
                    name,
                    Level::Ok,
                    format!("{holder}, renewed {age} s ago"),
                )),
                _ => checks.push(check(
                    name,
                    Level::Warn,
                    format!(
                        "no live leader ({}): labels, finalizers, statuses and replays wait; refusals are still answered",
                        match renewed {
                            Some(age) => format!("{holder:?} last renewed {age} s ago"),
                            None => "never renewed".to_owned(),
                        }
                    ),
                )),
            }
        }
        // A webhook that answers without a Lease: one replica run with --no-leader-election
        // (as `lien sandbox` runs it), which leads alone.
        Lookup::Missing if matches!(facts.reach, Some(Reach::Ready { .. })) => checks.push(check(
            name,
            Level::Ok,
            "no leader-election Lease: a single replica run with --no-leader-election leads alone",
        )),
        Lookup::Missing => checks.push(check(
            name,
            Level::Warn,
            "no leader-election Lease (lien-controller): a single replica run with --no-leader-election, or Lien has never run",
        )),
        Lookup::Unreadable(e) => checks.push(check(
            name,
            Level::Unknown,
            format!("the Lease could not be read: {e}"),
        )),
    }
}

fn ca_check(facts: &Facts, checks: &mut Vec<Check>) {
    let name = "CA bundle";
    match &facts.ca_not_after {
        Ok(times) => match times.iter().min() {
            None => checks.push(check(name, Level::Fail, "caBundle holds no certificate")),
            Some(&first) => {
                let left = first - facts.now;
                let when = jiff::Timestamp::from_second(first)
                    .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
                    .unwrap_or_else(|_| first.to_string());
                let (level, detail) = if left <= 0 {
                    (
                        Level::Fail,
                        format!("expired {when}: kube-apiserver cannot verify the webhook"),
                    )
                } else if left < CA_WARN_SECONDS {
                    (
                        Level::Warn,
                        format!(
                            "expires {when}, in {} days (Lien rotates its own CA; check it is running)",
                            left / 86_400
                        ),
                    )
                } else {
                    (
                        Level::Ok,
                        format!("expires {when}, in {} days", left / 86_400),
                    )
                };
                checks.push(check(name, level, detail));
            }
        },
        Err(e) => checks.push(check(
            name,
            Level::Fail,
            format!("caBundle does not parse: {e}"),
        )),
    }
}

fn source_checks(facts: &Facts, checks: &mut Vec<Check>) {
    for s in &facts.sources {
        if let Some(e) = &s.error {
            checks.push(check(
                "objects",
                Level::Unknown,
                format!("{}s could not be listed: {e}", s.kind),
            ));
            continue;
        }
        let total = s.ready + s.not_ready.len();
        let mut detail = format!("{}s: {} of {total} Ready", s.kind, s.ready);
        if s.not_ready.is_empty() {
            checks.push(check("objects", Level::Ok, detail));
            continue;
        }
        let shown: Vec<String> = s
            .not_ready
            .iter()
            .take(5)
            .map(|(n, r)| format!("{n} ({r})"))
            .collect();
        write!(detail, "; not Ready: {}", shown.join(", ")).ok();
        if s.not_ready.len() > shown.len() {
            write!(detail, " and {} more", s.not_ready.len() - shown.len()).ok();
        }
        checks.push(check("objects", Level::Warn, detail));
    }
}

/// The resources Usages and rules name that Lien's RBAC does not grant, and how to grant
/// them: nothing of those kinds is protected until then.
fn permission_check(facts: &Facts, checks: &mut Vec<Check>) {
    let resources: std::collections::BTreeSet<&str> = facts
        .sources
        .iter()
        .flat_map(|s| s.not_permitted.iter().map(String::as_str))
        .collect();
    if resources.is_empty() {
        return;
    }
    let named = facts
        .sources
        .iter()
        .flat_map(|s| &s.not_ready)
        .filter(|(_, reason)| reason == "NotPermitted")
        .count();
    let flags: Vec<String> = resources
        .iter()
        .map(|r| format!("--resource {r}"))
        .collect();
    checks.push(check(
        "permissions",
        Level::Warn,
        format!(
            "Lien's ServiceAccount may not watch {} ({named} Usage(s) or rule(s) name it; nothing \
             of it is protected): apply `lien manifests {}`, or add it to the Helm value \
             rbac.protectedResources",
            resources.iter().copied().collect::<Vec<_>>().join(", "),
            flags.join(" ")
        ),
    ));
}

/// The verdict and every check.
pub fn assess(facts: &Facts) -> Report {
    let mut checks = Vec::new();
    let configured = configuration_checks(facts, &mut checks);
    let down = reach_check(facts, &mut checks);
    let verdict = match (configured, down) {
        (Err(v), _) => v,
        (Ok(true), Some(down)) => Verdict::NotEnforced(format!(
            "{down}, and {DELETE_HOOK} has failurePolicy Ignore (fails open)"
        )),
        (Ok(false), Some(down)) => Verdict::FailingClosed(down),
        (Ok(_), None) => match facts.reach {
            Some(Reach::Unknown { .. }) | None => {
                Verdict::Unknown("whether the webhook answers could not be told".to_owned())
            }
            Some(Reach::NotReady { .. }) => {
                Verdict::Unknown("the webhook answers but is still syncing its index".to_owned())
            }
            Some(_) => Verdict::Enforced,
        },
    };
    if matches!(facts.configuration, Lookup::Found(_)) {
        ca_check(facts, &mut checks);
    }
    deployment_checks(facts, &mut checks);
    lease_check(facts, &mut checks);
    source_checks(facts, &mut checks);
    permission_check(facts, &mut checks);
    Report { verdict, checks }
}

/// The verdict's first line.
fn headline(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Enforced => {
            "Lien: enforced — kube-apiserver asks Lien before deleting an object in use, and Lien answers.".to_owned()
        }
        Verdict::FailingClosed(why) => format!(
            "Lien: failing closed — {why}: a DELETE of an object in use fails with an error; nothing is recorded or replayed."
        ),
        Verdict::NotEnforced(why) => format!(
            "Lien: NOT enforced — {why}: a DELETE of an object in use may go through."
        ),
        Verdict::Unknown(why) => format!("Lien: unknown — {why}."),
    }
}

/// For people: the verdict, then one line per check.
pub fn to_text(report: &Report) -> String {
    let mut out = headline(&report.verdict);
    out.push('\n');
    let width = report
        .checks
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        let level = match c.level {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
            Level::Unknown => "?",
        };
        writeln!(out, "  {level:<4}  {:<width$}  {}", c.name, c.detail).ok();
    }
    out
}

/// For scripts: `{"verdict", "reason", "checks": [{"name", "level", "detail"}]}`.
pub fn to_json(report: &Report) -> String {
    let reason = match &report.verdict {
        Verdict::Enforced => Value::Null,
        Verdict::FailingClosed(r) | Verdict::NotEnforced(r) | Verdict::Unknown(r) => json!(r),
    };
    let v = json!({
        "verdict": report.verdict.word(),
        "reason": reason,
        "checks": report.checks,
    });
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

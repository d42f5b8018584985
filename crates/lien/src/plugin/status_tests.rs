use serde_json::json;

use super::*;

const NOW: i64 = 1_800_000_000;

/// The configuration `lien run` writes (from the webhook crate's own builder), at `url`.
fn configuration(url: &str) -> Value {
    let opts = lien_webhook::ConfigurationOptions::new(lien_webhook::ClientConfig::Url(format!(
        "{url}/validate"
    )));
    lien_webhook::configuration::validating_webhook_configuration(&opts, "Y2E=")
}

fn facts(configuration: Lookup<Value>, reach: Option<Reach>) -> Facts {
    Facts {
        configuration,
        mutating: Lookup::Missing,
        reach,
        deployment: None,
        lease: Lookup::Missing,
        ca_not_after: Ok(vec![NOW + 300 * 86_400]),
        controller_says: None,
        sources: vec![],
        plugin_version: "0.1.0".to_owned(),
        now: NOW,
    }
}

/// The report's check `name`.
fn line(report: &Report, name: &str) -> Check {
    report
        .checks
        .iter()
        .find(|c| c.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} in {report:#?}"))
}

fn ready(url: &str) -> Option<Reach> {
    Some(Reach::Ready {
        url: url.to_owned(),
        client_authentication: Some("client_certificate".to_owned()),
        version: Some("0.1.0".to_owned()),
    })
}

#[test]
fn the_configuration_lien_writes_and_a_ready_webhook_are_enforced() {
    let url = "https://127.0.0.1:8443";
    let report = assess(&facts(Lookup::Found(configuration(url)), ready(url)));
    assert_eq!(report.verdict, Verdict::Enforced, "{report:#?}");
    assert!(report.enforced());
    assert_eq!(report.verdict.warning(), None);
    let text = to_text(&report);
    assert!(text.starts_with("Lien: enforced"), "{text}");
    assert!(
        text.contains("answering at https://127.0.0.1:8443 (ready)"),
        "{text}"
    );
    // Outside the cluster, the webhook's own /metrics says how it authenticates and its version.
    assert!(
        text.contains("client certificates (--client-ca-file)"),
        "{text}"
    );
    assert!(text.contains("server and plugin 0.1.0"), "{text}");
}

#[test]
fn a_missing_configuration_is_not_enforced() {
    let report = assess(&facts(Lookup::Missing, None));
    assert_eq!(
        report.verdict,
        Verdict::NotEnforced("ValidatingWebhookConfiguration lien is missing".into())
    );
    let warning = report.verdict.warning().expect("a warning");
    assert!(warning.contains("NOT enforced"), "{warning}");
    assert!(warning.contains("kubectl lien status"), "{warning}");
}

#[test]
fn a_webhook_that_does_not_answer_fails_closed_unless_the_policy_is_ignore() {
    let url = "https://127.0.0.1:8443";
    let down = Some(Reach::Unreachable {
        url: url.into(),
        error: "Connection refused".into(),
    });
    let report = assess(&facts(Lookup::Found(configuration(url)), down.clone()));
    assert!(
        matches!(&report.verdict, Verdict::FailingClosed(w) if w.contains("does not answer")),
        "{report:#?}"
    );
    assert!(
        report
            .verdict
            .warning()
            .expect("warning")
            .contains("fails with an error")
    );
    let mut open = configuration(url);
    open["webhooks"][0]["failurePolicy"] = json!("Ignore");
    assert_eq!(open["webhooks"][0]["name"], DELETE_HOOK);
    let report = assess(&facts(Lookup::Found(open.clone()), down));
    assert!(
        matches!(&report.verdict, Verdict::NotEnforced(w) if w.contains("failurePolicy Ignore")),
        "{report:#?}"
    );
    // Answering, an Ignore policy is enforced, with a warning on the configuration's line.
    let report = assess(&facts(Lookup::Found(open), ready(url)));
    assert_eq!(report.verdict, Verdict::Enforced);
    assert_eq!(report.checks[0].level, Level::Warn);
    assert!(
        report.checks[0]
            .detail
            .contains("goes through whenever Lien does not answer")
    );
}

#[test]
fn a_configuration_without_the_delete_hook_or_its_rule_is_not_enforced() {
    let url = "https://127.0.0.1:8443";
    let mut c = configuration(url);
    c["webhooks"][0]["rules"][0]["operations"] = json!(["UPDATE"]);
    let report = assess(&facts(Lookup::Found(c.clone()), ready(url)));
    assert!(
        matches!(report.verdict, Verdict::NotEnforced(_)),
        "{report:#?}"
    );
    c["webhooks"].as_array_mut().expect("hooks").remove(0);
    let report = assess(&facts(Lookup::Found(c), ready(url)));
    assert!(
        matches!(&report.verdict, Verdict::NotEnforced(w) if w.contains("no delete.lien.dev")),
        "{report:#?}"
    );
}

#[test]
fn the_controllers_word_that_its_configuration_changed_is_not_enforced() {
    let url = "https://127.0.0.1:8443";
    let mut f = facts(Lookup::Found(configuration(url)), ready(url));
    f.controller_says = Some("webhooks[delete.lien.dev].objectSelector differs".into());
    let report = assess(&f);
    assert!(
        matches!(&report.verdict, Verdict::NotEnforced(w) if w.contains("objectSelector differs")),
        "{report:#?}"
    );
}

/// A webhook that answers while its index syncs (a replica just started) is neither down nor
/// known good: unknown, no warning, and `status` exits non-zero.
#[test]
fn a_webhook_still_syncing_is_unknown() {
    let url = "https://127.0.0.1:8443";
    let reach = Some(Reach::NotReady {
        url: url.into(),
        answer: "503 index not synced".into(),
    });
    let report = assess(&facts(Lookup::Found(configuration(url)), reach));
    assert!(matches!(report.verdict, Verdict::Unknown(_)), "{report:#?}");
    assert!(!report.enforced());
    assert_eq!(report.verdict.warning(), None);
    assert_eq!(line(&report, "webhook").level, Level::Warn);
}

/// A webhook this machine cannot reach (no such name here, no route, no answer in time) says
/// nothing of what kube-apiserver reaches: unknown, no warning.
#[test]
fn a_webhook_unreachable_from_here_only_is_unknown_and_claims_nothing() {
    let url = "https://lien.internal:8443";
    let reach = Some(Reach::Unknown {
        what: format!("the webhook at {url}, from this machine"),
        error: "failed to lookup address information".into(),
    });
    let report = assess(&facts(Lookup::Found(configuration(url)), reach));
    assert!(matches!(report.verdict, Verdict::Unknown(_)), "{report:#?}");
    assert_eq!(report.verdict.warning(), None);
}

#[test]
fn an_unreadable_configuration_is_unknown_and_claims_nothing() {
    let report = assess(&facts(Lookup::Unreadable("forbidden".into()), None));
    assert!(matches!(report.verdict, Verdict::Unknown(_)));
    assert_eq!(report.verdict.warning(), None);
}

#[test]
fn a_service_without_ready_endpoints_fails_closed() {
    let opts = lien_webhook::ConfigurationOptions::new(lien_webhook::ClientConfig::Service {
        namespace: "lien-system".into(),
        name: "lien-webhook".into(),
        port: 443,
    });
    let c = lien_webhook::configuration::validating_webhook_configuration(&opts, "Y2E=");
    assert_eq!(
        client_target(&c),
        Some(ClientTarget::Service {
            namespace: "lien-system".into(),
            name: "lien-webhook".into()
        })
    );
    let endpoints = |ready| {
        Some(Reach::Endpoints {
            service: "lien-system/lien-webhook".into(),
            ready,
            total: 2,
        })
    };
    let report = assess(&facts(Lookup::Found(c.clone()), endpoints(0)));
    assert!(
        matches!(&report.verdict, Verdict::FailingClosed(w) if w.contains("no ready endpoint")),
        "{report:#?}"
    );
    assert_eq!(
        assess(&facts(Lookup::Found(c), endpoints(1))).verdict,
        Verdict::Enforced
    );
}

#[test]
fn the_deployment_says_replicas_client_authentication_and_version() {
    let url = "https://127.0.0.1:8443";
    let mut f = facts(Lookup::Found(configuration(url)), ready(url));
    let deployment = |args: Value, image: &str, ready: u64| {
        json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [
                 {"name": "lien", "image": image, "args": args}]}}},
               "status": {"readyReplicas": ready}})
    };
    f.deployment = Some(Lookup::Found(deployment(
        json!(["run", "--client-ca-file=/etc/lien/client-ca.crt"]),
        "ghcr.io/lien-dev/lien:v0.1.0",
        2,
    )));
    let report = assess(&f);
    assert_eq!(line(&report, "replicas").level, Level::Ok);
    assert_eq!(line(&report, "client authentication").level, Level::Ok);
    assert_eq!(line(&report, "version").level, Level::Ok);
    f.deployment = Some(Lookup::Found(deployment(json!(["run"]), "lien:0.0.9", 1)));
    let report = assess(&f);
    assert_eq!(line(&report, "replicas").level, Level::Warn);
    assert_eq!(
        line(&report, "replicas").detail,
        "Deployment lien: 1 of 2 ready"
    );
    let auth = line(&report, "client authentication");
    assert_eq!(auth.level, Level::Warn);
    assert!(auth.detail.contains("--when-free"), "{auth:?}");
    assert!(
        line(&report, "version")
            .detail
            .contains("server 0.0.9, plugin 0.1.0")
    );
}

#[test]
fn the_lease_the_ca_and_the_objects_are_reported() {
    let url = "https://127.0.0.1:8443";
    let mut f = facts(Lookup::Found(configuration(url)), ready(url));
    let renewed = jiff::Timestamp::from_second(NOW - 3).expect("time");
    f.lease = Lookup::Found(json!({"spec": {"holderIdentity": "lien-0",
        "leaseDurationSeconds": 15, "renewTime": renewed.to_string()}}));
    f.ca_not_after = Ok(vec![NOW + 3 * 86_400, NOW + 300 * 86_400]);
    f.sources = vec![SourceCount {
        kind: "Usage".into(),
        ready: 3,
        not_ready: vec![("shop/ghost".into(), "UnknownKind".into())],
        error: None,
        not_permitted: Default::default(),
    }];
    let report = assess(&f);
    let text = to_text(&report);
    assert!(text.contains("lien-0, renewed 3 s ago"), "{text}");
    assert!(text.contains("in 3 days"), "{text}");
    assert!(
        text.contains("Usages: 3 of 4 Ready; not Ready: shop/ghost (UnknownKind)"),
        "{text}"
    );
    // Enforcement is about the webhook: a warning elsewhere does not change the verdict.
    assert_eq!(report.verdict, Verdict::Enforced);
    f.ca_not_after = Ok(vec![NOW - 1]);
    let report = assess(&f);
    let ca = report
        .checks
        .iter()
        .find(|c| c.name == "CA bundle")
        .expect("ca");
    assert_eq!(ca.level, Level::Fail, "{ca:?}");
    let json: Value = serde_json::from_str(&to_json(&report)).expect("json");
    assert_eq!(json["verdict"], "enforced");
    assert!(
        json["checks"]
            .as_array()
            .expect("checks")
            .iter()
            .any(|c| c["level"] == "fail")
    );
}

/// The mutating configuration: both hooks as `lien run` writes them are well; one without the
/// guard (an older Lien's, or edited) is a warning naming what is not guarded.
#[test]
fn the_mutating_configuration_names_a_missing_guard() {
    let url = "https://127.0.0.1:8443";
    let opts = lien_webhook::ConfigurationOptions::new(lien_webhook::ClientConfig::Url(format!(
        "{url}/validate"
    )));
    let mutating = lien_webhook::mutating_webhook_configuration(&opts, "Y2E=");
    let mut f = facts(Lookup::Found(configuration(url)), ready(url));
    f.mutating = Lookup::Found(mutating.clone());
    let check = line(&assess(&f), "mutating configuration");
    assert_eq!(check.level, Level::Ok, "{check:?}");

    let mut without_guard = mutating;
    without_guard["webhooks"]
        .as_array_mut()
        .expect("webhooks")
        .retain(|h| h["name"] != lien_webhook::configuration::names::GUARD);
    f.mutating = Lookup::Found(without_guard);
    let check = line(&assess(&f), "mutating configuration");
    assert_eq!(check.level, Level::Warn, "{check:?}");
    assert!(
        check.detail.contains("guard.lien.dev is missing")
            && check.detail.contains("a new Usage is unguarded"),
        "{check:?}"
    );
}

/// A Usage naming a kind Lien may not watch: the check names the resource and the flag, read
/// back from the condition message the controller writes.
#[test]
fn a_kind_lien_may_not_watch_is_named_with_the_flag_that_grants_it() {
    let url = "https://127.0.0.1:8443";
    let mut f = facts(Lookup::Found(configuration(url)), ready(url));
    let message = lien_decide::resolve::not_permitted_message("spec.of", "Secret", "v1", "secrets");
    let resource = lien_decide::resolve::not_permitted_resource(&message).expect("named");
    f.sources = vec![SourceCount {
        kind: "Usage".into(),
        ready: 1,
        not_ready: vec![("shop/db".into(), "NotPermitted".into())],
        error: None,
        not_permitted: [resource.to_owned()].into(),
    }];
    let report = assess(&f);
    let check = report
        .checks
        .iter()
        .find(|c| c.name == "permissions")
        .expect("a permissions check");
    assert_eq!(check.level, Level::Warn);
    assert!(
        check.detail.contains("may not watch secrets")
            && check.detail.contains("--resource secrets"),
        "{check:?}"
    );
    f.sources[0].not_permitted.clear();
    assert!(!assess(&f).checks.iter().any(|c| c.name == "permissions"));
}

//! `lien run`: the controller and the webhook against a cluster (in-cluster config, or the
//! kubeconfig / context kube-rs finds).

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use lien::runtime::{Lien, LienConfig, WebhookCa, install_crds};
use lien_controller::{ControllerConfig, LeaderConfig};
use lien_webhook::ClientConfig;

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub cluster: super::cluster::ClusterArgs,
    /// Address the webhook listens on.
    #[arg(long, default_value = "0.0.0.0:8443", env = "LIEN_WEBHOOK_ADDR")]
    pub webhook_addr: SocketAddr,
    /// Namespace of the webhook's Service (and of the leader-election Lease).
    #[arg(long, default_value = "lien-system", env = "LIEN_NAMESPACE")]
    pub namespace: String,
    /// Name of the webhook's Service.
    #[arg(long, default_value = "lien-webhook")]
    pub service_name: String,
    /// Port of the webhook's Service.
    #[arg(long, default_value_t = 443)]
    pub service_port: u16,
    /// Where kube-apiserver calls the webhook when Lien runs outside the cluster
    /// (`https://HOST[:PORT]`, no path): the webhook configurations name this URL (with
    /// `/validate` and `/mutate`) instead of the Service, and the serving certificate is
    /// issued for HOST (a DNS name or an IP address). Several replicas behind one load
    /// balancer share one URL. See docs/operations.md, "Running Lien outside the cluster".
    #[arg(long, value_name = "URL", value_parser = parse_webhook_url,
          conflicts_with_all = ["service_name", "service_port"])]
    pub webhook_url: Option<WebhookUrl>,
    /// This replica's identity in leader election (the pod name).
    #[arg(long, env = "POD_NAME", default_value = "lien")]
    pub identity: String,
    /// Skip leader election (a single replica only).
    #[arg(long)]
    pub no_leader_election: bool,
    /// Install or update Lien's CRDs at start.
    #[arg(long)]
    pub install_crds: bool,
    /// Groups whose members may arm break-glass (empty disables break-glass).
    #[arg(long = "break-glass-group")]
    pub break_glass_groups: Vec<String>,
    /// How long a refused DELETE stays replayable, in hours.
    #[arg(long, default_value_t = 24)]
    pub replay_ttl_hours: u64,
    /// Refuse a Usage whose creator may not `update` the object in its `spec.of` (asked with a
    /// SubjectAccessReview). `--usage-access-check=false` turns the check off.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub usage_access_check: bool,
    /// PEM file of the CA that issued the client certificate the API server presents to the
    /// webhook (its AdmissionConfiguration's kubeConfigFile). Without it, refused DELETEs are
    /// not recorded: no replay and no refusal events (docs/ARCHITECTURE.md, "Threat model").
    #[arg(long, env = "LIEN_CLIENT_CA_FILE", value_name = "PATH")]
    pub client_ca_file: Option<std::path::PathBuf>,
    /// A file holding the key replay records are sealed with (at least 32 bytes, the same for
    /// every replica). Default: the Secret --replay-key-secret, created if absent.
    #[arg(long, value_name = "PATH")]
    pub replay_key_file: Option<std::path::PathBuf>,
    /// The Secret in --namespace holding the replay key (data.key), readable only by Lien.
    #[arg(long, default_value = lien_controller::writer::REPLAY_KEY_SECRET)]
    pub replay_key_secret: String,
    /// A CascadeRule child whose deletion has not progressed for this long is named as stuck
    /// on its parent (events, the rule's status). E.g. `5m`, `90s`, `1h`.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub cascade_stuck_after: Duration,
    /// A CascadeRule parent's first "still waiting" report comes this long after its deletion
    /// started; then reports back off, doubling up to --cascade-report-max.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub cascade_report_after: Duration,
    /// The longest interval between two "still waiting" reports on one CascadeRule parent.
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub cascade_report_max: Duration,
    /// First retry of a refused or failed CascadeRule write (doubles up to
    /// --cascade-retry-max).
    #[arg(long, default_value = "500ms", value_parser = parse_duration, value_name = "DURATION")]
    pub cascade_retry_base: Duration,
    /// Longest retry delay of a CascadeRule write.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub cascade_retry_max: Duration,
    /// First retry of a failed write pass (labels, finalizers, status, replays; doubles up to
    /// --write-retry-max).
    #[arg(long, default_value = "50ms", value_parser = parse_duration, value_name = "DURATION")]
    pub write_retry_base: Duration,
    /// Longest retry delay of a failed write pass.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub write_retry_max: Duration,
    /// The Secret in --namespace holding the webhook's CA set (certificates and keys), shared
    /// by every replica so that each one's serving certificate verifies against the one
    /// published caBundle; created if absent, rotated by the leader.
    #[arg(long, default_value = lien::webhook_ca::WEBHOOK_CA_SECRET)]
    pub webhook_ca_secret: String,
    /// Serve this certificate (PEM, leaf first) instead of one from Lien's own CA: issued
    /// elsewhere, e.g. cert-manager's Secret mounted as files (`tls.crt`). Needs --tls-key-file
    /// and --tls-ca-file; the three are read again every --tls-reload and served as renewed.
    #[arg(long, env = "LIEN_TLS_CERT_FILE", value_name = "PATH",
          requires_all = ["tls_key_file", "tls_ca_file"])]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The key of --tls-cert-file (PEM; cert-manager's `tls.key`).
    #[arg(
        long,
        env = "LIEN_TLS_KEY_FILE",
        value_name = "PATH",
        requires = "tls_cert_file"
    )]
    pub tls_key_file: Option<std::path::PathBuf>,
    /// The CA bundle that verifies --tls-cert-file (PEM; cert-manager's `ca.crt`): what Lien
    /// publishes as its webhook configurations' caBundle.
    #[arg(
        long,
        env = "LIEN_TLS_CA_FILE",
        value_name = "PATH",
        requires = "tls_cert_file"
    )]
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// How often --tls-cert-file, --tls-key-file and --tls-ca-file are read again (a kubelet
    /// updates a mounted Secret within about a minute of cert-manager renewing it).
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub tls_reload: Duration,
    /// Lien's own identity as the API server names it: the only user whose writes of
    /// lien.dev/deletion-attempt the mutating webhook lets through. Default: asked at start
    /// (a SelfSubjectReview), else system:serviceaccount:lien-system:lien.
    #[arg(long, env = "LIEN_OWN_USERNAME", value_name = "USER")]
    pub own_username: Option<String>,
    /// At most this many admission reviews worked on at once; past it a review waits up to a
    /// second for a slot, then is answered 429 with Retry-After, which the API server retries.
    /// A review from the index takes microseconds: the bound matters when live reads or access
    /// checks are slow.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..), value_name = "N")]
    pub webhook_max_concurrency: u32,
    /// Without --client-ca-file anyone who reaches the webhook's port can post a review that
    /// makes Lien ask the API server a SubjectAccessReview (a deletion request, a Usage or
    /// rule): at most this many such questions a second (a burst of twice that); a review past
    /// it is refused 429 ("retry shortly") without asking. With --client-ca-file such callers
    /// are refused before anything is asked.
    #[arg(long, default_value_t = lien_webhook::DEFAULT_UNAUTHENTICATED_CHECKS_PER_SECOND, value_parser = clap::value_parser!(u32).range(1..), value_name = "PER_SECOND")]
    pub unauthenticated_access_checks: u32,
    /// How often each replica re-reads the webhook CA's Secret (and the leader rotates it).
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub webhook_ca_sync: Duration,
    /// Leader election: how long a claim on the Lease lasts without renewal (how long a killed
    /// leader's successor waits). `15s`, `500ms`.
    #[arg(long, default_value = "15s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease_duration: Duration,
    /// Leader election: how long the leader keeps trying to renew before it steps down
    /// (shorter than --lease-duration).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease_renew_deadline: Duration,
    /// Leader election: how often to try to acquire or renew the Lease (shorter than
    /// --lease-renew-deadline).
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub lease_retry_period: Duration,
}

/// `5m`, `90s`, `1h30m`, `500ms` (jiff's friendly duration format), or plain seconds (`15`).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map(Duration::from_secs)
            .map_err(|e| format!("{s:?}: {e}"));
    }
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("{s:?} is not a duration such as 500ms, 15s, 5m or 1h30m: {e}"))?;
    Duration::try_from(d).map_err(|_| format!("{s:?}: a duration must not be negative"))
}

/// `--webhook-url`: where kube-apiserver calls the webhook from outside the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookUrl {
    /// `https://HOST[:PORT]`, without a trailing slash.
    pub base: String,
    /// HOST, the name the serving certificate is issued for (an IPv6 address without its
    /// brackets).
    pub host: String,
}

/// `https://HOST[:PORT]` with nothing after it (a trailing `/` aside): kube-apiserver refuses a
/// webhook URL that is not https or carries user info, a query or a fragment, and Lien adds its
/// own paths (`/validate`, `/mutate`).
fn parse_webhook_url(s: &str) -> Result<WebhookUrl, String> {
    let shape = "a URL such as https://127.0.0.1:8443 or https://lien.example.com:8443";
    let rest = s.strip_prefix("https://").ok_or_else(|| {
        format!("{s:?} is not https: kube-apiserver calls webhooks over TLS only ({shape})")
    })?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "{s:?} must be https://HOST[:PORT] and nothing more (Lien adds /validate and /mutate; no path, query, fragment or user): {shape}"
        ));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("{s:?}: an IPv6 address needs its closing ]"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("{s:?}: expected :PORT after the IPv6 address"))?,
            ),
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{s:?}: {host:?} is not an IPv6 address"));
        }
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(format!("{s:?}: {port:?} is not a port (1-65535)")),
        }
    }
    if host.is_empty() {
        return Err(format!("{s:?} names no host ({shape})"));
    }
    Ok(WebhookUrl {
        base: format!("https://{authority}"),
        host: host.to_owned(),
    })
}

/// Each retry or report back-off starts positive and at most its maximum.
fn check_backoff(args: &RunArgs) -> anyhow::Result<()> {
    for (first, base, last, max) in [
        (
            "--write-retry-base",
            args.write_retry_base,
            "--write-retry-max",
            args.write_retry_max,
        ),
        (
            "--cascade-retry-base",
            args.cascade_retry_base,
            "--cascade-retry-max",
            args.cascade_retry_max,
        ),
        (
            "--cascade-report-after",
            args.cascade_report_after,
            "--cascade-report-max",
            args.cascade_report_max,
        ),
    ] {
        if base.is_zero() || base > max {
            anyhow::bail!("{first} ({base:?}) must be positive and at most {last} ({max:?})");
        }
    }
    Ok(())
}

/// The leader-election timings must nest like client-go's: retry < renew deadline < duration.
fn check_lease_timing(args: &RunArgs) -> anyhow::Result<()> {
    if args.lease_retry_period.is_zero()
        || args.lease_retry_period >= args.lease_renew_deadline
        || args.lease_renew_deadline >= args.lease_duration
    {
        anyhow::bail!(
            "leader election needs 0 < --lease-retry-period ({:?}) < --lease-renew-deadline ({:?}) < --lease-duration ({:?}): a leader must step down before its claim can expire, or two replicas could lead at once",
            args.lease_retry_period,
            args.lease_renew_deadline,
            args.lease_duration
        );
    }
    Ok(())
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    check_lease_timing(&args)?;
    if args.webhook_ca_sync.is_zero() {
        anyhow::bail!("--webhook-ca-sync must be positive (e.g. 60s)");
    }
    check_backoff(&args)?;
    // Like kubectl: the in-cluster service account inside a pod, else $KUBECONFIG (or
    // ~/.kube/config) and its current context (`tests/ha.rs` runs `lien run` this way), or
    // --kubeconfig/--context.
    let connected = args.cluster.connect().await?;
    super::cluster::check_reachable(&connected).await?;
    let client = connected.client.clone();
    if args.install_crds {
        install_crds(&client).await?;
    }
    // Before anything starts: a missing namespace or CRD said once, with the fix, rather
    // than as a permission error or a loop of warnings later.
    super::cluster::preflight(&connected, &args.namespace).await?;
    let leader = (!args.no_leader_election).then(|| LeaderConfig {
        namespace: args.namespace.clone(),
        identity: args.identity.clone(),
        lease_duration: args.lease_duration,
        renew_deadline: args.lease_renew_deadline,
        retry_period: args.lease_retry_period,
        ..LeaderConfig::default()
    });
    let policy = lien_webhook::validate::Policy {
        break_glass_groups: args.break_glass_groups.clone(),
        ..Default::default()
    };
    let replay_key = match &args.replay_key_file {
        Some(path) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading --replay-key-file {}", path.display()))?;
            lien_controller::ReplayKey::from_bytes(&bytes)
                .with_context(|| format!("--replay-key-file {}", path.display()))?
        }
        None => {
            lien_controller::writer::replay_key_from_secret(
                &client,
                &args.namespace,
                &args.replay_key_secret,
            )
            .await?
        }
    };
    let webhook_client_ca = match &args.client_ca_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading --client-ca-file {}", path.display()))?,
        ),
        None => None,
    };
    // In the cluster, the API server calls the Service and the certificate names it; outside,
    // it calls the URL and the certificate names its host.
    let (webhook_client, webhook_names) = match &args.webhook_url {
        Some(url) => (
            ClientConfig::Url(format!(
                "{}{}",
                url.base,
                lien_webhook::configuration::VALIDATE_PATH
            )),
            vec![url.host.clone()],
        ),
        None => {
            let service_dns = format!("{}.{}.svc", args.service_name, args.namespace);
            (
                ClientConfig::Service {
                    namespace: args.namespace.clone(),
                    name: args.service_name.clone(),
                    port: args.service_port,
                },
                vec![service_dns.clone(), format!("{service_dns}.cluster.local")],
            )
        }
    };
    let config = LienConfig {
        webhook_addr: args.webhook_addr,
        webhook_client,
        webhook_names,
        policy,
        controller: ControllerConfig {
            leader,
            replay_ttl: Duration::from_secs(args.replay_ttl_hours * 3600),
            replay_key: Some(replay_key),
            retry_base: args.write_retry_base,
            retry_max: args.write_retry_max,
            ..ControllerConfig::default()
        },
        usage_access_check: args.usage_access_check,
        webhook_client_ca,
        cascade: lien_controller::cascade::CascadeConfig {
            stuck_after: args.cascade_stuck_after,
            report_after: args.cascade_report_after,
            report_max: args.cascade_report_max,
            retry_base: args.cascade_retry_base,
            retry_max: args.cascade_retry_max,
            ..Default::default()
        },
        webhook_ca: match (&args.tls_cert_file, &args.tls_key_file, &args.tls_ca_file) {
            (Some(cert), Some(key), Some(ca)) => WebhookCa::Files {
                cert: cert.clone(),
                key: key.clone(),
                ca: ca.clone(),
                reload_every: args.tls_reload,
            },
            _ => WebhookCa::Secret {
                namespace: args.namespace.clone(),
                name: args.webhook_ca_secret.clone(),
                sync_every: args.webhook_ca_sync,
            },
        },
        own_username: args.own_username.clone(),
        webhook_max_concurrency: usize::try_from(args.webhook_max_concurrency)
            .unwrap_or(usize::MAX),
        webhook_unauthenticated_access_checks: args.unauthenticated_access_checks,
    };
    let lien = Lien::start(client, config).await?;
    tracing::info!(webhook = %lien.webhook_addr(), "lien is running");
    shutdown_signal().await;
    tracing::info!("shutting down");
    lien.shutdown().await;
    Ok(())
}

/// SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn args(extra: &[&str]) -> RunArgs {
        Cli::try_parse_from(std::iter::once("lien").chain(extra.iter().copied()))
            .expect("parses")
            .run
    }

    #[test]
    fn lease_timing_defaults_are_client_gos_and_flags_override_them() {
        let a = args(&[]);
        assert_eq!(a.lease_duration, Duration::from_secs(15));
        assert_eq!(a.lease_renew_deadline, Duration::from_secs(10));
        assert_eq!(a.lease_retry_period, Duration::from_secs(2));
        let d = LeaderConfig::default();
        assert_eq!(
            (d.lease_duration, d.renew_deadline, d.retry_period),
            (
                a.lease_duration,
                a.lease_renew_deadline,
                a.lease_retry_period
            )
        );
        check_lease_timing(&a).expect("defaults nest");
        let fast = args(&[
            "--lease-duration=2s",
            "--lease-renew-deadline=1500ms",
            "--lease-retry-period=200ms",
        ]);
        assert_eq!(fast.lease_retry_period, Duration::from_millis(200));
        check_lease_timing(&fast).expect("nested");
    }

    #[test]
    fn lease_timing_that_could_make_two_leaders_is_refused_naming_the_flags() {
        let bad = args(&["--lease-duration=2s", "--lease-renew-deadline=3s"]);
        let err = check_lease_timing(&bad).expect_err("renew deadline past the lease");
        assert!(err.to_string().contains("--lease-renew-deadline"), "{err}");
        let err = parse_duration("5 parsecs").expect_err("unit");
        assert!(err.contains("500ms, 15s, 5m or 1h30m"), "{err}");
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn a_webhook_url_is_https_host_and_port_only_and_names_the_certificate() {
        let url = parse_webhook_url("https://127.0.0.1:8443").expect("parses");
        assert_eq!(url.base, "https://127.0.0.1:8443");
        assert_eq!(url.host, "127.0.0.1");
        let url = parse_webhook_url("https://lien.example.com/").expect("parses");
        assert_eq!(url.base, "https://lien.example.com");
        assert_eq!(url.host, "lien.example.com");
        let url = parse_webhook_url("https://[::1]:9443").expect("parses");
        assert_eq!(
            (url.base.as_str(), url.host.as_str()),
            ("https://[::1]:9443", "::1")
        );
        for (bad, says) in [
            ("http://127.0.0.1:8443", "not https"),
            ("127.0.0.1:8443", "not https"),
            ("https://127.0.0.1:8443/validate", "no path"),
            ("https://127.0.0.1:8443?x=1", "no path"),
            ("https://user@127.0.0.1", "no path"),
            ("https://127.0.0.1:0", "not a port"),
            ("https://127.0.0.1:https", "not a port"),
            ("https://:8443", "names no host"),
            ("https://[::1", "closing ]"),
            ("https://[zz]:1", "not an IPv6 address"),
        ] {
            let err = parse_webhook_url(bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn the_webhook_url_makes_a_url_configuration_and_excludes_the_service_flags() {
        let a = args(&["--webhook-url=https://127.0.0.1:8443"]);
        assert_eq!(a.webhook_url.map(|u| u.host), Some("127.0.0.1".to_owned()));
        assert!(args(&[]).webhook_url.is_none());
        let err = Cli::try_parse_from([
            "lien",
            "--webhook-url=https://127.0.0.1:8443",
            "--service-name=other",
        ])
        .expect_err("one or the other");
        assert!(err.to_string().contains("--service-name"), "{err}");
    }

    #[test]
    fn back_off_flags_default_to_the_controllers_and_must_nest() {
        let a = args(&[]);
        let controller = ControllerConfig::default();
        assert_eq!(
            (a.write_retry_base, a.write_retry_max),
            (controller.retry_base, controller.retry_max)
        );
        let cascade = lien_controller::cascade::CascadeConfig::default();
        assert_eq!(
            (
                a.cascade_report_after,
                a.cascade_report_max,
                a.cascade_retry_base,
                a.cascade_retry_max
            ),
            (
                cascade.report_after,
                cascade.report_max,
                cascade.retry_base,
                cascade.retry_max
            )
        );
        check_backoff(&a).expect("defaults nest");
        let err = check_backoff(&args(&["--write-retry-base=20s"])).expect_err("past the max");
        assert!(err.to_string().contains("--write-retry-max"), "{err}");
        let err = check_backoff(&args(&["--cascade-report-after=0s"])).expect_err("zero");
        assert!(err.to_string().contains("--cascade-report-after"), "{err}");
    }
}

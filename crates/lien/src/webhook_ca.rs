//! The webhook's CA set shared by every replica through a Secret (`lien-system/lien-webhook-ca`).
//!
//! Every replica serves behind one Service and the ValidatingWebhookConfiguration has one
//! `caBundle`, so every replica must present a certificate that bundle trusts. The first replica
//! to start creates the Secret with a fresh [`CaSet`]; the others read it (replicas starting
//! together race: the loser's create gets 409 and it reads the winner's, as for the replay key).
//! Each replica issues its own serving certificate from the set's signing CA.
//!
//! Rotation ([`CaSet::rotate`]) is the leader's alone: it writes the new set with the
//! resourceVersion it read (two leaders in a hand-over cannot both win), then adopts it. Every
//! replica re-reads the Secret every `every` and adopts what it finds (new signing CA → new
//! serving certificate, new bundle → published; the leader's reconciler writes it into the
//! configuration). Why lag between replicas is safe: `lien_webhook::tls`'s module docs.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use lien_webhook::tls::CaSet;
use lien_webhook::{CertManager, TlsSettings};
use time::OffsetDateTime;
use tokio::sync::watch;

/// The default name of the Secret holding the webhook's CA set.
pub const WEBHOOK_CA_SECRET: &str = "lien-webhook-ca";
/// The Secret's data key.
pub const WEBHOOK_CA_FIELD: &str = "ca-set.json";

fn secret(namespace: &str, name: &str, set: &CaSet, resource_version: Option<String>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some([("app.kubernetes.io/name".to_owned(), "lien".to_owned())].into()),
            resource_version,
            ..Default::default()
        },
        type_: Some("Opaque".to_owned()),
        data: Some([(WEBHOOK_CA_FIELD.to_owned(), ByteString(set.to_json()))].into()),
        ..Default::default()
    }
}

fn parse(secret: &Secret, namespace: &str, name: &str) -> anyhow::Result<CaSet> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(WEBHOOK_CA_FIELD))
        .map(|b| b.0.as_slice())
        .unwrap_or_default();
    CaSet::from_json(bytes).with_context(|| {
        format!(
            "Secret {namespace}/{name} (data.{WEBHOOK_CA_FIELD}); delete it to make Lien create a new CA set"
        )
    })
}

/// Reads the CA set from the Secret, creating it with a fresh set if absent.
pub async fn load_or_create(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    settings: &TlsSettings,
) -> anyhow::Result<CaSet> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let existing = api
        .get_opt(name)
        .await
        .with_context(|| format!("reading Secret {namespace}/{name}"))?;
    let secret = match existing {
        Some(secret) => secret,
        None => {
            let set = CaSet::generate(settings, OffsetDateTime::now_utc())
                .context("creating the webhook's CA")?;
            match api
                .create(&PostParams::default(), &secret(namespace, name, &set, None))
                .await
            {
                Ok(created) => {
                    tracing::info!(namespace, name, "created the webhook CA's Secret");
                    created
                }
                // Another replica created it first: serve from its CA.
                Err(kube::Error::Api(e)) if e.code == 409 => api
                    .get(name)
                    .await
                    .with_context(|| format!("reading Secret {namespace}/{name}"))?,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating Secret {namespace}/{name}"));
                }
            }
        }
    };
    parse(&secret, namespace, name)
}

/// One sync: read the Secret; as leader, rotate and write back; adopt the result. Returns what
/// the replica now serves from.
async fn sync_once(
    api: &Api<Secret>,
    namespace: &str,
    name: &str,
    certs: &CertManager,
    leader: bool,
) -> anyhow::Result<()> {
    let now = OffsetDateTime::now_utc();
    let (mut set, resource_version) = match api.get_opt(name).await? {
        Some(secret) => (
            parse(&secret, namespace, name)?,
            secret.metadata.resource_version.clone(),
        ),
        None if leader => {
            // Deleted: the leader restores it from the set it serves, so every replica keeps
            // being trusted by the bundle already published.
            let set = certs.ca_set();
            let created = api
                .create(&PostParams::default(), &secret(namespace, name, &set, None))
                .await?;
            tracing::warn!(namespace, name, "restored the webhook CA's Secret");
            (set, created.metadata.resource_version)
        }
        // A follower keeps serving what it has; the leader restores the Secret.
        None => (certs.ca_set(), None),
    };
    if leader && resource_version.is_some() {
        let mut next = set.clone();
        if next.rotate(certs.settings(), now)? {
            api.replace(
                name,
                &PostParams::default(),
                &secret(namespace, name, &next, resource_version),
            )
            .await
            .context("writing the rotated CA set")?;
            tracing::info!(namespace, name, "rotated the webhook's CA set");
            set = next;
        }
    }
    let rotation = certs.adopt(set, now)?;
    if rotation != lien_webhook::Rotation::default() {
        tracing::info!(
            serving = rotation.serving,
            bundle = rotation.bundle,
            "webhook certificates follow the shared CA set"
        );
    }
    Ok(())
}

/// Keeps `certs` in step with the Secret every `every` until `stop`; rotates as leader.
pub fn spawn_sync(
    client: kube::Client,
    namespace: String,
    name: String,
    certs: Arc<CertManager>,
    leader: watch::Receiver<bool>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let api: Api<Secret> = Api::namespaced(client, &namespace);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            let is_leader = *leader.borrow();
            if let Err(e) = sync_once(&api, &namespace, &name, &certs, is_leader).await {
                // The current certificate keeps being served; the next tick tries again.
                tracing::warn!(error = format!("{e:#}"), "syncing the webhook's CA set");
            }
        }
    })
}

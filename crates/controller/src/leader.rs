//! Leader election through a `coordination.k8s.io/v1` Lease.
//!
//! # Data model
//!
//! One Lease names the holder (`holderIdentity`) and how long its claim lasts
//! (`leaseDurationSeconds`) after its last `renewTime`. Like client-go, a candidate judges expiry
//! by its **own** clock — the time it last saw the lease record change — never by comparing the
//! holder's `renewTime` with its clock, so clock skew between nodes cannot cause two leaders.
//! Every update is a replace carrying the resourceVersion read, so two candidates racing for an
//! expired lease cannot both win. The holder renews every `retry_period` and steps down if it
//! could not renew within `renew_deadline`; on shutdown it releases the lease (empty holder), so
//! a successor takes over at its next try instead of waiting for expiry.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// Leader-election settings.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This candidate's identity (pod name).
    pub identity: String,
    /// How long a claim lasts without renewal (client-go default 15 s).
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before stepping down (default 10 s).
    pub renew_deadline: Duration,
    /// How often to try to acquire or renew (default 2 s).
    pub retry_period: Duration,
}

/// The Lease Lien's replicas elect their leader with, in Lien's namespace.
pub const DEFAULT_LEASE: &str = "lien-controller";

impl Default for LeaderConfig {
    fn default() -> Self {
        Self {
            namespace: "lien-system".into(),
            name: DEFAULT_LEASE.into(),
            identity: "lien-controller".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A failed Lease call.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Reading the Lease.
    #[error("reading lease {name}: {source}")]
    Get {
        /// Lease name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// Creating or updating the Lease.
    #[error("updating lease {name}: {source}")]
    Update {
        /// Lease name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

impl LeaderError {
    /// A bounded label for metrics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Get { .. } => "lease_get",
            Self::Update { .. } => "lease_update",
        }
    }
}

/// Runs the election until `shutdown` resolves, publishing leadership on `leader`.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// The record last seen and when (our clock).
    observed: Option<(LeaseSpec, Instant)>,
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl LeaderElector {
    /// An elector for `config`.
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    /// One try: acquire, renew or observe. Returns whether this candidate holds the lease.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let name = self.config.name.clone();
        let now = MicroTime(Timestamp::now());
        let current = self
            .api
            .get_opt(&name)
            .await
            .map_err(|source| LeaderError::Get {
                name: name.clone(),
                source,
            })?;
        let mine = LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(secs(self.config.lease_duration)),
            acquire_time: Some(now.clone()),
            renew_time: Some(now.clone()),
            lease_transitions: Some(0),
            ..Default::default()
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(mine),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                // Another candidate created it first.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(source) => Err(LeaderError::Update { name, source }),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|(seen, _)| *seen != spec) {
            self.observed = Some((spec.clone(), Instant::now()));
        }
        let held_by_me = holder == self.config.identity;
        let duration = Duration::from_secs(
            u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        let expired = holder.is_empty()
            || self
                .observed
                .as_ref()
                .is_some_and(|(_, at)| at.elapsed() > duration);
        if !held_by_me && !expired {
            return Ok(false);
        }
        let new_spec = if held_by_me {
            LeaseSpec {
                renew_time: Some(now),
                lease_duration_seconds: mine.lease_duration_seconds,
                ..spec
            }
        } else {
            LeaseSpec {
                lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + 1),
                ..mine
            }
        };
        lease.spec = Some(new_spec.clone());
        // The resourceVersion read makes this a compare-and-swap.
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observed = Some((new_spec, Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(source) => Err(LeaderError::Update { name, source }),
        }
    }

    /// Gives the lease up if this candidate holds it.
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        let name = self.config.name.clone();
        let Some(mut lease) = self
            .api
            .get_opt(&name)
            .await
            .map_err(|source| LeaderError::Get {
                name: name.clone(),
                source,
            })?
        else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        lease.spec = Some(spec);
        match self
            .api
            .replace(&name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
            Err(source) => Err(LeaderError::Update { name, source }),
        }
    }

    /// Campaigns and renews until `shutdown` changes to `true`, then releases.
    pub async fn run(mut self, leader: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut last_renewed: Option<Instant> = None;
        // Who leads is the first question when writes stop: every change is one info line
        // naming this replica and the Lease.
        let gained = |leader: &watch::Sender<bool>, config: &LeaderConfig| {
            if leader.send_if_modified(|l| !std::mem::replace(l, true)) {
                tracing::info!(identity = %config.identity, lease = %format_args!("{}/{}", config.namespace, config.name), "leadership gained: this replica writes");
            }
        };
        let lost = |leader: &watch::Sender<bool>, config: &LeaderConfig, why: &str| {
            if leader.send_if_modified(|l| std::mem::replace(l, false)) {
                tracing::info!(identity = %config.identity, lease = %format_args!("{}/{}", config.namespace, config.name), why, "leadership lost: this replica stops writing");
            }
        };
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    last_renewed = Some(Instant::now());
                    gained(&leader, &self.config);
                }
                Ok(false) => {
                    last_renewed = None;
                    lost(&leader, &self.config, "another replica holds the lease");
                }
                Err(e) => {
                    tracing::warn!(error = %e, category = e.category(), "leader election");
                    // Step down only once the deadline passed: a blip must not flap leadership.
                    if last_renewed.is_none_or(|t| t.elapsed() > self.config.renew_deadline) {
                        lost(
                            &leader,
                            &self.config,
                            "the lease could not be renewed in time",
                        );
                    }
                }
            }
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => break,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        lost(&leader, &self.config, "shutting down");
        if let Err(e) = self.release().await {
            tracing::warn!(error = %e, "releasing the lease");
        }
    }
}

//! `lien_controller_*` metrics (prometheus-client). Labels are bounded: write kinds and error
//! categories come from fixed sets, never from object names or error text.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WriteLabels {
    kind: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    /// `Usage`, `ClusterUsage` or `DependencyRule`.
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    /// `usage` (Usages, ClusterUsages, rules) or `object` (a kind they refer to).
    watch: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CoalescedLabels {
    /// `record` (the replay record not rewritten) or `events` (the Events not published).
    what: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    category: &'static str,
}

/// Every `kind` a write is counted under (`Write::category` in `controller/write.rs`): each is
/// exported at 0 from start (with both results), so a dashboard shows 0, not "No data".
const WRITE_KINDS: &[&str] = &[
    "label",
    "usage_meta",
    "usage_delete",
    "status",
    "rule_status",
    "replay",
    "record_forget",
    "record_forged",
    "cascade_parent",
    "cascade_rule",
    "cascade_status",
    "cascade_event",
    "cascade_report",
    "namespace_content",
];

/// Every error `category` counted (`WriteError::category` in `writer.rs`, and `event` for a
/// failed Event), exported at 0 from start.
const ERROR_CATEGORIES: &[&str] = &[
    "label",
    "usage_meta",
    "usage_delete",
    "status",
    "replay",
    "record",
    "namespace_content",
    "timeout",
    "event",
];

/// Every `watch` whose restarts are counted, exported at 0 from start.
const WATCHES: &[&str] = &["usage", "object"];

/// Every `source` of the relations-by-source gauge.
const SOURCES: &[&str] = &["Usage", "ClusterUsage", "DependencyRule"];

/// The controller's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    events: Counter,
    writes: Family<WriteLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    replays: Counter,
    forged_records: Counter,
    refusals_coalesced: Family<CoalescedLabels, Counter>,
    index_errors: Counter,
    relations: Gauge,
    relations_by_source: Family<SourceLabels, Gauge>,
    replays_pending: Gauge,
    replays_expired: Counter,
    leader: Gauge,
    watch_restarts: Family<WatchLabels, Counter>,
    watched_kinds: Gauge,
    kind_watches_started: Counter,
    pass_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let metrics = Self {
            events: Counter::default(),
            writes: Family::default(),
            errors: Family::default(),
            replays: Counter::default(),
            forged_records: Counter::default(),
            refusals_coalesced: Family::default(),
            index_errors: Counter::default(),
            relations: Gauge::default(),
            relations_by_source: Family::default(),
            replays_pending: Gauge::default(),
            replays_expired: Counter::default(),
            leader: Gauge::default(),
            watch_restarts: Family::default(),
            watched_kinds: Gauge::default(),
            kind_watches_started: Counter::default(),
            pass_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
        };
        // prometheus-client leaves a labelled series out until it is first touched: touching
        // every known label set exports it at 0, so "no errors yet" reads 0, and `rate()` /
        // `increase()` see the first error as an increase rather than as a new series.
        for &kind in WRITE_KINDS {
            for result in ["ok", "error"] {
                let _ = metrics.writes.get_or_create(&WriteLabels { kind, result });
            }
        }
        for &category in ERROR_CATEGORIES {
            let _ = metrics.errors.get_or_create(&ErrorLabels { category });
        }
        for what in ["record", "events"] {
            let _ = metrics
                .refusals_coalesced
                .get_or_create(&CoalescedLabels { what });
        }
        for &watch in WATCHES {
            let _ = metrics.watch_restarts.get_or_create(&WatchLabels { watch });
        }
        for &source in SOURCES {
            let _ = metrics
                .relations_by_source
                .get_or_create(&SourceLabels { source });
        }
        metrics
    }
}

/// Observes a write pass's duration when dropped.
#[derive(Debug)]
pub struct PassTimer<'a>(&'a Histogram, Instant);

impl Drop for PassTimer<'_> {
    fn drop(&mut self) {
        self.0.observe(self.1.elapsed().as_secs_f64());
    }
}

impl Metrics {
    /// Registers every metric under `lien_controller_`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("lien_controller");
        r.register("watch_events", "Watch events handled", self.events.clone());
        r.register("writes", "Writes by kind and result", self.writes.clone());
        r.register("errors", "Errors by category", self.errors.clone());
        r.register(
            "replays",
            "Refused deletions replayed",
            self.replays.clone(),
        );
        r.register(
            "forged_records",
            "Deletion records Lien did not write (unsigned or badly signed): ignored and removed",
            self.forged_records.clone(),
        );
        r.register(
            "refusals_coalesced",
            "Repeated refusals of one DELETE (same object, user and refusal) whose replay record was not rewritten (what=record: the one on the object says the same and is under a minute old) or whose Events were held back (what=events: one per minute)",
            self.refusals_coalesced.clone(),
        );
        r.register(
            "index_errors",
            "Relations the index refused",
            self.index_errors.clone(),
        );
        r.register(
            "relations",
            "Relations in the index",
            self.relations.clone(),
        );
        r.register(
            "relations_by_source",
            "Relations in the index by the kind of their source (Usage, ClusterUsage, DependencyRule), as of the last write pass",
            self.relations_by_source.clone(),
        );
        r.register(
            "replays_pending",
            "Refused deletions recorded for replay and still waiting for their users to go, as of the last write pass (the leader's)",
            self.replays_pending.clone(),
        );
        r.register(
            "replays_expired",
            "Recorded refused deletions dropped unreplayed because they outlived --replay-ttl-hours",
            self.replays_expired.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the leader Lease (it alone writes), else 0",
            self.leader.clone(),
        );
        r.register(
            "watch_restarts",
            "Watches that failed and were restarted (with backoff), by watch",
            self.watch_restarts.clone(),
        );
        r.register("watched_kinds", "Kinds watched", self.watched_kinds.clone());
        r.register(
            "kind_watches_started",
            "Per-kind watches started",
            self.kind_watches_started.clone(),
        );
        r.register(
            "write_pass_seconds",
            "Duration of a write pass",
            self.pass_seconds.clone(),
        );
    }

    pub(crate) fn event(&self) {
        self.events.inc();
    }
    pub(crate) fn write(&self, kind: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.writes
            .get_or_create(&WriteLabels { kind, result })
            .inc();
    }
    pub(crate) fn write_error(&self, category: &'static str) {
        self.errors.get_or_create(&ErrorLabels { category }).inc();
    }
    pub(crate) fn replayed(&self) {
        self.replays.inc();
    }
    pub(crate) fn replay_expired(&self) {
        self.replays_expired.inc();
    }
    pub(crate) fn set_replays_pending(&self, n: usize) {
        self.replays_pending
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    pub(crate) fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
    pub(crate) fn watch_restarted(&self, watch: &'static str) {
        self.watch_restarts
            .get_or_create(&WatchLabels { watch })
            .inc();
    }
    pub(crate) fn set_relations_by_source(&self, (usage, cluster, rule): (usize, usize, usize)) {
        for (&source, n) in SOURCES.iter().zip([usage, cluster, rule]) {
            self.relations_by_source
                .get_or_create(&SourceLabels { source })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    pub(crate) fn forged_record(&self) {
        self.forged_records.inc();
    }
    pub(crate) fn refusal_coalesced(&self, what: &'static str) {
        self.refusals_coalesced
            .get_or_create(&CoalescedLabels { what })
            .inc();
    }
    pub(crate) fn index_error(&self) {
        self.index_errors.inc();
    }
    pub(crate) fn set_relations(&self, n: usize) {
        self.relations.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    pub(crate) fn set_watched_kinds(&self, n: usize) {
        self.watched_kinds.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    pub(crate) fn kind_watch_started(&self) {
        self.kind_watches_started.inc();
    }
    pub(crate) fn pass_timer(&self) -> PassTimer<'_> {
        PassTimer(&self.pass_seconds, Instant::now())
    }
}

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
struct ErrorLabels {
    category: &'static str,
}

/// The controller's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    events: Counter,
    writes: Family<WriteLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    replays: Counter,
    forged_records: Counter,
    index_errors: Counter,
    relations: Gauge,
    watched_kinds: Gauge,
    kind_watches_started: Counter,
    pass_seconds: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            events: Counter::default(),
            writes: Family::default(),
            errors: Family::default(),
            replays: Counter::default(),
            forged_records: Counter::default(),
            index_errors: Counter::default(),
            relations: Gauge::default(),
            watched_kinds: Gauge::default(),
            kind_watches_started: Counter::default(),
            pass_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
        }
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
            "index_errors",
            "Relations the index refused",
            self.index_errors.clone(),
        );
        r.register(
            "relations",
            "Relations in the index",
            self.relations.clone(),
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
    pub(crate) fn forged_record(&self) {
        self.forged_records.inc();
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

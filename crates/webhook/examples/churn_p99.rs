//! The webhook's decision latency while Usages churn, at 100k relations (issue 7 §1;
//! docs/benchmarks.md "Webhook under Usage churn"):
//!
//! ```text
//! cargo run --release -p lien-webhook --example churn_p99 -- --seconds 10 --rate 500
//! ```
//!
//! The index holds the `lien-core` fixture (100,000 relations, see
//! `crates/core/benches/fixture/mod.rs`) plus three users of the 5 KB DELETE fixture's
//! Deployment, shared with a [`Webhook`] as `lien run` shares it. One reader thread answers the
//! committed 5 KB DELETE review (parse, index lookup under the read lock, 409 rendered) over and
//! over and records each answer's latency, in three phases of `--seconds` each:
//!
//! - `idle`: nothing writes the index;
//! - `churn`: a writer thread creates and deletes Usages (20 relations each, 100 alive at a time)
//!   at `--rate` changes per second the way the controller now applies them: the relations are
//!   built with no lock held, the write lock is taken for the one source's replacement, and the
//!   whole-graph cycle search runs under the read lock at most once per write pass (every
//!   50 ms here);
//! - `churn, old locking`: the same churn the way the controller applied it before issue 7: the
//!   write lock held across building the relations, the replacement and the cycle search, for
//!   every change (so the rate it reaches is what the lock allows).
//!
//! It prints p50/p99/p99.9/max per phase and the churn p99 against the target (2× the idle p99).
//!
//! With `--rules`, the phases are `idle` and `rule churn` (issue 20): a writer thread replaces
//! a DependencyRule's generation over and over, as the controller does when a rule's spec
//! changes (`crates/controller/src/controller/state.rs`): `remove_join` + `add_join` under the
//! write lock (`apply_rule`), the new join fed one object per write (1,000 CephBlockPools and
//! 100,000 PersistentVolume-like objects, `rules_upsert`), then `attach` under the write lock,
//! replacing the previous generation's 100,000 relations (`rules_complete`). The index then
//! holds the fixture's 100,000 relations plus the rule's 100,000. It prints the longest write
//! hold of each kind, too:
//!
//! ```text
//! cargo run --release -p lien-webhook --example churn_p99 -- --seconds 10 --rules
//! ```
//!
//! `--step N` attaches in steps of N relations (`JoinMut::attach_step`, the write lock released
//! between steps; default 64, as the controller does); `--step 0` attaches in one hold, as it
//! did before.
//! With steps, the previous generation's join is also removed as the controller does now:
//! `remove_join_in_steps` (O(1)), the new join given room for as many objects (`reserve`), and
//! the old join's objects released `--step` at a time (`release_step`). `--feed N` feeds the
//! new join N objects per write hold (default 1, one hold per object, as the controller does;
//! batches were measured and not kept: docs/benchmarks.md, "Issue 20, continued"). `--fair 1`
//! ends the steps' holds with `unlock_fair` (see `FAIR`); `--fair 0` (default, as the controller does) every hold with a plain unlock. A removed join
//! finished with is always freed after the hold, as the controller does. `--bump N` (with `--feed` > 1)
//! hands the lock to a parked reader every N objects of a feed hold.
//! `--every-ms M` starts at most one generation every M ms (default: back to back).
//! `--work-us W` spends W µs of CPU per object outside the lock before it is fed (default 0):
//! a model of what the controller does per listed object besides feeding it — decoding the
//! watch event's JSON and evaluating the rule's CEL — which the back-to-back default leaves
//! out, so that there the writer holds the lock nearly all the time it runs.
//! `--arrivals R` makes the reader an open loop: R decisions a second, each due at its own
//! time and its latency counted from then (default: a closed loop, each decision started when
//! the last one ends, where a stall counts once however many decisions it would delay).

#[path = "../../core/benches/fixture/mod.rs"]
mod fixture;
#[path = "support/mod.rs"]
mod support;

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fixture::rook_join::PVS;
use lien_core::{
    AttachStep, GroupKind, JoinId, ObjectKey, Relation, RelationIndex, RuleConfig, RuleScope,
    Source, find_cycles,
};
use lien_webhook::Webhook;
use parking_lot::{RwLock, RwLockWriteGuard};

type Error = Box<dyn std::error::Error>;

/// How often the churning writer runs the cycle search (the controller: once per write pass).
const WRITE_PASS: Duration = Duration::from_millis(50);
/// Churned Usages alive at a time.
const ALIVE: usize = 100;

fn index() -> Result<RelationIndex, Error> {
    let mut idx = RelationIndex::new();
    for (source, relations) in fixture::all() {
        idx.apply(&source, relations)?;
    }
    support::use_web_5k(&mut idx)?;
    Ok(idx)
}

/// The relations of churned Usage `i`: 20 Deployments of a namespace use a database, as the
/// fixture's `apps-use-database` does — what resolving such a Usage yields.
fn churn_usage(i: usize) -> (Source, Vec<Relation>) {
    let ns = i % fixture::NAMESPACES;
    let namespace = format!("team-{ns}");
    let source = Source::usage(&namespace, format!("churn-{i}"));
    let db_name = format!("db-churn-{i}");
    let db = ObjectKey::new(
        "postgres.example.io",
        "Database",
        Some(&namespace),
        &db_name,
    );
    let db_uid = fixture::uid("Database", ns, &db_name);
    let relations = (0..20)
        .map(|a| {
            let app = format!("app-{a}");
            let by = ObjectKey::new("apps", "Deployment", Some(&namespace), &app);
            Relation::uses(source.clone(), db.clone(), by)
                .with_uids(Some(&db_uid), Some(&fixture::uid("Deployment", ns, &app)))
                .with_reason("the app stores its data here")
        })
        .collect();
    (source, relations)
}

#[derive(Clone, Copy, PartialEq)]
enum Locking {
    /// Relations built outside the lock, a short write per change, the cycle search under the
    /// read lock once per write pass.
    Now,
    /// Everything under the write lock, the cycle search per change.
    Before,
}

/// Churns until `stop`; returns how many changes it applied.
fn churn(index: &RwLock<RelationIndex>, rate: u32, locking: Locking, stop: &AtomicBool) -> usize {
    let mut alive: VecDeque<Source> = VecDeque::new();
    let mut changes = 0usize;
    let mut next = 0usize;
    let started = Instant::now();
    let mut last_pass = Instant::now();
    let interval = Duration::from_secs(1) / rate.max(1);
    while !stop.load(Ordering::Relaxed) {
        // Paced at `rate` changes per second (as fast as the lock allows if it cannot keep up).
        let due = started + interval * u32::try_from(changes).unwrap_or(u32::MAX);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let delete = alive.len() >= ALIVE;
        match locking {
            Locking::Now => {
                if delete {
                    let source = alive.pop_front().expect("alive");
                    index.write().delete(&source);
                } else {
                    let (source, relations) = churn_usage(next);
                    next += 1;
                    index.write().apply(&source, relations).expect("apply");
                    alive.push_back(source);
                }
                if last_pass.elapsed() >= WRITE_PASS {
                    black_box(find_cycles(&index.read()));
                    last_pass = Instant::now();
                }
            }
            Locking::Before => {
                let mut idx = index.write();
                if delete {
                    let source = alive.pop_front().expect("alive");
                    idx.delete(&source);
                } else {
                    let (source, relations) = churn_usage(next);
                    next += 1;
                    idx.apply(&source, relations).expect("apply");
                    alive.push_back(source);
                }
                black_box(find_cycles(&idx));
            }
        }
        changes += 1;
    }
    // Leave the index as it was, for the next phase.
    let mut idx = index.write();
    for source in alive {
        idx.delete(&source);
    }
    changes
}

fn rule_config(generation: usize) -> RuleConfig {
    RuleConfig {
        source: Source::rule("rbd-pv-uses-pool"),
        of: GroupKind::new("ceph.rook.io", "CephBlockPool"),
        by: GroupKind::new("", "PersistentVolume"),
        scope: RuleScope::Cluster,
        keyed: true,
        // A new spec: a new generation.
        reason: format!("the volume's data lives in this pool (generation {generation})"),
        replay: true,
        warn: false,
    }
}

type RuleInput = fixture::rook_join::Input;
/// The rule's pools and PVs.
type RuleInputs = (Vec<RuleInput>, Vec<RuleInput>);

/// The longest write holds of each kind while rules churn, in µs.
#[derive(Default)]
struct RuleHolds {
    generation: u64,
    feed: u64,
    attach: u64,
}

/// Runs `f` under the write lock, recording the hold's length in `longest`; ends with
/// `unlock_fair` when `fair`.
fn held<T>(
    index: &RwLock<RelationIndex>,
    longest: &mut u64,
    fair: bool,
    f: impl FnOnce(&mut RelationIndex) -> T,
) -> T {
    let mut idx = index.write();
    let t = Instant::now();
    let out = f(&mut idx);
    // As the controller does: a removed join finished with is freed after the lock.
    let garbage = idx.take_garbage();
    *longest = (*longest).max(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
    if fair {
        RwLockWriteGuard::unlock_fair(idx);
    } else {
        drop(idx);
    }
    drop(garbage);
    out
}

/// `--fair 1`: every step's hold (new generation, release, attach) and every feed hold of more
/// than one object ends with `unlock_fair`, handing the lock to a waiting reader instead of
/// letting the writer take it again at once; a feed hold of one object ends with a plain
/// unlock. `--fair 0` (default, as the controller does): every hold ends with a plain unlock.
/// (Measured and not kept: docs/benchmarks.md, "Issue 20, continued" and "third pass".)
static FAIR: AtomicBool = AtomicBool::new(false);

fn fair() -> bool {
    FAIR.load(Ordering::Relaxed)
}

/// Replaces the rule's generation until `stop`, as the controller does; returns how many
/// generations were attached. The first is attached before the phase starts.
/// How the rule churn writes (see the module docs).
#[derive(Clone, Copy)]
struct RuleChurn {
    step: usize,
    feed: usize,
    every: Duration,
    work: Duration,
}

fn churn_rules(
    index: &RwLock<RelationIndex>,
    mut id: JoinId,
    inputs: &RuleInputs,
    stop: &AtomicBool,
    holds: &mut RuleHolds,
    RuleChurn {
        step,
        feed,
        every,
        work,
    }: RuleChurn,
) -> (usize, JoinId) {
    let mut generations = 0;
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // At most one generation per `every` (as fast as it goes with 0).
        let due = started + every * u32::try_from(generations).unwrap_or(u32::MAX);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        id = held(index, &mut holds.generation, fair(), |ix| {
            if step == 0 {
                ix.remove_join(id);
                return ix.add_join(rule_config(generations + 2)).expect("room");
            }
            let (of, by) = ix.join(id).expect("join").object_counts();
            ix.remove_join_in_steps(id);
            let next = ix.add_join(rule_config(generations + 2)).expect("room");
            ix.join_mut(next).expect("join").reserve(of, by);
            next
        });
        while !held(index, &mut holds.generation, fair(), |ix| {
            ix.release_step(step.max(1))
        }) {}
        feed_rule(index, id, inputs, feed, work, &mut holds.feed);
        let n = if step == 0 {
            held(index, &mut holds.attach, fair(), |ix| {
                ix.join_mut(id).expect("join").attach().expect("room")
            })
        } else {
            loop {
                let done = held(index, &mut holds.attach, fair(), |ix| {
                    ix.join_mut(id)
                        .expect("join")
                        .attach_step(step)
                        .expect("room")
                });
                if let AttachStep::Done(n) = done {
                    break n;
                }
            }
        };
        assert_eq!(n, PVS);
        generations += 1;
    }
    (generations, id)
}

/// Feeds every pool then every PV to join `id`, `batch` objects per write hold.
fn feed_rule(
    index: &RwLock<RelationIndex>,
    id: JoinId,
    (pools, pvs): &RuleInputs,
    batch: usize,
    work: Duration,
    longest: &mut u64,
) {
    let inputs: Vec<(bool, &RuleInput)> = pools
        .iter()
        .map(|i| (true, i))
        .chain(pvs.iter().map(|i| (false, i)))
        .collect();
    for chunk in inputs.chunks(batch.max(1)) {
        for _ in chunk {
            let until = Instant::now() + work;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        }
        let bump = BUMP.load(Ordering::Relaxed);
        if bump == 0 {
            held(index, longest, fair() && batch > 1, |ix| {
                fixture::rook_join::feed(ix, id, chunk.iter().copied())
            });
            continue;
        }
        let mut ix = index.write();
        let t = Instant::now();
        for (i, &object) in chunk.iter().enumerate() {
            if i > 0 && i % bump == 0 {
                RwLockWriteGuard::bump(&mut ix);
            }
            fixture::rook_join::feed(&mut ix, id, [object]);
        }
        *longest = (*longest).max(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
        RwLockWriteGuard::unlock_fair(ix);
    }
}

/// `--arrivals R` (default 0: a closed loop, each decision started when the last one ends):
/// R decisions a second, each due at its own time, its latency counted from then.
static ARRIVALS_PER_SECOND: AtomicUsize = AtomicUsize::new(0);

/// `--bump N` (default 0: off): within a feed hold, every N objects, `RwLockWriteGuard::bump`
/// hands the lock to a reader parked waiting for it (if any) and takes it back.
static BUMP: AtomicUsize = AtomicUsize::new(0);

struct Phase {
    name: &'static str,
    samples: Vec<u64>,
    changes: usize,
    seconds: f64,
}

impl Phase {
    fn at(&self, q: f64) -> f64 {
        let i = ((self.samples.len() as f64 * q) as usize).min(self.samples.len() - 1);
        self.samples[i] as f64 / 1000.0
    }
}

fn run_phase(
    name: &'static str,
    webhook: &Webhook,
    index: &Arc<RwLock<RelationIndex>>,
    body: &[u8],
    seconds: u64,
    churn_with: Option<(u32, Locking)>,
    rules: Option<(JoinId, Arc<RuleInputs>, RuleChurn)>,
) -> Phase {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(AtomicUsize::new(0));
    let writer = churn_with.map(|(rate, locking)| {
        let (index, stop, changes) = (index.clone(), stop.clone(), changes.clone());
        std::thread::spawn(move || {
            changes.store(churn(&index, rate, locking, &stop), Ordering::Relaxed);
        })
    });
    let rule_writer = rules.map(|(id, inputs, how)| {
        let (index, stop) = (index.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut holds = RuleHolds::default();
            let (generations, _) = churn_rules(&index, id, &inputs, &stop, &mut holds, how);
            (generations, holds)
        })
    });
    let started = Instant::now();
    let end = started + Duration::from_secs(seconds);
    let mut samples = Vec::with_capacity(1 << 20);
    let gap = match ARRIVALS_PER_SECOND.load(Ordering::Relaxed) {
        0 => None,
        r => Some(Duration::from_secs(1) / u32::try_from(r).unwrap_or(u32::MAX)),
    };
    let mut due = started;
    while Instant::now() < end {
        // Open loop (`--arrivals`): each decision is due at its own time and its latency counts
        // from then, so a stall delays every decision due during it, as it would delay every
        // AdmissionReview the API server sends meanwhile (no coordinated omission).
        if let Some(gap) = gap {
            due += gap;
            while Instant::now() < due {
                std::hint::spin_loop();
            }
        }
        let t = if gap.is_some() { due } else { Instant::now() };
        let answer = rt.block_on(webhook.answer(black_box(body)));
        samples.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        assert!(!answer.allowed, "the fixture's Deployment is in use");
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = writer {
        w.join().expect("the writer");
    }
    if let Some(w) = rule_writer {
        let (generations, holds) = w.join().expect("the rule writer");
        changes.store(generations, Ordering::Relaxed);
        println!(
            "rule churn: {generations} generations attached; longest write holds: new generation \
             (remove_join + add_join, or the longest step of it) {} µs, feed (the longest hold) {} µs, \
             attach (one hold, or the longest step) {} µs",
            holds.generation, holds.feed, holds.attach
        );
    }
    samples.sort_unstable();
    Phase {
        name,
        samples,
        changes: changes.load(Ordering::Relaxed),
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn main() -> Result<(), Error> {
    let (mut seconds, mut rate, mut rules, mut step) = (10u64, 500u32, false, 64usize);
    let mut feed = 1usize;
    let mut work = Duration::ZERO;
    let mut every = Duration::ZERO;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => seconds = it.next().ok_or("--seconds needs a number")?.parse()?,
            "--rate" => rate = it.next().ok_or("--rate needs a number")?.parse()?,
            "--rules" => rules = true,
            "--step" => step = it.next().ok_or("--step needs a number")?.parse()?,
            "--feed" => feed = it.next().ok_or("--feed needs a number")?.parse()?,
            "--work-us" => {
                work = Duration::from_micros(it.next().ok_or("--work-us needs a number")?.parse()?);
            }
            "--arrivals" => {
                ARRIVALS_PER_SECOND.store(
                    it.next().ok_or("--arrivals needs a number")?.parse()?,
                    Ordering::Relaxed,
                );
            }
            "--bump" => {
                BUMP.store(
                    it.next().ok_or("--bump needs a number")?.parse()?,
                    Ordering::Relaxed,
                );
            }
            "--fair" => {
                let fair: u8 = it.next().ok_or("--fair needs 0 or 1")?.parse()?;
                FAIR.store(fair != 0, Ordering::Relaxed);
            }
            "--every-ms" => {
                every =
                    Duration::from_millis(it.next().ok_or("--every-ms needs a number")?.parse()?);
            }
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let idx = index()?;
    println!(
        "index: {} relations, {} objects, {} sources",
        idx.len(),
        idx.key_count(),
        idx.source_count()
    );
    let t = Instant::now();
    let cycles = find_cycles(&idx).len();
    println!(
        "cycle search over the whole index: {:.2} ms ({cycles} cyclic groups)",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let index = Arc::new(RwLock::new(idx));
    let webhook = Webhook::builder(index.clone()).ready(true).build();
    let body = support::fixture("delete-deployment-5k.json");

    if rules {
        let inputs = Arc::new(fixture::rook_join::inputs());
        let mut unused = 0;
        let id = held(&index, &mut unused, false, |ix| {
            ix.add_join(rule_config(1)).expect("room")
        });
        feed_rule(&index, id, &inputs, feed, Duration::ZERO, &mut unused);
        held(&index, &mut unused, false, |ix| {
            ix.join_mut(id).expect("join").attach().expect("room")
        });
        println!("with the rule: {} relations", index.read().len());
        let phases = [
            run_phase("idle", &webhook, &index, &body, seconds, None, None),
            run_phase(
                "rule churn",
                &webhook,
                &index,
                &body,
                seconds,
                None,
                Some((
                    id,
                    inputs,
                    RuleChurn {
                        step,
                        feed,
                        every,
                        work,
                    },
                )),
            ),
        ];
        report(&phases);
        return Ok(());
    }

    let phases = [
        run_phase("idle", &webhook, &index, &body, seconds, None, None),
        run_phase(
            "churn",
            &webhook,
            &index,
            &body,
            seconds,
            Some((rate, Locking::Now)),
            None,
        ),
        run_phase(
            "churn, old locking",
            &webhook,
            &index,
            &body,
            seconds,
            Some((rate, Locking::Before)),
            None,
        ),
    ];
    report(&phases);
    Ok(())
}

/// The table, and the churn phase's p99 against the idle one's.
fn report(phases: &[Phase]) {
    println!(
        "{:<20} {:>10} {:>12} {:>9} {:>9} {:>9} {:>10}",
        "phase", "decisions", "changes/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs"
    );
    for p in phases {
        println!(
            "{:<20} {:>10} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>10.0}",
            p.name,
            p.samples.len(),
            p.changes as f64 / p.seconds,
            p.at(0.50),
            p.at(0.99),
            p.at(0.999),
            p.at(1.0),
        );
    }
    let (idle, churn) = (phases[0].at(0.99), phases[1].at(0.99));
    println!(
        "churn p99 / idle p99 = {:.2} (target ≤ 2)",
        churn / idle.max(f64::MIN_POSITIVE)
    );
}

//! `process_*` metrics, as the Go and Java clients name them, read from `/proc/self` at each
//! scrape (Linux; elsewhere none are served).
//!
//! prometheus-client has no process collector, and the crates that have one serve another
//! metrics library (`prometheus`'s `process_collector`, `metrics-process` for the `metrics`
//! facade): a few `/proc` reads here cost less than a second registry.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// The kernel's `USER_HZ`, the unit of `/proc/<pid>/stat`'s times: fixed at 100 by the ABI on
/// every architecture Lien is built for (x86-64, arm64), whatever the kernel's own tick rate.
const USER_HZ: f64 = 100.0;

/// What one scrape read; `None` fields are left out of the exposition.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sample {
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub resident_memory_bytes: Option<f64>,
    pub virtual_memory_bytes: Option<f64>,
    pub threads: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

impl Sample {
    /// Reads `/proc/self`; whatever cannot be read is `None`.
    fn read() -> Self {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let mut sample = Sample::default();
        if let Some(stat) = read("/proc/self/stat") {
            let boot = read("/proc/stat").and_then(|s| boot_time(&s));
            parse_stat(&stat, boot, &mut sample);
        }
        if let Some(status) = read("/proc/self/status") {
            parse_status(&status, &mut sample);
        }
        if let Some(limits) = read("/proc/self/limits") {
            sample.max_fds = max_open_files(&limits);
        }
        sample.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64);
        sample
    }
}

/// `btime` of `/proc/stat`: when the machine booted, in seconds since the epoch.
fn boot_time(proc_stat: &str) -> Option<f64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// CPU time and start time from `/proc/self/stat`. The command name (field 2) may hold spaces
/// and parentheses, so the fields are counted after its last `)`.
fn parse_stat(stat: &str, boot_time: Option<f64>, sample: &mut Sample) {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): field n is fields[n - 3].
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    if let (Some(utime), Some(stime)) = (field(14), field(15)) {
        sample.cpu_seconds = Some((utime + stime) / USER_HZ);
    }
    if let (Some(start), Some(boot)) = (field(22), boot_time) {
        sample.start_time_seconds = Some(boot + start / USER_HZ);
    }
}

/// Memory (in kB there, so no page size is assumed) and threads from `/proc/self/status`.
fn parse_status(status: &str, sample: &mut Sample) {
    for line in status.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let number = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok());
        match key {
            "VmRSS" => sample.resident_memory_bytes = number.map(|kb| kb * 1024.0),
            "VmSize" => sample.virtual_memory_bytes = number.map(|kb| kb * 1024.0),
            "Threads" => sample.threads = number,
            _ => {}
        }
    }
}

/// The soft limit of `Max open files` in `/proc/self/limits` (`None` when unlimited).
fn max_open_files(limits: &str) -> Option<f64> {
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// The collector registered on `/metrics`.
#[derive(Debug)]
pub(crate) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = Sample::read();
        if let Some(v) = s.cpu_seconds {
            // A counter: the encoder adds `_total`.
            let c = ConstCounter::new(v);
            c.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                c.metric_type(),
            )?)?;
        }
        for (name, help, value) in [
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                s.start_time_seconds,
            ),
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_memory_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_memory_bytes,
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                s.threads,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds,
            ),
        ] {
            if let Some(v) = value {
                let g = ConstGauge::new(v);
                g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with a space and a parenthesis, as /proc prints it.
        let stat = "4242 (lien (x) y) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 150 0 0 20 0 9 0 12345 1000 200 18446744073709551615";
        let mut s = Sample::default();
        parse_stat(stat, Some(1_700_000_000.0), &mut s);
        assert_eq!(s.cpu_seconds, Some(4.0));
        assert_eq!(s.start_time_seconds, Some(1_700_000_123.45));
    }

    #[test]
    fn status_limits_and_boot_time_parse() {
        let mut s = Sample::default();
        parse_status(
            "Name:\tlien\nVmSize:\t  2048 kB\nVmRSS:\t   512 kB\nThreads:\t9\n",
            &mut s,
        );
        assert_eq!(s.resident_memory_bytes, Some(512.0 * 1024.0));
        assert_eq!(s.virtual_memory_bytes, Some(2048.0 * 1024.0));
        assert_eq!(s.threads, Some(9.0));
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 1048576              files     \n";
        assert_eq!(max_open_files(limits), Some(1024.0));
        assert_eq!(
            max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\n"),
            Some(1_700_000_000.0)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads_whole() {
        let s = Sample::read();
        for (name, v) in [
            ("cpu", s.cpu_seconds),
            ("start", s.start_time_seconds),
            ("rss", s.resident_memory_bytes),
            ("vsize", s.virtual_memory_bytes),
            ("threads", s.threads),
            ("open fds", s.open_fds),
        ] {
            assert!(v.is_some_and(|v| v >= 0.0), "{name}: {v:?}");
        }
        assert!(s.resident_memory_bytes.is_some_and(|v| v > 0.0));
        assert!(s.start_time_seconds.is_some_and(|v| v > 1_600_000_000.0));
    }
}

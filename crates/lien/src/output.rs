//! Writing to stdout without panicking when the reader has gone (`lien crds | head`,
//! `kubectl lien graph … | head -1`).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with `BrokenPipe`, and `print!`
//! panics on it. The policy, everywhere:
//! - a command whose only job is its output (`crds`, `manifests`, `completion`, `why`,
//!   `graph`, `plan`) stops writing and exits **0** quietly: the reader took what it wanted,
//!   as `git log | head` reports nothing. (coreutils die of SIGPIPE, status 141; we keep 0 so
//!   that `set -o pipefail` scripts piping into `head` do not fail.)
//! - a command that changes the cluster (`uninstall`, `plan --apply`, `sandbox`) drops its
//!   progress lines and carries on: stopping halfway — what SIGPIPE would do — would leave a
//!   half-done uninstall or a half-deleted plan because a pager was closed.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout has been found closed: later lines are not even tried.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printed {
    /// Everything was written.
    All,
    /// The reader has gone (a closed pipe); nothing more will be read.
    ReaderGone,
}

/// Writes `text` to stdout and flushes. A closed pipe is [`Printed::ReaderGone`], not an
/// error; any other failure (a full disk) is.
pub fn print(text: &str) -> std::io::Result<Printed> {
    print_bytes(text.as_bytes())
}

/// [`print`] for bytes (a PNG).
pub fn print_bytes(bytes: &[u8]) -> std::io::Result<Printed> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(Printed::ReaderGone);
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(Printed::All),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(Printed::ReaderGone)
        }
        Err(e) => Err(e),
    }
}

/// A progress line of a command that changes things: written if anyone reads it, dropped
/// otherwise (see the module's policy); the work goes on either way.
pub fn line(text: impl std::fmt::Display) {
    let _ = print(&format!("{text}\n"));
}

/// `println!` for progress lines: [`line`] with `format!` arguments.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::line("")
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

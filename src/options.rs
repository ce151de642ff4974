//! The global options, in the core's terms: every subcommand and the progress bar read
//! these; clap's types stop in `cli`.

use std::io::Write as _;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::{Arc, Mutex};

use crate::engine::Via;
use crate::report::StatsFormat;

/// The global options, as the core sees them (clap's types stop in `cli`).
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub via: Via,
    pub quiet: bool,
    pub verbose: bool,
    pub stats: StatsFormat,
    pub explain: bool,
    /// Draw a progress bar: `--progress`, or stderr is a terminal (and no `-q`).
    pub progress: bool,
    /// `--limit RATE`: bytes per second, per transfer (per direction for relay).
    pub limit: Option<u64>,
    /// `--size N`: the expected byte count, for progress and ETA on streams.
    pub size: Option<u64>,
    /// `--stats-fd N`: the report goes to this inherited fd instead of stderr.
    pub stats_fd: Option<i32>,
    /// `--dump FILE`: a copy of every byte moved, stamped (relay, pipe, tee).
    pub dump: Option<crate::engine::dump::DumpSpec>,
    /// The JSON report, kept until the end of the run ([`Options::emit_json_report`]).
    pub json: Arc<Mutex<Option<String>>>,
    /// The tool zerocat answers as (`nc`, `tee`, `pv`): its name begins the error lines.
    pub program: Option<&'static str>,
    /// pv's display in place of zerocat's bar (zerocat answering as `pv`).
    pub pv: Option<PvStyle>,
    /// Why every byte goes through userspace where a kernel path would serve: a drop-in
    /// flag that reads each line (nc `-C`/`-i`, pv `-l`). The report says it.
    pub userspace_because: Option<&'static str>,
}

/// What pv's display shows (pv 1.6's flags): with none of progress, timer, eta, rate,
/// average rate and bytes asked for, pv shows progress, timer, eta, rate and bytes.
#[derive(Debug, Clone, Default)]
pub struct PvStyle {
    pub progress: bool,
    pub timer: bool,
    pub eta: bool,
    pub rate: bool,
    pub average_rate: bool,
    pub bytes: bool,
    /// `-n`: an integer percentage a line (bytes with `-b`; elapsed seconds first with `-t`).
    pub numeric: bool,
    /// `-N NAME`: the display's prefix.
    pub name: Option<String>,
    /// `-w N`: columns (else the terminal's, else 80).
    pub width: Option<u16>,
    /// `-i SECS`: how often the display changes (default 1 s).
    pub interval: std::time::Duration,
    /// `-W`: nothing is shown before the first byte.
    pub wait: bool,
    /// `-l`/`-0`: the lines counted so far, shown in place of bytes (amounts without a
    /// `B`, in powers of 1000, as pv shows lines).
    pub lines: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl Options {
    /// The end-of-run report. Text: printed now on stderr (or `--stats-fd`), not under
    /// `-q`. JSON: kept for [`Options::emit_json_report`], which `main` calls last, so the
    /// object is the last thing on stderr whatever else the run says (scripts parse it);
    /// `-q` does not silence an explicit `--stats json`.
    pub fn print_report(&self, report: &str) {
        match self.stats {
            StatsFormat::Json => {
                let report = self.with_reason_json(report);
                *self.json.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
            }
            StatsFormat::Text if !self.quiet => match self.userspace_because {
                Some(why) => self.emit(&format!("{report}; userspace because {why}")),
                None => self.emit(report),
            },
            StatsFormat::Text => {}
        }
    }

    /// The JSON report with `"userspace_because"` as its last member, when there is a why.
    fn with_reason_json(&self, report: &str) -> String {
        let Some(why) = self.userspace_because else {
            return report.to_string();
        };
        match report.trim_end().strip_suffix('}') {
            Some(open) => format!(
                "{open},\"userspace_because\":{}}}",
                crate::report::json_string(why)
            ),
            None => report.to_string(),
        }
    }

    /// Prints the JSON report kept by [`Options::print_report`], or, when the run failed
    /// before it made one, `fallback()` (an object with the error).
    pub fn emit_json_report(&self, fallback: impl FnOnce() -> Option<String>) {
        if self.stats != StatsFormat::Json {
            return;
        }
        let kept = self.json.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(json) = kept.or_else(fallback) {
            self.emit(&json);
        }
    }

    fn emit(&self, report: &str) {
        let line = crate::report::errno_names(report) + "\n";
        match self.stats_fd {
            None => eprint!("{line}"),
            Some(fd) => {
                // SAFETY: an fd the caller handed us, checked open at start-up; borrowed,
                // never closed here.
                let mut file = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
                if let Err(e) = file.write_all(line.as_bytes()) {
                    eprintln!("zerocat: --stats-fd {fd}: {e}");
                }
            }
        }
    }

    /// The name error lines begin with: zerocat's, or the tool's it answers as.
    pub fn name(&self) -> &'static str {
        self.program.unwrap_or("zerocat")
    }

    /// Prints a `-v` or `--explain` line.
    pub fn print_plan(&self, plan: &str) {
        if self.verbose || self.explain {
            eprintln!("zerocat: {plan}");
        }
    }
}

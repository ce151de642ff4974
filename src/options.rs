//! The global options, in the core's terms: every subcommand and the progress bar read
//! these; clap's types stop in `cli`.

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
}

impl Options {
    /// Prints the end-of-run report unless `-q`.
    pub fn print_report(&self, report: &str) {
        if !self.quiet {
            eprintln!("{report}");
        }
    }

    /// Prints a `-v` or `--explain` line.
    pub fn print_plan(&self, plan: &str) {
        if self.verbose || self.explain {
            eprintln!("zerocat: {plan}");
        }
    }
}

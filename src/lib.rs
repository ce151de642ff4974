//! zerocat: move bytes between files, pipes and sockets along the cheapest kernel path,
//! and say which path ran.

pub mod cli;
pub mod copy;
pub mod endpoint;
pub mod engine;
pub mod exit;
pub mod fdkind;
pub mod limit;
pub mod man;
pub mod pipe;
pub mod process;
pub mod progress;
pub mod relay;
pub mod report;
pub mod tee;

use engine::Via;
use report::StatsFormat;

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

/// What the command line asked for, in the core's terms.
#[derive(Debug, Clone)]
pub enum Invocation {
    Pipe(pipe::PipeConfig),
    Copy(copy::CopyConfig),
    Tee(tee::TeeConfig),
    Relay(relay::RelayConfig),
    /// Generated text for stdout (man page, completions).
    Print(String),
}

/// Runs one invocation. Errors are runtime failures (exit 1) unless they carry a
/// [`exit::UsageError`] (exit 2).
pub fn run(options: &Options, invocation: &Invocation) -> anyhow::Result<exit::ExitCode> {
    match invocation {
        Invocation::Pipe(cfg) => pipe::run(options, cfg),
        Invocation::Copy(cfg) => copy::run(options, cfg),
        Invocation::Tee(cfg) => tee::run(options, cfg),
        Invocation::Relay(cfg) => relay::run(options, cfg),
        Invocation::Print(text) => {
            use std::io::Write;
            match std::io::stdout().write_all(text.as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Ok(exit::ExitCode::BrokenPipe)
                }
                other => other.map(|_| exit::ExitCode::Success).map_err(Into::into),
            }
        }
    }
}

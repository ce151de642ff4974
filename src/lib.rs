//! zerocat: move bytes between files, pipes and sockets along the cheapest kernel path,
//! and say which path ran.
//!
//! Each module imports only the ones listed before it: `sys`, `units`, `exit` → `engine` →
//! `endpoint`, `report` → `options` → `progress` → `cmd` → `cli`. Only `cli` and this file
//! name a command; clap's types stop in `cli`.
// The docs are for people changing zerocat (`cargo doc --document-private-items`):
// they link to private items on purpose.
#![allow(rustdoc::private_intra_doc_links)]

pub mod cli;
pub mod cmd;
pub mod endpoint;
pub mod engine;
pub mod exit;
pub mod options;
pub mod progress;
pub mod report;
pub mod sys;
pub mod units;

use cmd::{copy, pipe, relay, tee};
pub use options::Options;

/// What the command line asked for, in the core's terms.
#[derive(Debug, Clone)]
pub enum Invocation {
    Pipe(pipe::PipeConfig),
    Copy(copy::CopyConfig),
    Tee(tee::TeeConfig),
    Relay(relay::RelayConfig, relay::Tuning),
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
        Invocation::Relay(cfg, tuning) => relay::run(options, cfg, tuning),
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

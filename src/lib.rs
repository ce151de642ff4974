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

use cmd::{copy, pipe, probe, relay, tee};
pub use options::Options;

/// What the command line asked for, in the core's terms.
#[derive(Debug, Clone)]
pub enum Invocation {
    Pipe(pipe::PipeConfig),
    Copy(copy::CopyConfig),
    Tee(tee::TeeConfig),
    Relay(relay::RelayConfig, relay::Tuning),
    Probe(probe::ProbeConfig),
    /// Generated text for stdout (man page, completions).
    Print(String),
    /// `install-links DIR`: links named nc, netcat, ncat, tee and pv to this binary.
    InstallLinks {
        dir: std::path::PathBuf,
        force: bool,
    },
}

impl Invocation {
    /// Whether its data goes to stdout (a `-` sink, or relay's `-` side).
    pub fn writes_stdout(&self) -> bool {
        let stdio = |e: &endpoint::Endpoint| matches!(e, endpoint::Endpoint::Stdio);
        match self {
            Invocation::Pipe(cfg) => stdio(&cfg.dst),
            Invocation::Tee(cfg) => cfg.sinks.iter().any(stdio),
            Invocation::Relay(cfg, _) => stdio(&cfg.a) || stdio(&cfg.b),
            Invocation::Copy(_)
            | Invocation::Probe(_)
            | Invocation::Print(_)
            | Invocation::InstallLinks { .. } => false,
        }
    }

    /// Its endpoints, for [`endpoint::pty::set_terminals`].
    fn endpoints_mut(&mut self) -> Vec<&mut endpoint::Endpoint> {
        match self {
            Invocation::Pipe(cfg) => vec![&mut cfg.src, &mut cfg.dst],
            Invocation::Tee(cfg) => std::iter::once(&mut cfg.src)
                .chain(cfg.sinks.iter_mut())
                .collect(),
            Invocation::Relay(cfg, _) => vec![&mut cfg.a, &mut cfg.b],
            // The others name no stream endpoint.
            _ => Vec::new(),
        }
    }

    /// The subcommand's name, as reports say it.
    pub fn command(&self) -> &'static str {
        match self {
            Invocation::Pipe(_) => "pipe",
            Invocation::Copy(_) => "copy",
            Invocation::Tee(_) => "tee",
            Invocation::Relay(..) => "relay",
            Invocation::Probe(_) => "probe",
            Invocation::Print(_) => "print",
            Invocation::InstallLinks { .. } => "install-links",
        }
    }
}

/// The end of a run: its error said on stderr, then (`--stats json`) the one JSON object,
/// last, also for a run that failed before it made a report; the exit code the error's
/// type says.
pub fn conclude(
    options: &Options,
    invocation: &Invocation,
    result: anyhow::Result<exit::ExitCode>,
) -> exit::ExitCode {
    let message = result
        .as_ref()
        .err()
        .map(|err| report::errno_names(&format!("{err:#}")));
    if let Some(message) = &message {
        eprintln!("{}: {message}", options.name());
    }
    options.emit_json_report(|| {
        let message = message.as_deref()?;
        let mut o = report::JsonObject::new();
        o.str("command", invocation.command()).num("bytes", 0);
        report::ended_json(&mut o, "error", Some(message));
        Some(o.finish())
    });
    match result {
        Ok(code) => code,
        Err(err) if err.chain().any(|cause| cause.is::<exit::UsageError>()) => {
            exit::ExitCode::Usage
        }
        Err(err) if err.chain().any(|cause| cause.is::<exit::Interrupted>()) => {
            exit::ExitCode::Interrupted
        }
        Err(_) => exit::ExitCode::Failure,
    }
}

/// Runs one invocation. Errors are runtime failures (exit 1) unless they carry a
/// [`exit::UsageError`] (exit 2).
pub fn run(options: &Options, invocation: &Invocation) -> anyhow::Result<exit::ExitCode> {
    if options.dump.is_some()
        && !matches!(
            invocation,
            Invocation::Relay(..) | Invocation::Pipe(..) | Invocation::Tee(..)
        )
    {
        return Err(exit::UsageError(
            "--dump: relay, pipe and tee dump the bytes they move (copy does not)".into(),
        )
        .into());
    }
    // A terminal asked for in raw mode (`-,raw,echo=0`) is set for the run and put back when
    // `_terminals` drops, whatever way the run ends; the commands see the plain endpoints.
    let mut invocation = invocation.clone();
    let _terminals = endpoint::pty::set_terminals(invocation.endpoints_mut(), options.explain)?;
    let result = run_plain(options, &invocation);
    endpoint::pty::finish();
    result
}

fn run_plain(options: &Options, invocation: &Invocation) -> anyhow::Result<exit::ExitCode> {
    let ran = match invocation {
        Invocation::Pipe(cfg) => pipe::run(options, cfg),
        Invocation::Copy(cfg) => copy::run(options, cfg),
        Invocation::Tee(cfg) => tee::run(options, cfg),
        Invocation::Relay(cfg, tuning) => relay::run(options, cfg, tuning),
        Invocation::Probe(cfg) => probe::run(options, cfg),
        Invocation::InstallLinks { dir, force } => {
            cli::compat::install_links(dir, *force)?;
            Ok(exit::ExitCode::Success)
        }
        Invocation::Print(text) => {
            use std::io::Write;
            match std::io::stdout().write_all(text.as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    Ok(exit::ExitCode::BrokenPipe)
                }
                other => other.map(|_| exit::ExitCode::Success).map_err(Into::into),
            }
        }
    };
    // A WebSocket end's threads send what they hold and their close frame; then the TLS
    // record layers under them send their close_notify and wait for the peer's.
    endpoint::websocket::bridge::finish_all(std::time::Duration::from_secs(5));
    endpoint::tls::bridge::finish_all(std::time::Duration::from_secs(5));
    ran
}

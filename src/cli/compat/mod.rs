//! Drop-in names: zerocat answers to `nc` (`netcat`, `ncat`), `tee` and `pv` with those
//! tools' own flags, so scripts switch without a rewrite (busybox's multi-call rule).
//!
//! Called through a link of one of those names (`argv[0]`), or as `zerocat nc ARGS`,
//! `zerocat pv ARGS` and `zerocat compat tee ARGS` (GNU tee's grammar — `zerocat tee`
//! keeps zerocat's own `tee SRC DST...`, which existing users have). Each parser turns the
//! tool's command line into the same `Options` + `Invocation` zerocat's own commands make:
//! the engine moves the bytes by the cheapest kernel path as ever. Quiet as those tools are
//! by default; `--zerocat-report` (any position) prints zerocat's report at the end.
//!
//! A flag zerocat does not take is refused with the tool's own usage error and one line
//! naming the zerocat spelling: never ignored.

mod getopt;
mod lines;
mod nc;
mod pv;
mod tee;

use std::ffi::OsString;

use crate::engine::Via;
use crate::options::Options;
use crate::report::StatsFormat;
use crate::Invocation;

/// A tool zerocat answers as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Nc,
    Tee,
    Pv,
}

impl Tool {
    /// The tool a program name (`argv[0]`'s file name, or `zerocat compat NAME`) calls.
    pub fn named(name: &str) -> Option<Tool> {
        match name {
            "nc" | "netcat" | "ncat" => Some(Tool::Nc),
            "tee" => Some(Tool::Tee),
            "pv" => Some(Tool::Pv),
            _ => None,
        }
    }

    /// The names `install-links` makes.
    pub const LINKS: [&'static str; 5] = ["nc", "netcat", "ncat", "tee", "pv"];
}

/// The tool `argv[0]` names, when zerocat was called through a link of that name.
pub fn called_as(args: &[OsString]) -> Option<(Tool, String)> {
    let name = std::path::Path::new(args.first()?)
        .file_name()?
        .to_str()?
        .to_string();
    Tool::named(&name).map(|tool| (tool, name))
}

/// `tool`'s command line (without the program name) as zerocat's options and invocation.
/// Usage errors, `--help` and `--version` end the process here, as the tool would.
pub fn parse(tool: Tool, name: &str, args: &[OsString]) -> (Options, Invocation) {
    let (report, args) = take_report_flag(args);
    let mut options = quiet_options(tool);
    // nc says where it listens in its own words (-v), or not at all.
    crate::endpoint::announce_listeners(false);
    let invocation = match tool {
        Tool::Tee => tee::parse(&args, &mut options),
        Tool::Pv => pv::parse(&args, &mut options),
        Tool::Nc => nc::parse(name, &args, &mut options),
    };
    if let Some(stats) = report {
        options.quiet = false;
        options.stats = stats;
    }
    (options, invocation)
}

/// `--zerocat-report[=json]`, wherever it is: zerocat's own report at the end.
fn take_report_flag(args: &[OsString]) -> (Option<StatsFormat>, Vec<OsString>) {
    let mut report = None;
    let mut rest = Vec::with_capacity(args.len());
    for arg in args {
        match arg.to_str() {
            Some("--zerocat-report") | Some("--zerocat-report=text") => {
                report = Some(StatsFormat::Text)
            }
            Some("--zerocat-report=json") => report = Some(StatsFormat::Json),
            _ => rest.push(arg.clone()),
        }
    }
    (report, rest)
}

/// The options a tool starts from: no report, no zerocat bar.
fn quiet_options(tool: Tool) -> Options {
    Options {
        via: Via::Auto,
        quiet: true,
        program: Some(match tool {
            Tool::Nc => "nc",
            Tool::Tee => "tee",
            Tool::Pv => "pv",
        }),
        ..Options::default()
    }
}

/// Ends the process with the tool's usage error: `PROG: WORDS`, the tool's hint line, and
/// (when there is one) the zerocat spelling of what was asked. Exit `code`.
fn refuse(prog: &str, words: &str, hint: &str, zerocat: Option<&str>, code: i32) -> ! {
    eprintln!("{prog}: {words}");
    if !hint.is_empty() {
        eprintln!("{hint}");
    }
    if let Some(spelling) = zerocat {
        eprintln!("zerocat: {spelling}");
    }
    std::process::exit(code)
}

/// A duration as these tools give it: whole or fractional seconds (`-w 2`, `-i 0.5`).
fn seconds(text: &str) -> Option<std::time::Duration> {
    let secs: f64 = text.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| std::time::Duration::from_secs_f64(secs))
}

/// `install-links DIR`: a symlink per name to this binary (busybox's `--install`).
/// Something else of that name is refused unless `force`; a link to this binary already
/// there is left as it is.
pub fn install_links(dir: &std::path::Path, force: bool) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let exe = std::env::current_exe().context("cannot find this zerocat's own path")?;
    if !dir.is_dir() {
        anyhow::bail!("install-links: '{}' is not a directory", dir.display());
    }
    for name in Tool::LINKS {
        let link = dir.join(name);
        match std::fs::read_link(&link) {
            Ok(target) if target == exe => {
                println!("{} -> {} (already)", link.display(), exe.display());
                continue;
            }
            _ if link.symlink_metadata().is_ok() && !force => anyhow::bail!(
                "install-links: '{}' exists; --force replaces it",
                link.display()
            ),
            _ if link.symlink_metadata().is_ok() => std::fs::remove_file(&link)
                .with_context(|| format!("cannot remove '{}'", link.display()))?,
            _ => {}
        }
        std::os::unix::fs::symlink(&exe, &link)
            .with_context(|| format!("cannot make the link '{}'", link.display()))?;
        println!("{} -> {}", link.display(), exe.display());
    }
    Ok(())
}

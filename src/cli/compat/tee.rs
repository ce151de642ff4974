//! GNU tee (coreutils 9): `tee [-a] [-i] [-p] [--output-error[=MODE]] [FILE]...` copies
//! stdin to each FILE and to stdout. A FILE is a file name, always (`-` and `tcp:x` are
//! files, as GNU has them), never a zerocat URI.

use std::ffi::OsString;

use super::getopt::{self, Arg, Item, Spec};
use crate::cmd::tee::TeeConfig;
use crate::endpoint::{Endpoint, FileOpts};
use crate::engine::fanout::OnError;
use crate::options::Options;
use crate::Invocation;

const SPECS: &[Spec] = &[
    Spec {
        short: Some('a'),
        long: Some("append"),
        arg: Arg::None,
        key: "a",
    },
    Spec {
        short: Some('i'),
        long: Some("ignore-interrupts"),
        arg: Arg::None,
        key: "i",
    },
    Spec {
        short: Some('p'),
        long: None,
        arg: Arg::None,
        key: "p",
    },
    Spec {
        short: None,
        long: Some("output-error"),
        arg: Arg::Optional,
        key: "output-error",
    },
    Spec {
        short: None,
        long: Some("help"),
        arg: Arg::None,
        key: "help",
    },
    Spec {
        short: None,
        long: Some("version"),
        arg: Arg::None,
        key: "version",
    },
];

const TRY: &str = "Try 'tee --help' for more information.";

const HELP: &str = "\
Usage: tee [OPTION]... [FILE]...
Copy standard input to each FILE, and also to standard output.

  -a, --append              append to the given FILEs, do not overwrite
  -i, --ignore-interrupts   ignore interrupt signals
  -p                        operate in a more appropriate MODE with pipes.
      --output-error[=MODE]   set behavior on write error.  See MODE below
      --help        display this help and exit
      --version     output version information and exit
      --zerocat-report   print zerocat's report (the kernel path) at the end

MODE determines behavior with write errors on the outputs:
  warn           diagnose errors writing to any output
  warn-nopipe    diagnose errors writing to any output not a pipe
  exit           exit on error writing to any output
  exit-nopipe    exit on error writing to any output not a pipe
The default MODE for the -p option is 'warn-nopipe'.
With \"nopipe\" MODEs, exit immediately if all outputs become broken pipes.
The default operation when --output-error is not specified, is to
exit immediately on error writing to a pipe, and diagnose errors
writing to non pipe outputs.

This is zerocat answering as tee: every byte moves by tee(2)/splice where the kernel
allows. zerocat's own `zerocat tee SRC DST...` takes URIs: see `zerocat tee --help`.
";

pub fn parse(args: &[OsString], _options: &mut Options) -> Invocation {
    let items = getopt::parse(args, SPECS)
        .unwrap_or_else(|e| super::refuse("tee", &e.glibc_words(), TRY, None, 1));
    let (mut append, mut ignore_interrupts) = (false, false);
    let mut policy = OnError::Gnu;
    let mut files = Vec::new();
    for item in items {
        match item {
            Item::Opt { key: "a", .. } => append = true,
            Item::Opt { key: "i", .. } => ignore_interrupts = true,
            Item::Opt { key: "p", .. } => policy = OnError::WarnNoPipe,
            Item::Opt {
                key: "output-error",
                value,
            } => policy = output_error(value.as_deref()),
            Item::Opt { key: "help", .. } => {
                print!("{HELP}");
                std::process::exit(0)
            }
            Item::Opt { key: "version", .. } => {
                println!(
                    "tee (zerocat {}) — GNU tee's options, zerocat's engine",
                    env!("CARGO_PKG_VERSION")
                );
                std::process::exit(0)
            }
            Item::Opt { .. } => unreachable!("every key of SPECS is matched"),
            Item::Operand(file) => files.push(Endpoint::File {
                path: file.into(),
                opts: FileOpts::default(),
            }),
        }
    }
    // -a applies to every FILE, wherever it stands.
    let sinks = std::iter::once(Endpoint::Stdio)
        .chain(
            files
                .into_iter()
                .map(|f| if append { f.appending() } else { f }),
        )
        .collect();
    Invocation::Tee(TeeConfig {
        src: Endpoint::Stdio,
        sinks,
        on_error: policy,
        grace: crate::cmd::relay::GRACE,
        ignore_interrupts,
        idle_timeout: None,
        gnu_words: true,
        keep_open: false,
    })
}

/// `--output-error[=MODE]`, GNU's words for a MODE it does not know.
fn output_error(mode: Option<&str>) -> OnError {
    const MODES: [(&str, OnError); 4] = [
        ("warn", OnError::Warn),
        ("warn-nopipe", OnError::WarnNoPipe),
        ("exit", OnError::Exit),
        ("exit-nopipe", OnError::ExitNoPipe),
    ];
    let Some(mode) = mode else {
        return OnError::WarnNoPipe;
    };
    // GNU takes an unambiguous prefix (argmatch).
    let matching: Vec<_> = MODES.iter().filter(|(m, _)| m.starts_with(mode)).collect();
    match (MODES.iter().find(|(m, _)| *m == mode), &matching[..]) {
        (Some((_, policy)), _) => *policy,
        (None, [(_, policy)]) if !mode.is_empty() => *policy,
        (None, found) => {
            let what = if found.len() > 1 {
                "ambiguous"
            } else {
                "invalid"
            };
            // GNU's quotes: curly under a UTF-8 locale, ASCII otherwise.
            let (l, r) = if utf8_locale() {
                ("‘", "’")
            } else {
                ("'", "'")
            };
            let valid: String = MODES
                .iter()
                .map(|(m, _)| format!("\n  - {l}{m}{r}"))
                .collect();
            super::refuse(
                "tee",
                &format!("{what} argument {l}{mode}{r} for {l}--output-error{r}"),
                &format!("Valid arguments are:{valid}\n{TRY}"),
                None,
                1,
            )
        }
    }
}

/// Whether messages go out under a UTF-8 locale (LC_ALL, then LC_MESSAGES, then LANG).
fn utf8_locale() -> bool {
    let locale = ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_default()
        .to_ascii_lowercase();
    locale.contains("utf-8") || locale.contains("utf8")
}

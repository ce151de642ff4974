//! pv (1.6/1.8's common flags): `pv [OPTION]... [FILE]` copies FILE (or stdin) to stdout
//! and draws its progress on stderr. zerocat moves the bytes by its kernel path; `-L`
//! shrinks each call as `--limit` does; the display is pv's ([`crate::progress::PvDisplay`]).

use std::ffi::OsString;
use std::time::Duration;

use super::getopt::{self, Arg, Item, Spec};
use crate::cmd::pipe::PipeConfig;
use crate::endpoint::{Endpoint, FileOpts};
use crate::engine::{DataPath, Via};
use crate::options::{Options, PvStyle};
use crate::Invocation;

const fn flag(short: char, long: &'static str, key: &'static str) -> Spec {
    Spec {
        short: Some(short),
        long: Some(long),
        arg: Arg::None,
        key,
    }
}

const fn valued(short: char, long: &'static str, key: &'static str) -> Spec {
    Spec {
        short: Some(short),
        long: Some(long),
        arg: Arg::Required,
        key,
    }
}

const SPECS: &[Spec] = &[
    flag('p', "progress", "p"),
    flag('t', "timer", "t"),
    flag('e', "eta", "e"),
    flag('r', "rate", "r"),
    flag('a', "average-rate", "a"),
    flag('b', "bytes", "b"),
    flag('n', "numeric", "n"),
    flag('q', "quiet", "q"),
    flag('c', "cursor", "c"),
    flag('W', "wait", "W"),
    flag('f', "force", "f"),
    flag('C', "no-splice", "C"),
    flag('h', "help", "h"),
    flag('V', "version", "V"),
    valued('s', "size", "s"),
    valued('L', "rate-limit", "L"),
    valued('i', "interval", "i"),
    valued('w', "width", "w"),
    valued('N', "name", "N"),
    flag('l', "line-mode", "l"),
    flag('0', "null", "0"),
    // pv's flags zerocat does not take: known here so the refusal names them.
    flag('I', "fineta", "I"),
    flag('T', "buffer-percent", "T"),
    flag('E', "skip-errors", "E"),
    flag('S', "stop-at-size", "S"),
    flag('R', "remote", "R"),
    flag('Z', "no-op", "Z"),
    valued('A', "last-written", "A"),
    valued('F', "format", "F"),
    valued('D', "delay-start", "D"),
    valued('H', "height", "H"),
    valued('B', "buffer-size", "B"),
    valued('P', "pidfile", "P"),
    valued('d', "watchfd", "d"),
];

const TRY: &str = "Try `pv --help' for more information.";
/// pv's exit status for a command line it refuses.
const USAGE: i32 = 64;

const HELP: &str = "\
Usage: pv [OPTION] [FILE]
Concatenate FILE, or standard input, to standard output, with monitoring.

  -p, --progress           show progress bar
  -t, --timer              show elapsed time
  -e, --eta                show estimated time of arrival (completion)
  -r, --rate               show data transfer rate counter
  -a, --average-rate       show data transfer average rate counter
  -b, --bytes              show number of bytes transferred
  -f, --force              output even if standard error is not a terminal
  -n, --numeric            output percentages, not visual information
  -q, --quiet              do not output any transfer information at all
  -c, --cursor             use cursor positioning escape sequences
  -W, --wait               display nothing until first byte transferred
  -s, --size SIZE          set estimated data size to SIZE bytes
  -i, --interval SEC       update every SEC seconds
  -w, --width WIDTH        assume terminal is WIDTH characters wide
  -N, --name NAME          prefix visual information with NAME
  -L, --rate-limit RATE    limit transfer to RATE bytes per second
  -C, --no-splice          never use splice(), always use read/write
  -l, --line-mode          count lines instead of bytes (-s and -L in lines)
  -0, --null               lines are null-terminated (implies -l)
      --zerocat-report     print zerocat's report (the kernel path) at the end
  -h, --help               show this help and exit
  -V, --version            show version information and exit

This is zerocat answering as pv: the bytes move by splice/sendfile where the kernel
allows, paced by shrinking each call. zerocat's own spelling: zerocat --progress pipe FILE -
";

pub fn parse(args: &[OsString], options: &mut Options) -> Invocation {
    let items = getopt::parse(args, SPECS)
        .unwrap_or_else(|e| super::refuse("pv", &e.glibc_words(), TRY, None, USAGE));
    let mut style = PvStyle {
        interval: Duration::from_secs(1),
        ..PvStyle::default()
    };
    let (mut quiet, mut force) = (false, false);
    let mut line_end = None;
    let mut files = Vec::new();
    for item in items {
        let (key, value) = match item {
            Item::Operand(file) => {
                files.push(file);
                continue;
            }
            Item::Opt { key, value } => (key, value.unwrap_or_default()),
        };
        match key {
            "p" => style.progress = true,
            "t" => style.timer = true,
            "e" => style.eta = true,
            "r" => style.rate = true,
            "a" => style.average_rate = true,
            "b" => style.bytes = true,
            "n" => style.numeric = true,
            "q" => quiet = true,
            // One display, redrawn on its line: what -c keeps several pv's from garbling.
            "c" => {}
            "W" => style.wait = true,
            "f" => force = true,
            "C" => options.via = Via::Forced(DataPath::Userspace),
            "l" => line_end = line_end.or(Some(b'\n')),
            "0" => line_end = Some(0),
            "h" => {
                print!("{HELP}");
                std::process::exit(0)
            }
            "V" => {
                println!(
                    "pv (zerocat {}) — pv's options, zerocat's engine",
                    env!("CARGO_PKG_VERSION")
                );
                std::process::exit(0)
            }
            "s" => options.size = Some(number(&value, "-s", crate::units::parse_bytes)),
            "L" => options.limit = Some(number(&value, "-L", crate::units::parse_rate)),
            "i" => {
                style.interval = super::seconds(&value)
                    .filter(|d| !d.is_zero())
                    .unwrap_or_else(|| {
                        super::refuse("pv", "-i: numeric argument expected", TRY, None, USAGE)
                    })
            }
            "w" => {
                style.width = Some(value.parse().unwrap_or_else(|_| {
                    super::refuse("pv", "-w: integer argument expected", TRY, None, USAGE)
                }))
            }
            "N" => style.name = Some(value),
            other => refuse_unsupported(other),
        }
    }
    let src = match &files[..] {
        [] => Endpoint::Stdio,
        [one] if one == "-" => Endpoint::Stdio,
        [one] => Endpoint::File {
            path: one.into(),
            opts: FileOpts::default(),
        },
        [..] => super::refuse(
            "pv",
            "more than one FILE: zerocat moves one stream a run",
            "",
            Some(&format!(
                "concatenate first: cat {} | zerocat pv",
                files.join(" ")
            )),
            USAGE,
        ),
    };
    let src = match line_end {
        Some(end) => lines_of(src, end, options, &mut style),
        None => src,
    };
    // pv's rule: drawn when stderr is a terminal, or with -f; -n lines whatever stderr is.
    options.progress = !quiet && (force || style.numeric || crate::progress::draw_by_default(true));
    options.pv = Some(style);
    Invocation::Pipe(PipeConfig {
        src,
        dst: Endpoint::Stdio,
        grace: crate::cmd::relay::GRACE,
        idle_timeout: None,
        keep_open: false,
    })
}

/// `-l`/`-0`: lines counted (and with `-L`, paced in lines a second) by a thread that
/// reads every byte ([`super::lines`]); the engine moves its pipe by userspace, and the
/// report says why. pv's words when FILE cannot be opened.
fn lines_of(src: Endpoint, end: u8, options: &mut Options, style: &mut PvStyle) -> Endpoint {
    use std::os::fd::{AsFd as _, IntoRawFd as _, OwnedFd};
    let fd: std::io::Result<OwnedFd> = match &src {
        Endpoint::File { path, .. } => std::fs::File::open(path).map(OwnedFd::from).map_err(|e| {
            let words = nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(0)).desc();
            eprintln!("pv: failed to read file: {}: {words}", path.display());
            std::process::exit(2)
        }),
        _ => std::io::stdin().as_fd().try_clone_to_owned(),
    };
    let lines = super::lines::Lines {
        per_second: options.limit.take(),
        ..super::lines::Lines::ended_by(end)
    };
    style.lines = Some(lines.counted.clone());
    let piped = fd
        .and_then(|fd| lines.start(fd))
        .unwrap_or_else(|e| super::refuse("pv", &format!("-l: {e}"), "", None, USAGE));
    options.via = Via::Forced(DataPath::Userspace);
    options.userspace_because = Some("pv -l counts lines (every byte read)");
    Endpoint::Fd(piped.into_raw_fd())
}

/// A size or rate in pv's spelling (`10m`, `1.5G`, `500k`).
fn number(value: &str, flag: &str, parse: fn(&str) -> Result<u64, String>) -> u64 {
    parse(value).unwrap_or_else(|_| {
        super::refuse(
            "pv",
            &format!("{flag}: integer argument expected"),
            TRY,
            None,
            USAGE,
        )
    })
}

/// pv's flags that zerocat does not take, refused with the zerocat way to get the same.
fn refuse_unsupported(key: &str) -> ! {
    let (flag, spelling) = match key {
        "S" => (
            "-S",
            "zerocat pipe FILE,range=0-N - (or head -c N | zerocat pv)",
        ),
        "B" => (
            "-B",
            "the kernel path keeps zerocat's own pipe sizes; no buffer to size",
        ),
        "R" | "P" | "d" => (
            "-R/-P/-d",
            "send SIGUSR1 to a running zerocat for its progress line",
        ),
        "F" => ("-F", "zerocat --progress pipe draws zerocat's own format"),
        other => (other, "see zerocat pv --help for the flags taken"),
    };
    super::refuse(
        "pv",
        &format!("{flag}: not supported by zerocat's pv"),
        TRY,
        Some(spelling),
        USAGE,
    )
}

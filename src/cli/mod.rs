//! The command line. clap's types stop here: `Cli::into_invocation` turns what the user
//! typed into the core's `Options` and a command config.

pub mod compat;
pub mod man;
pub mod version;

use std::ffi::OsString;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::cmd::copy::{CopyConfig, Dereference, SparseMode, Update};
use crate::cmd::pipe::PipeConfig;
use crate::cmd::probe::ProbeConfig;
use crate::cmd::relay::RelayConfig;
use crate::cmd::tee::TeeConfig;
use crate::endpoint::sockopt::Family;
use crate::endpoint::{self, Endpoint};
use crate::engine::fanout::OnError;
use crate::engine::ReflinkMode;
use crate::engine::{DataPath, Via};
use crate::report::StatsFormat;
use crate::{Invocation, Options};

/// What `-h` and `--help` end with after the endpoint list.
const AFTER_ENDPOINTS: &str = "\
A listener with no HOST binds 127.0.0.1. Paths: copy_file_range, sendfile, splice, tee,
userspace (and reflink for copy). See `zerocat man` for the whole story.";

/// The width the endpoint list is wrapped to.
const HELP_WIDTH: usize = 100;

/// The endpoint list of `-h` (`long`: `--help`), made from the grammar's scheme table: `-h`
/// gives each scheme's form and option words, `--help` also what it is at each end and
/// what each option does.
pub fn endpoints_help(long: bool) -> String {
    const COLUMN: usize = 34;
    let mut out = String::from(
        "Endpoints: SCHEME:ADDRESS[,OPTION]... (scheme words are case-insensitive), - or PATH\n",
    );
    let mut row = |form: &str, text: &str| {
        let pad = COLUMN.saturating_sub(form.len() + 2).max(1);
        let first = if form.len() + 3 > COLUMN {
            format!("  {form}\n{}", " ".repeat(COLUMN))
        } else {
            format!("  {form}{}", " ".repeat(pad))
        };
        out.push_str(&first);
        out.push_str(&wrap(text, COLUMN, HELP_WIDTH));
        out.push('\n');
    };
    row("-", "stdin as a source, stdout as a sink");
    row("PATH", "a file (file:PATH for a file with options)");
    for info in endpoint::SCHEME_TABLE {
        let mut form = format!("{}:{}", info.name, info.address);
        for alias in info.aliases {
            form.push_str(&format!(" ({alias}:)"));
        }
        let words: Vec<&str> = info.options.iter().map(|o| o.form).collect();
        if !long {
            let text = if words.is_empty() {
                "no options".to_string()
            } else {
                words.join(" ")
            };
            row(&form, &text);
            continue;
        }
        row(
            &form,
            &format!("source: {}; sink: {}", info.as_source, info.as_sink),
        );
        for option in info.options {
            row(&format!("    ,{}", option.form), option.meaning);
        }
    }
    out.push_str(AFTER_ENDPOINTS);
    out
}

/// `text` in lines of at most `width` columns, the lines after the first indented by
/// `indent` (the first starts there already).
fn wrap(text: &str, indent: usize, width: usize) -> String {
    let mut out = String::new();
    let mut column = indent;
    for word in text.split(' ') {
        if column > indent && column + 1 + word.len() > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            column = indent;
        } else if column > indent {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.len();
    }
    out
}

/// The whole definition: [`Cli`]'s, ending with the endpoint list (`-h`, `--help`). Only
/// help shows that list, so parsing a command line does without it (see [`parse_args`]).
pub fn cli_command() -> clap::Command {
    Cli::command()
        .after_help(endpoints_help(false))
        .after_long_help(endpoints_help(true))
}

#[derive(Debug, Parser)]
#[command(
    name = "zerocat",
    version,
    about = "A zero-copy netcat/tee: moves bytes with splice, tee, sendfile and copy_file_range, and says which path ran",
    propagate_version = true,
    args_override_self = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Force a path: auto, copy_file_range, sendfile, splice, tee, userspace
    /// (`-` and `_` are interchangeable). A forced path the fds cannot take is an error
    /// before any byte moves; `--via userspace` copies through memory, trusting no offload.
    #[arg(long, global = true, value_name = "PATH", default_value = "auto", value_parser = parse_via)]
    pub via: Via,

    /// No report line, no progress.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// Also print the plan (fd kinds, chosen path, pipe sizes granted) before moving data.
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// Format of the end-of-run report on stderr.
    #[arg(long, global = true, value_enum, default_value_t = StatsArg::Text, value_name = "FORMAT")]
    pub stats: StatsArg,

    /// Show a progress bar on stderr (default: only when stderr is a terminal).
    #[arg(long, global = true, overrides_with = "no_progress")]
    pub progress: bool,

    /// Never show a progress bar.
    #[arg(long, global = true, overrides_with = "progress")]
    pub no_progress: bool,

    /// Print the plan and exit without moving data.
    #[arg(long, global = true)]
    pub explain: bool,

    /// Hold each pipe, copy or tee transfer to RATE bytes per second: 500k, 10M, 1.5G
    /// (binary units, pv's -L). The kernel path stays the same; only the length of each
    /// call shrinks. relay: each direction of each connection (--limit-total: all). After `copy`,
    /// -L is cp's --dereference: write --limit there (or -L before the command).
    #[arg(short = 'L', long, global = true, value_name = "RATE", value_parser = crate::units::parse_rate)]
    pub limit: Option<u64>,

    /// Write the end-of-run report to this inherited fd instead of stderr (with --stats json:
    /// one JSON object there, also for a run that failed before any byte moved).
    #[arg(long, global = true, value_name = "N", value_parser = parse_open_fd)]
    pub stats_fd: Option<i32>,

    /// Expected size of a stream (binary units: 700M), so the progress bar shows a
    /// percentage and ETA where the source has no size of its own.
    #[arg(long, global = true, value_name = "N", value_parser = crate::units::parse_bytes)]
    pub size: Option<u64>,

    /// relay, pipe, tee: write every byte that passes into FILE, per connection and
    /// direction, stamped (connection, direction, offset, time), as socat -v/-x and ncat
    /// -o/-x do. The transfer stays on splice (the pipe its bytes leave is tee(2)d into the
    /// dump; copy_file_range and sendfile become splice through a pipe); the dump never
    /// slows it: what it cannot keep up with is counted as missed.
    #[arg(long, global = true, value_name = "FILE", value_parser = parse_dump_path)]
    pub dump: Option<std::path::PathBuf>,

    /// Format of --dump: hex (hexdump -C lines), text (printable bytes, the rest escaped
    /// as \n, \r, \t, \\, \xHH) or pcap (a TCP conversation per connection, for
    /// Wireshark).
    #[arg(long, global = true, value_enum, default_value_t = DumpFormatArg::Hex, value_name = "FORMAT")]
    pub dump_format: DumpFormatArg,

    /// IPv4 only: names resolve to IPv4 addresses (as tcp4:, udp4:); an IPv6 address is a
    /// usage error.
    #[arg(short = '4', global = true, conflicts_with = "ipv6")]
    pub ipv4: bool,

    /// IPv6 only: names resolve to IPv6 addresses (as tcp6:, udp6:).
    #[arg(short = '6', global = true)]
    pub ipv6: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DumpFormatArg {
    Hex,
    Text,
    Pcap,
}

/// `--dump FILE`: a directory is refused here, before anything listens.
fn parse_dump_path(text: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(text);
    if path.is_dir() {
        return Err(format!("'{text}' is a directory; --dump writes a file"));
    }
    Ok(path)
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatsArg {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Move one stream from SRC to DST.
    #[command(after_help = "\
Examples:
  zerocat pipe big.iso - | sha256sum                 file to a pipe, via splice
  zerocat pipe tcp-listen:9000 backup.tar            receive one connection into a file
  tar c dir | zerocat pipe - tcp:host:9000           send a stream to a socket
  zerocat --limit 10M pipe disk.img tcp:host:9000    at most 10 MiB/s, still sendfile")]
    Pipe(PipeArgs),
    /// Copy files and trees: reflink, then copy_file_range, splice, userspace.
    #[command(after_help = "\
Examples:
  zerocat copy big.iso /mnt/backup/             into a directory, keeping the name
  zerocat copy -r --preserve src/ dst           a tree: symlinks stay symlinks
  zerocat copy --resume big.iso /mnt/big.iso    finish an interrupted copy
  zerocat copy --reflink=always a b             clone or fail (XFS, btrfs)
A SRC or DST that is not a plain file path (-, fd:N, tcp:...) makes it `pipe`.")]
    Copy(CopyArgs),
    /// Send every byte of SRC to every DST (files, pipes, sockets, listeners).
    #[command(after_help = "\
Examples:
  zerocat tee big.iso copy.iso - | sha256sum     a file to a file and a pipe, via tee(2)
  make 2>&1 | zerocat tee - file:build.log,append -
  zerocat tee tcp-listen:9000 a.tar tcp:backup:9000 --on-error=continue")]
    Tee(TeeArgs),
    /// Relay bytes both ways between A and B; a listener serves every connection.
    #[command(after_help = "\
A listener on either side (tcp-listen:, unix-listen:) serves every connection it accepts,
concurrently, each paired with a fresh connection to the other side. Two connectors relay one
session; `-` is stdin -> B and B -> stdout (netcat). EOF on one side is passed on as a
half-close and the other direction goes on until its own EOF; a reset resets the other side.
On SIGINT/SIGTERM: stop accepting, give connections in flight 2 s, report, exit 130.

Examples:
  zerocat relay tcp-listen:8080 tcp:backend:80           a TCP forwarder
  zerocat relay unix-listen:/run/app.sock tcp:db:5432,retry=10,interval=500ms
  zerocat relay - tcp:example.com:80                     netcat")]
    Relay(RelayArgs),
    /// Is something answering? Connect to each TARGET and close at once (nc -z, wait-for-it).
    #[command(after_help = "\
One line per target on stdout (--stats json: one JSON object per line): open, refused,
timeout, unreachable or failed, and how long the try took; a tls: target's line names the
TLS version, the certificate's subject and when it expires. Exit 0 when every target is
open, 1 when one is not (after --wait: when the time ran out), 2 on a usage error.

Examples:
  zerocat probe tcp:db:5432                          nc -z db 5432
  zerocat probe tcp:127.0.0.1:20-30                  nc -zv 127.0.0.1 20-30
  zerocat probe -q --wait 30s tcp:db:5432 && start   wait-for-it db:5432 -t 30 -- start
  zerocat probe tls:example.com:443                  handshake: version, subject, expiry")]
    Probe(ProbeArgs),
    /// Print a shell completion script.
    #[command(after_help = "\
Examples:
  zerocat completions bash > /usr/share/bash-completion/completions/zerocat
  zerocat completions zsh > /usr/local/share/zsh/site-functions/_zerocat
  zerocat completions fish > ~/.config/fish/completions/zerocat.fish")]
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    #[command(after_help = "\
Examples:
  zerocat man | man -l -                              read it now
  zerocat man > /usr/local/share/man/man1/zerocat.1   install it")]
    Man,
    /// Answer as netcat: OpenBSD nc's flags (also: a link named nc, netcat or ncat).
    #[command(
        disable_help_flag = true,
        after_help = "\
The flags are netcat's, written right after `nc` (zerocat nc -h lists them).
Examples:
  zerocat nc -zv 127.0.0.1 5432          is the port open? (exit 0 when it is)
  zerocat nc -l 9000 > file              receive one connection
  tar c dir | zerocat nc -N host 9000    send, half-close at the end"
    )]
    Nc {
        #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<OsString>,
    },
    /// Answer as pv: pv's flags, pv's display (also: a link named pv).
    #[command(
        disable_help_flag = true,
        after_help = "\
The flags are pv's, written right after `pv` (zerocat pv -h lists them).
Examples:
  zerocat pv big.iso > /dev/sdX          pv's bar, bytes by splice
  tar c dir | zerocat pv -L 10m | ...    at most 10 MiB/s"
    )]
    Pv {
        #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<OsString>,
    },
    /// Answer as nc, netcat, ncat, tee (GNU tee's grammar) or pv: `zerocat compat tee -a log`.
    #[command(
        disable_help_flag = true,
        after_help = "\
`zerocat tee` is zerocat's own tee (SRC DST...); GNU tee's grammar (stdin into FILEs and
stdout) is `zerocat compat tee FILE...`, or zerocat called through a link named tee.
Examples:
  make | zerocat compat tee -a build.log
  zerocat install-links ~/bin            links named nc, netcat, ncat, tee, pv"
    )]
    Compat {
        /// nc, netcat, ncat, tee or pv.
        name: String,
        #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true)]
        args: Vec<OsString>,
    },
    /// Make links named nc, netcat, ncat, tee and pv to this zerocat in DIR.
    #[command(after_help = "\
Examples:
  zerocat install-links /usr/local/bin    nc, tee and pv answer as zerocat
  zerocat install-links --force ~/bin     replace links or files of those names")]
    InstallLinks {
        /// The directory the links go into.
        dir: std::path::PathBuf,
        /// Replace what already has one of those names there.
        #[arg(long)]
        force: bool,
    },
    /// Print the version; with -v, also the commit, the kernel and what it offers (for a bug report).
    #[command(after_help = "\
Examples:
  zerocat version                  zerocat X.Y.Z (also: zerocat --version, -V)
  zerocat version -v               the lines a bug report needs (also: zerocat -V -v)")]
    Version,
}

#[derive(Debug, Args)]
pub struct PipeArgs {
    /// Where the bytes come from (default: stdin).
    #[arg(default_value = "-", value_parser = EndpointParser::stream_or_dash(parse_source), hide_possible_values = true, allow_hyphen_values = true)]
    pub src: Endpoint,
    /// Where the bytes go (default: stdout).
    #[arg(default_value = "-", value_parser = EndpointParser::stream_or_dash(parse_sink), hide_possible_values = true, allow_hyphen_values = true)]
    pub dst: Endpoint,
    /// After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = endpoint::parse_duration)]
    pub grace: std::time::Duration,
    /// End the run once no byte moved for this long (nc -w): a source that fell silent
    /// without closing (TCP, unix, TLS, a pipe, a terminal; UDP: no datagram), or a sink that
    /// took nothing. Bytes already taken are delivered first (then exit 0, the report ending
    /// in "idle timeout"); a sink that still takes nothing a second later fails the run.
    /// An http(s) source: no byte of its body for this long is a cut, resumed as
    /// --retries says (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Give up connecting a tcp:, unix: or tls: endpoint after this long (each attempt of
    /// retry=N; a tls: handshake too, else 10 s) (nc -w while connecting).
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub connect_timeout: Option<std::time::Duration>,
    /// SRC is a listener: take its connections one after another into DST, each whole
    /// before the next (others wait in the backlog), until SIGINT/SIGTERM (nc -lk, ncat -k).
    /// The report counts them.
    #[arg(short = 'k', long)]
    pub keep_open: bool,
    #[command(flatten)]
    pub resume: ResumeArgs,
}

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// tcp:HOST:PORT (a range: tcp:HOST:20-30), tls:HOST:PORT (and its ,OPTIONS) or unix:PATH.
    #[arg(required = true, num_args = 1.., value_name = "TARGET", value_parser = crate::cmd::probe::parse_target)]
    pub targets: Vec<crate::cmd::probe::Target>,
    /// Try again (every 250 ms) the targets not open yet until all are (exit 0) or this
    /// long has passed (exit 1): a container's entrypoint waiting for its database.
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub wait: Option<std::time::Duration>,
    /// Each try at a target (connect, and a tls: handshake) gives up after this long and
    /// says timeout (nc -w).
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = endpoint::parse_timeout)]
    pub connect_timeout: std::time::Duration,
}

/// How an http(s) source resumes a body cut short (issue 38): pipe, tee and copy.
#[derive(Debug, Args, Clone, Copy)]
pub struct ResumeArgs {
    /// An http(s) body that stops short (a reset, a close before its length, a chunked
    /// stream cut, --idle-timeout) is asked again from the next byte (Range, and If-Range
    /// its strong ETag or Last-Modified: another version is refused, never appended): at
    /// most N attempts in a row that get nowhere (a connection cut before it carried 1 MiB
    /// or lasted --retry-wait counts as one). 0: no resume.
    #[arg(long, value_name = "N", default_value_t = crate::endpoint::http::resume::DEFAULT_POLICY.retries)]
    pub retries: u32,
    /// The wait before the second attempt to resume (the first goes at once), doubled after
    /// each one that fails.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = endpoint::parse_duration)]
    pub retry_wait: std::time::Duration,
}

impl ResumeArgs {
    fn policy(
        self,
        idle: Option<std::time::Duration>,
    ) -> crate::endpoint::http::resume::ResumePolicy {
        crate::endpoint::http::resume::ResumePolicy {
            retries: self.retries,
            wait: self.retry_wait,
            idle: idle.unwrap_or(crate::endpoint::http::resume::DEFAULT_POLICY.idle),
        }
    }
}

/// An http(s) or s3 source takes the command's --retries, --retry-wait and --idle-timeout.
fn with_resume(mut e: Endpoint, policy: crate::endpoint::http::resume::ResumePolicy) -> Endpoint {
    match &mut e {
        Endpoint::Http { opts, .. } => opts.resume = policy,
        Endpoint::S3 { opts, .. } => opts.resume = policy,
        _ => {}
    }
    e
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// SRC DST, or SRC... DIR (a directory DST gets each source under its own name); with
    /// -t DIR, only the sources.
    #[arg(required = true, num_args = 1.., value_name = "PATH", value_parser = EndpointParser::path(parse_endpoint))]
    pub paths: Vec<Endpoint>,
    /// Copy every source into DIR (cp -t, for xargs and find -exec ... +).
    #[arg(short = 't', long, value_name = "DIR", value_parser = EndpointParser::path(parse_endpoint))]
    pub target_directory: Option<Endpoint>,
    /// Copy directories and what they hold; symlinks are copied as symlinks (-R too).
    #[arg(short, short_alias = 'R', long)]
    pub recursive: bool,
    /// cp -a: -r and --preserve (symlinks are copied as symlinks in any tree).
    #[arg(short = 'a', long)]
    pub archive: bool,
    /// Never overwrite an existing destination (it is skipped and counted).
    #[arg(short = 'n', long, conflicts_with = "force")]
    pub no_clobber: bool,
    /// A destination that cannot be opened is removed and created anew.
    #[arg(short, long)]
    pub force: bool,
    /// Which existing destinations are replaced (coreutils 9.5): all (the default without
    /// --update), none (keep every one, as -n), older (a bare --update: only one older than
    /// its source). A destination kept is skipped and counted. -u is --update=older.
    #[arg(short = 'u', long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "older", value_name = "WHICH")]
    pub update: Option<UpdateArg>,
    /// Also keep exact mode bits, ownership (where permitted: not root, the group alone, if
    /// you are a member of it) and timestamps.
    #[arg(short, long)]
    pub preserve: bool,
    /// Clone with FICLONE: auto (clone where the filesystem can, else copy), always (clone
    /// or fail; only with --sparse=auto, as cp), never.
    #[arg(long, value_enum, default_value_t = ReflinkArg::Auto, value_name = "WHEN")]
    pub reflink: ReflinkArg,
    /// Holes: auto (a sparse source's holes stay holes), always (also zero blocks become
    /// holes), never (write every byte: no clone and no copy_file_range, which may keep
    /// holes).
    #[arg(long, value_enum, default_value_t = SparseArg::Auto, value_name = "WHEN")]
    pub sparse: SparseArg,
    /// Continue an interrupted copy: keep a destination that is a verified prefix of the
    /// source (every byte compared, 1 MiB at a time; the time it took is reported) and copy
    /// the rest; any other destination is copied again from the start.
    #[arg(long)]
    pub resume: bool,
    /// In a tree, recreate FIFOs and device nodes instead of refusing them (an operand
    /// given without -r is read into a file, as cp does).
    #[arg(long)]
    pub special: bool,
    /// fdatasync each file before counting it done: the progress bar shows bytes on disk,
    /// not in the page cache.
    #[arg(long)]
    pub sync: bool,
    /// After each file is copied (by any path, a reflink too), read it and its source back
    /// and compare them; a difference fails that file, naming the offset. With --sync the
    /// copy is read from the disk, not the page cache.
    #[arg(long)]
    pub verify: bool,
    /// Write each file to a temporary in its destination's directory and rename it over the
    /// destination only when complete (and verified): an interrupted or failed copy leaves
    /// the old destination as it was. Not with --resume, which keeps a partial destination.
    #[arg(long, conflicts_with = "resume")]
    pub atomic: bool,
    /// After each file, print on stdout what ran, in cp 9.x's words: 'a' -> 'b', then
    /// "copy offload: yes|no|avoided|unsupported, reflink: yes|unsupported|no, sparse
    /// detection: no|SEEK_HOLE|zeros|SEEK_HOLE + zeros"; a destination kept (--update=none,
    /// -n) gets "skipped 'b'". A stdout that cannot take the lines fails the run (exit 1).
    #[arg(long)]
    pub debug: bool,
    /// Copy a tree with N threads, each taking whole directories. Directories are still
    /// created before their entries and get their mode and times after them; the report
    /// and -v list entries in the walk's order. Default: twice the CPUs available
    /// (sched_getaffinity), at most 8; -j 1 copies on one thread; -j takes at most 256.
    /// To or from s3://: N objects at once in copy -r (default 8); one object up, N parts
    /// of its multipart upload at once (its parts=, default 4; at most 64).
    #[arg(short = 'j', long, value_name = "N", value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// DEST is the copy itself, even when it is a directory (cp -T): one source.
    #[arg(short = 'T', long, conflicts_with = "target_directory")]
    pub no_target_directory: bool,
    /// Keep each source's path under the directory DEST (cp --parents: a/b/f -> DEST/a/b/f).
    #[arg(long)]
    pub parents: bool,
    /// Ask on stderr before replacing an existing destination; a line from stdin that
    /// starts with y answers yes (cp -i). Copies one file at a time.
    #[arg(short = 'i', long, conflicts_with = "no_clobber")]
    pub interactive: bool,
    /// Follow every symlink, in trees too: a link is copied as what it points to (cp -L).
    /// A link to a directory that holds it is refused ("cyclic symbolic link").
    #[arg(short = 'L', long, overrides_with_all = ["dereference_command_line", "no_dereference"])]
    pub dereference: bool,
    /// Follow the symlinks given as operands only; inside a tree they stay symlinks (cp -H).
    #[arg(short = 'H', long, overrides_with_all = ["dereference", "no_dereference"])]
    pub dereference_command_line: bool,
    /// Never follow a symlink: an operand that is one is copied as a symlink (cp -P; the
    /// default under -r; without -r an operand is followed).
    #[arg(short = 'P', long, overrides_with_all = ["dereference", "dereference_command_line"])]
    pub no_dereference: bool,
    /// Remove an existing destination before copying, instead of opening it and writing
    /// over it (cp --remove-destination): a symlink there is replaced, not written through.
    #[arg(long)]
    pub remove_destination: bool,
    /// Hold the copy to RATE bytes per second (the global --limit; in copy, -L is cp's
    /// --dereference, so the rate has the long form only).
    #[arg(long, value_name = "RATE", value_parser = crate::units::parse_rate)]
    pub limit: Option<u64>,
    /// An http(s) source: no byte of the body for this long is a cut, resumed as --retries
    /// says (default 30s).
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub idle_timeout: Option<std::time::Duration>,
    #[command(flatten)]
    pub resume_http: ResumeArgs,
    /// cp -s: refused with a usage error that says so (copy makes copies; ln makes links).
    #[arg(short = 's', long, hide = true)]
    pub symbolic_link: bool,
    /// cp -l: refused likewise.
    #[arg(short = 'l', long, hide = true)]
    pub link: bool,
}

/// `--stats-fd N`: an fd that is open now (3 or above: 0-2 are the streams).
fn parse_open_fd(arg: &str) -> Result<i32, String> {
    let fd: i32 = arg
        .parse()
        .map_err(|_| format!("'{arg}' is not a file descriptor number"))?;
    if fd < 1 {
        return Err(format!("fd {fd} is not an output"));
    }
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD)
        .map_err(|_| format!("fd {fd} is not open"))?;
    Ok(fd)
}

/// `-j N`: at least one.
/// The most threads `copy -j` and `relay --workers` start: far past what pays on any
/// machine (each is a thread with its own stack; the workers a loop and pools each), and far
/// below where spawning them fails and aborts the run.
pub const MAX_THREADS: usize = 256;

fn parse_jobs(arg: &str) -> Result<usize, String> {
    parse_threads(
        arg,
        "-j",
        "jobs",
        "at least one job copies the files (-j 1: one thread)",
    )
}

fn parse_workers(arg: &str) -> Result<usize, String> {
    parse_threads(
        arg,
        "--workers",
        "event loops",
        "at least one event loop serves the listener",
    )
}

/// A count of threads for `flag`: 1 to [`MAX_THREADS`].
fn parse_threads(arg: &str, flag: &str, what: &str, at_least_one: &str) -> Result<usize, String> {
    match arg.parse::<usize>() {
        Ok(0) => Err(format!("{flag} 0: {at_least_one}")),
        Ok(n) if n > MAX_THREADS => Err(format!(
            "{flag} {n}: at most {MAX_THREADS} {what} (threads); more only wait on each other"
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{arg}' is not a number of {what}")),
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReflinkArg {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum UpdateArg {
    All,
    None,
    Older,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SparseArg {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Args)]
pub struct TeeArgs {
    /// Where the bytes come from.
    #[arg(value_parser = EndpointParser::stream(parse_source), hide_possible_values = true)]
    pub src: Endpoint,
    /// Where they all go; listeners each accept one connection before data flows.
    #[arg(value_parser = EndpointParser::stream(parse_sink), hide_possible_values = true)]
    pub dst: Vec<Endpoint>,
    /// Append to the file sinks instead of truncating them (GNU tee -a; file:X,append).
    #[arg(short = 'a', long)]
    pub append: bool,
    /// When a sink fails: stop everything (exit 1, naming it; stdout's reader going away
    /// is a quiet 141), or drop that sink and keep feeding the others (still exit 1 at the
    /// end). fail is the default; continue is --output-error=warn; gnu is GNU tee without
    /// --output-error (a failing file is dropped and the others go on, exit 1 at the end; a
    /// reader that went away ends the run quietly, 141).
    #[arg(
        long,
        value_enum,
        value_name = "POLICY",
        overrides_with = "output_error"
    )]
    pub on_error: Option<OnErrorArg>,
    /// GNU tee's modes: warn (drop a failing sink, feed the others, exit 1), warn-nopipe
    /// (the same, but a reader that went away (EPIPE) is dropped quietly and is no error),
    /// exit (stop at the first failing sink, EPIPE included: exit 1), exit-nopipe (a reader
    /// that went away is dropped quietly; any other error stops). Bare --output-error and
    /// -p mean warn-nopipe.
    #[arg(
        short = 'p',
        long,
        value_enum,
        value_name = "MODE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "warn-nopipe",
        overrides_with = "on_error"
    )]
    pub output_error: Option<OutputErrorArg>,
    /// After SIGINT/SIGTERM, an exec:/sh: child gets SIGTERM, then SIGKILL after this long.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = endpoint::parse_duration)]
    pub grace: std::time::Duration,
    /// Ignore SIGINT (GNU tee -i): a Ctrl-C meant for the command feeding the pipe does not
    /// cut the copy short; SIGTERM still stops it.
    #[arg(short = 'i', long)]
    pub ignore_interrupts: bool,
    /// End the run once no byte moved for this long, as pipe's --idle-timeout.
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Give up connecting a tcp:, unix: or tls: endpoint after this long, as pipe's.
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub connect_timeout: Option<std::time::Duration>,
    /// SRC is a listener: take its connections one after another, each whole into every
    /// DST before the next (others wait in the backlog), until SIGINT/SIGTERM, as pipe's.
    #[arg(long)]
    pub keep_open: bool,
    #[command(flatten)]
    pub resume: ResumeArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OnErrorArg {
    Fail,
    Continue,
    Gnu,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputErrorArg {
    Warn,
    WarnNopipe,
    Exit,
    ExitNopipe,
}

/// The one policy both spellings name; neither given is zerocat's `fail`.
fn on_error(on_error: Option<OnErrorArg>, output_error: Option<OutputErrorArg>) -> OnError {
    match (output_error, on_error) {
        (Some(OutputErrorArg::Warn), _) | (None, Some(OnErrorArg::Continue)) => OnError::Warn,
        (Some(OutputErrorArg::WarnNopipe), _) => OnError::WarnNoPipe,
        (Some(OutputErrorArg::Exit), _) => OnError::Exit,
        (Some(OutputErrorArg::ExitNopipe), _) => OnError::ExitNoPipe,
        (None, Some(OnErrorArg::Fail) | None) => OnError::Fail,
        (None, Some(OnErrorArg::Gnu)) => OnError::Gnu,
    }
}

#[derive(Debug, Args)]
pub struct RelayArgs {
    /// One side: a listener, a connector, `-` or fd:N.
    #[arg(value_parser = EndpointParser::stream_or_dash(parse_relay_side), hide_possible_values = true, allow_hyphen_values = true)]
    pub a: Endpoint,
    /// The other side.
    #[arg(value_parser = EndpointParser::stream_or_dash(parse_relay_side), hide_possible_values = true, allow_hyphen_values = true)]
    pub b: Endpoint,
    /// More upstreams beside B (A then listens, or is `-` or fd:N): a connection gets one,
    /// by --balance, and the next where one fails before any byte moved.
    #[arg(value_name = "B2", value_parser = EndpointParser::stream(parse_relay_side), hide_possible_values = true)]
    pub more: Vec<Endpoint>,
    /// With several upstreams, which one a connection gets: failover (the first that is
    /// up), round-robin, least-conn (fewest open), source-hash (by the client's IP address).
    #[arg(long, value_name = "MODE", value_enum, default_value_t)]
    pub balance: crate::cmd::relay::Balance,
    /// With several upstreams, skip one that failed a connection (refused, timed out,
    /// reset or TLS failed before any byte moved) for this long. 0: never skip.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = endpoint::parse_duration)]
    pub down_for: std::time::Duration,
    /// With several upstreams, probe each this often (a TCP or unix connect; a TLS
    /// handshake for tls:): one that fails is down for --down-for, one that answers is up.
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub check_interval: Option<std::time::Duration>,
    /// Hold all connections together to RATE bytes per second each way (-L/--limit holds
    /// each direction of each connection).
    #[arg(long, value_name = "RATE", value_parser = crate::units::parse_rate)]
    pub limit_total: Option<u64>,
    /// With an inherited listener (systemd:, fd:N): exit 0 after this long with no
    /// connection open, leaving the listening socket to systemd (a client arriving then
    /// waits in its backlog for the next activation).
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub exit_idle: Option<std::time::Duration>,
    /// Serve one connection, then exit.
    #[arg(long)]
    pub once: bool,
    /// Connections served at once; more wait in the listen backlog. Default: what the
    /// open-file limit holds, (limit - 16) / 7 (two sockets and a pipe each way, and one
    /// connection still greeting), after raising the soft limit to the hard one. A TLS or
    /// `proxy` listener also has at most this many (and 1,024) connections greeting, half of
    /// them from one address: past that the oldest greeting is closed for the newcomer.
    /// UDP: sessions open at once (a new client's datagrams beyond it are dropped and
    /// counted).
    #[arg(long, value_name = "N")]
    pub max_conns: Option<usize>,
    /// Close a connection that moved no byte either way for this long (500ms, 30s, 5m).
    /// UDP: a session ends after this long without a datagram (default 60s).
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub idle_timeout: Option<std::time::Duration>,
    /// Give up a connection attempt after this long (each attempt of retry=N); also how long
    /// a `proxy` or TLS listener waits for a PROXY header and handshake (default 5 s).
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_timeout)]
    pub connect_timeout: Option<std::time::Duration>,
    /// Once one direction of a connection has ended (EOF, passed on as a half-close), give
    /// the other at most this long, then end the connection cleanly (nc -q, ncat -q; 0: at
    /// once). Without it, the other direction goes on until its own EOF.
    #[arg(long, value_name = "DURATION", value_parser = endpoint::parse_duration)]
    pub linger: Option<std::time::Duration>,
    /// After SIGINT/SIGTERM: stop accepting, let the connections in flight finish for this
    /// long, then cut (reset) the rest; a second signal cuts them at once. 0: cut at once.
    /// A command side's child (exec:, sh:) of a cut connection then gets SIGTERM, and
    /// SIGKILL after this long again.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = endpoint::parse_duration)]
    pub grace: std::time::Duration,
    /// Write one JSON line per connection as it ends, into PATH (appended; a FIFO works)
    /// or `-` (stderr); the fields are listed under RELAY LOG.
    #[arg(long, value_name = "PATH")]
    pub log: Option<std::path::PathBuf>,
    /// Event loops serving a listener, each in a thread of its own; the listener is shared
    /// and a new connection goes to a loop that is waiting. Default: the CPUs available to
    /// the process, one below 4 CPUs. A TLS or `proxy` listener too: every loop takes handshakes. One session
    /// (no listener) or --once: one (the plan line says so). At most 256.
    #[arg(long, short = 'j', value_name = "N", value_parser = parse_workers)]
    pub workers: Option<usize>,
    /// Under auto, start every direction with splice, as if a bulk read had moved it there
    /// (the fault-injection and tiny-segment tests aim at splice).
    #[arg(long, hide = true)]
    pub splice_first: bool,
}

/// A value parser of arguments as the OS gave them (OsString): a path need not be UTF-8.
fn os<T: Clone + Send + Sync + 'static>(
    parse: fn(OsString) -> Result<T, String>,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    clap::builder::OsStringValueParser::new().try_map(parse)
}

/// The value parser of an endpoint: `parse` on the argument as the OS gave it; for a
/// stream's (pipe, tee, relay), the scheme words (`tcp:`, `tcp-listen:`, …) of the grammar's
/// table as the values completions offer. Help leaves them out (`hide_possible_values`);
/// they do not restrict what parses: a path is an endpoint too. A usage error shows the
/// argument without its secret ([`endpoint::redact`]).
#[derive(Clone)]
struct EndpointParser {
    parse: fn(OsString) -> Result<Endpoint, String>,
    offers_schemes: bool,
    /// The argument is `allow_hyphen_values` (for `-,raw,echo=0`): a value that starts with
    /// '-' and is neither `-` nor `-,…` is a mistyped option, not a file to create.
    dash_opts_only: bool,
}

impl EndpointParser {
    /// A stream's endpoint: completions offer the scheme words.
    fn stream(parse: fn(OsString) -> Result<Endpoint, String>) -> EndpointParser {
        EndpointParser {
            parse,
            offers_schemes: true,
            dash_opts_only: false,
        }
    }

    /// A stream's endpoint that may be `-,raw,echo=0` (clap takes '-'-led values for it).
    fn stream_or_dash(parse: fn(OsString) -> Result<Endpoint, String>) -> EndpointParser {
        EndpointParser {
            dash_opts_only: true,
            ..EndpointParser::stream(parse)
        }
    }

    /// `copy`'s paths: completions offer files.
    fn path(parse: fn(OsString) -> Result<Endpoint, String>) -> EndpointParser {
        EndpointParser {
            parse,
            offers_schemes: false,
            dash_opts_only: false,
        }
    }
}

impl clap::builder::TypedValueParser for EndpointParser {
    type Value = Endpoint;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Endpoint, clap::Error> {
        let shown = value.to_string_lossy();
        if self.dash_opts_only && shown.starts_with('-') && shown != "-" && !shown.starts_with("-,")
        {
            return Err(cmd.clone().error(
                clap::error::ErrorKind::UnknownArgument,
                format!(
                    "unexpected argument '{shown}' found\n\n  tip: a file whose name starts with '-' is './{shown}' or 'file:{shown}'"
                ),
            ));
        }
        let redacted = endpoint::redact(&shown);
        if redacted == shown {
            return os(self.parse).parse_ref(cmd, arg, value);
        }
        // clap's own message would show the value whole.
        (self.parse)(value.to_owned()).map_err(|message| {
            let name = arg.map_or_else(|| "...".to_string(), ToString::to_string);
            cmd.clone().error(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value '{redacted}' for '{name}': {message}"),
            )
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        if !self.offers_schemes {
            return None;
        }
        Some(Box::new(
            scheme_prefixes()
                .iter()
                .zip(endpoint::SCHEME_TABLE)
                .map(|(prefix, info)| {
                    clap::builder::PossibleValue::new(prefix.as_str()).help(info.as_source)
                }),
        ))
    }
}

/// `NAME:` of every scheme, in the table's order.
fn scheme_prefixes() -> &'static [String] {
    static PREFIXES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    PREFIXES.get_or_init(|| {
        let names = endpoint::SCHEME_TABLE
            .iter()
            .map(|s| format!("{}:", s.name));
        names.collect()
    })
}

/// An endpoint argument as the OS gave it (a path need not be UTF-8).
fn parse_endpoint(arg: OsString) -> Result<Endpoint, String> {
    let mut parsed = endpoint::parse_os(&arg).map_err(|e| e.to_string())?;
    // allow-file= is read now: a file that cannot be read is a usage error, before any
    // endpoint opens.
    parsed.load_access_file().map_err(|message| {
        format!(
            "invalid endpoint '{}': {message}",
            endpoint::redact(&arg.to_string_lossy())
        )
    })?;
    Ok(parsed)
}

/// A source endpoint: write-only file options are refused before anything is opened.
fn parse_source(arg: OsString) -> Result<Endpoint, String> {
    let endpoint = parse_endpoint(arg.clone())?;
    check_source(&arg.to_string_lossy(), &endpoint)?;
    Ok(endpoint)
}

/// A sink endpoint: one that can only receive (`udp-listen:`) is refused before anything
/// is opened.
fn parse_sink(arg: OsString) -> Result<Endpoint, String> {
    let endpoint = parse_endpoint(arg.clone())?;
    check_relay_only(&arg.to_string_lossy(), &endpoint)?;
    match endpoint.source_only() {
        Some(why) => Err(format!(
            "'{}' cannot be a sink: {why}",
            endpoint::redact(&arg.to_string_lossy())
        )),
        None => Ok(endpoint),
    }
}

/// A side of `relay`: any endpoint; which pairs relay is `relay`'s to say.
fn parse_relay_side(arg: OsString) -> Result<Endpoint, String> {
    parse_endpoint(arg)
}

/// `frame=len16` frames datagrams for a UDP relay: in pipe, tee and copy it would be ignored.
fn check_relay_only(arg: &str, endpoint: &Endpoint) -> Result<(), String> {
    match endpoint.relay_only_option() {
        Some(option) => Err(format!(
            "'{}': {option} frames datagrams for `zerocat relay` with a udp: or udp-listen: side",
            endpoint::redact(arg)
        )),
        None => Ok(()),
    }
}

fn check_source(arg: &str, endpoint: &Endpoint) -> Result<(), String> {
    check_relay_only(arg, endpoint)?;
    match endpoint.sink_only_option() {
        Some(option) => Err(format!(
            "'{}' is a source: {option} only applies to a file being written",
            endpoint::redact(arg)
        )),
        None => Ok(()),
    }
}

fn parse_via(arg: &str) -> Result<Via, String> {
    if arg.eq_ignore_ascii_case("auto") {
        return Ok(Via::Auto);
    }
    DataPath::from_name(arg).map(Via::Forced).ok_or_else(|| {
        let words: Vec<&str> = DataPath::ALL.iter().map(|p| p.name()).collect();
        format!("unknown path '{arg}': expected auto, {}", words.join(", "))
    })
}

/// What the process's arguments ask for. clap itself ends the process on a usage error
/// (exit 2), `--help` and `--version` (exit 0).
pub fn parse_args() -> (Options, Invocation) {
    let args: Vec<OsString> = std::env::args_os().collect();
    // Called through a link named nc, tee or pv; or `zerocat nc|netcat|ncat|pv ARGS`,
    // `zerocat compat NAME ARGS`: that tool's own flags (compat/mod.rs).
    if let Some((tool, name)) = compat::called_as(&args) {
        return compat::parse(tool, &name, &args[1..]);
    }
    let word = |i: usize| args.get(i).and_then(|a| a.to_str());
    match (word(1), word(2)) {
        (Some(name @ ("nc" | "netcat" | "ncat" | "pv")), _) => {
            let tool = compat::Tool::named(name).expect("a tool's name");
            return compat::parse(tool, name, &args[2..]);
        }
        (Some("compat"), Some(name)) => {
            if let Some(tool) = compat::Tool::named(name) {
                return compat::parse(tool, name, &args[3..]);
            }
        }
        _ => {}
    }
    // The endpoint list is made only for help, where clap shows it: making it was a tenth
    // of a healthcheck probe's start (bench/NOTEBOOK.md#probe-start-up).
    use clap::error::ErrorKind::{DisplayHelp, DisplayHelpOnMissingArgumentOrSubcommand};
    let parsed = match Cli::try_parse_from(&args) {
        Err(e)
            if matches!(
                e.kind(),
                DisplayHelp | DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            Err(cli_command().try_get_matches_from(&args).err().unwrap_or(e))
        }
        other => other,
    };
    match parsed {
        Ok(cli) => cli.into_invocation(),
        // `-V -v`: the verbose version, as `version -v` gives it.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayVersion && asks_verbose(&args) => {
            print!("{}", version::text(true));
            std::process::exit(0)
        }
        // --help and --version are "errors" on stdout: never a netcat line.
        Err(e) => match netcat_spelling(&args).filter(|_| e.use_stderr()) {
            Some(message) => cli_command().error(e.kind(), message).exit(),
            None => e.exit(),
        },
    }
}

/// Whether the command line holds `--verbose` or `-v` (alone or in a cluster: `-Vv`).
fn asks_verbose(args: &[OsString]) -> bool {
    args.iter().skip(1).filter_map(|a| a.to_str()).any(|a| {
        a == "--verbose" || (a.starts_with('-') && !a.starts_with("--") && a.contains('v'))
    })
}

/// netcat's command line typed at zerocat (`zerocat -l 9000`, `zerocat HOST PORT`, with
/// `-u`, `-p PORT`, a listener's address): the zerocat spelling of the same thing. None for
/// anything else, and whenever a subcommand is named: clap's error stands.
fn netcat_spelling(args: &[OsString]) -> Option<String> {
    let args: Vec<&str> = args.iter().skip(1).filter_map(|a| a.to_str()).collect();
    let cmd = cli_command();
    if args
        .iter()
        .any(|a| cmd.get_subcommands().any(|sub| sub.get_name() == *a))
    {
        return None;
    }
    // A short flag, alone or in a cluster (`-l`, `-lp`, `-ul`); zerocat's own are other letters.
    let flag = |letter: char| {
        args.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letter))
    };
    let (listen, udp) = (flag('l'), flag('u'));
    let words: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .copied()
        .collect();
    let is_port = |w: &str| w.bytes().all(|b| b.is_ascii_digit()) && w.parse::<u16>().is_ok();
    let at = words.iter().rposition(|w| is_port(w));
    let port = at.map(|i| words[i]);
    let host = at
        .and_then(|i| i.checked_sub(1))
        .map(|i| words[i])
        .filter(|h| !is_port(h));
    // As a URI writes it: an IPv6 address in brackets.
    let uri_host = host.map(|h| match h.contains(':') {
        true => format!("[{h}]"),
        false => h.to_string(),
    });
    let scheme = if udp { "udp" } else { "tcp" };
    if listen {
        let address = match (uri_host, port) {
            (Some(host), Some(port)) => format!("{host}:{port}"),
            (None, Some(port)) => port.to_string(),
            _ => "PORT".to_string(),
        };
        let mut message = format!(
            "zerocat has no -l (netcat's listen): a listener is an endpoint.\n  \
             received into stdout:       zerocat pipe {scheme}-listen:{address} -\n"
        );
        if !udp {
            message.push_str(&format!(
                "  both ways (interactive):    zerocat relay tcp-listen:{address} -\n"
            ));
        }
        message.push_str("A listener with no HOST binds 127.0.0.1.");
        return Some(message);
    }
    let (Some(host), Some(uri_host), Some(port)) = (host, uri_host, port) else {
        return None;
    };
    Some(match udp {
        true => format!(
            "'{host}' is not a command. netcat's nc -u HOST PORT (stdin as datagrams) is:\n  \
             zerocat pipe - udp:{uri_host}:{port}"
        ),
        false => format!(
            "'{host}' is not a command. netcat's nc HOST PORT (stdin to the peer, the peer to \
             stdout) is:\n  zerocat relay - tcp:{uri_host}:{port}"
        ),
    })
}

impl Cli {
    pub fn into_invocation(self) -> (Options, Invocation) {
        let g = self.global;
        let (forced, no_bar) = (g.progress, g.quiet || g.no_progress);
        let mut options = Options {
            via: g.via,
            quiet: g.quiet,
            verbose: g.verbose,
            stats: match g.stats {
                StatsArg::Text => StatsFormat::Text,
                StatsArg::Json => StatsFormat::Json,
            },
            explain: g.explain,
            progress: false,
            limit: g.limit,
            size: g.size,
            stats_fd: g.stats_fd,
            dump: g.dump.map(|path| crate::engine::dump::DumpSpec {
                path,
                format: match g.dump_format {
                    DumpFormatArg::Hex => crate::engine::dump::DumpFormat::Hex,
                    DumpFormatArg::Text => crate::engine::dump::DumpFormat::Text,
                    DumpFormatArg::Pcap => crate::engine::dump::DumpFormat::Pcap,
                },
            }),
            json: Default::default(),
            program: None,
            pv: None,
            userspace_because: None,
        };
        let invocation = match self.command {
            Command::Pipe(args) if args.keep_open && !args.src.listens() => {
                refuse_keep_open(&args.src, "pipe")
            }
            Command::Pipe(args) if args.keep_open && args.idle_timeout.is_some() => cli_command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "--keep-open with --idle-timeout: not yet (the timeout would end the \
                         whole run, not one connection)",
                )
                .exit(),
            Command::Pipe(args) => Invocation::Pipe(PipeConfig {
                src: with_resume(args.src, args.resume.policy(args.idle_timeout))
                    .connecting_within(args.connect_timeout),
                dst: args.dst.connecting_within(args.connect_timeout),
                grace: args.grace,
                idle_timeout: args.idle_timeout,
                keep_open: args.keep_open,
            }),
            Command::Copy(args) => {
                // In copy, --limit is the subcommand's own (-L is cp's there).
                options.limit = options.limit.or(args.limit);
                copy_invocation(args)
            }
            Command::Tee(args) if args.dst.is_empty() => cli_command()
                .error(
                    clap::error::ErrorKind::MissingRequiredArgument,
                    format!(
                        "tee takes SRC and at least one DST: '{src}' is the source here. For \
                         GNU tee's meaning (stdin into '{src}' and stdout) write: zerocat tee - \
                         {src} -",
                        src = args
                            .src
                            .plain_file()
                            .map_or_else(|| args.src.to_string(), |p| p.display().to_string())
                    ),
                )
                .exit(),
            Command::Tee(args) if args.keep_open && !args.src.listens() => {
                refuse_keep_open(&args.src, "tee")
            }
            Command::Tee(args) if args.keep_open && args.idle_timeout.is_some() => cli_command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "--keep-open with --idle-timeout: not yet (the timeout would end the \
                         whole run, not one connection)",
                )
                .exit(),
            Command::Tee(args) => Invocation::Tee(TeeConfig {
                src: with_resume(args.src, args.resume.policy(args.idle_timeout))
                    .connecting_within(args.connect_timeout),
                sinks: args
                    .dst
                    .into_iter()
                    .map(|e| match args.append {
                        true => e.appending(),
                        false => e,
                    })
                    .map(|e| e.connecting_within(args.connect_timeout))
                    .collect(),
                on_error: on_error(args.on_error, args.output_error),
                grace: args.grace,
                ignore_interrupts: args.ignore_interrupts,
                idle_timeout: args.idle_timeout,
                gnu_words: false,
                keep_open: args.keep_open,
            }),
            Command::Relay(args) => Invocation::Relay(
                RelayConfig {
                    a: args.a,
                    b: args.b,
                    more: args.more,
                    balance: args.balance,
                    down_for: args.down_for,
                    check_interval: args.check_interval,
                    limit_total: args.limit_total,
                    exit_idle: args.exit_idle,
                    once: args.once,
                    max_conns: args.max_conns,
                    idle_timeout: args.idle_timeout,
                    idle_ends_cleanly: false,
                    connect_timeout: args.connect_timeout,
                    linger: args.linger,
                    grace: args.grace,
                    log: args.log,
                    workers: args.workers,
                },
                crate::cmd::relay::Tuning {
                    splice_first: args.splice_first,
                },
            ),
            Command::Probe(args) => Invocation::Probe(ProbeConfig {
                targets: args.targets,
                wait: args.wait,
                connect_timeout: args.connect_timeout,
            }),
            Command::Completions { shell } => Invocation::Print(completions(shell)),
            Command::Man => Invocation::Print(man_page()),
            Command::Version => Invocation::Print(version::text(g.verbose)),
            // Reached only with a zerocat option before the name (`zerocat -q nc ...`):
            // the tools' flags are their own, so say where they go.
            Command::Nc { .. } | Command::Pv { .. } | Command::Compat { .. } => cli_command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    "nc, pv and compat take their tool's own flags only: write them right \
                     after the name (zerocat nc -v HOST PORT; --zerocat-report for the report)",
                )
                .exit(),
            Command::InstallLinks { dir, force } => Invocation::InstallLinks { dir, force },
        };
        let family = match (g.ipv4, g.ipv6) {
            (true, _) => Some(Family::V4),
            (_, true) => Some(Family::V6),
            _ => None,
        };
        let invocation = pin_family(invocation, family);
        // A relay is a server: its running totals are drawn when asked for (--progress),
        // never by default.
        let relay = matches!(invocation, Invocation::Relay(..));
        options.progress = !no_bar
            && (forced || (!relay && crate::progress::draw_by_default(invocation.writes_stdout())));
        (options, invocation)
    }
}

/// `--keep-open` names a listener to keep taking connections from: on anything else it
/// could only be ignored, so it is a usage error naming the argument.
fn refuse_keep_open(src: &Endpoint, command: &str) -> ! {
    cli_command()
        .error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "--keep-open: '{src}' is not a listener; {command} --keep-open takes connection \
                 after connection from a tcp-listen:, unix-listen: or tls-listen: source"
            ),
        )
        .exit()
}

/// `-4`/`-6`: every networked endpoint resolves to that family only; a literal address
/// (or `bind=`) of the other family is a usage error, before any fd opens.
fn pin_family(invocation: Invocation, family: Option<Family>) -> Invocation {
    let Some(family) = family else {
        return invocation;
    };
    let pin = |e: Endpoint| {
        let shown = e.to_string();
        e.pin_family(Some(family)).unwrap_or_else(|message| {
            cli_command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("-{}: '{shown}': {message}", family.digit()),
                )
                .exit()
        })
    };
    match invocation {
        Invocation::Pipe(cfg) => Invocation::Pipe(PipeConfig {
            src: pin(cfg.src),
            dst: pin(cfg.dst),
            ..cfg
        }),
        Invocation::Tee(cfg) => Invocation::Tee(TeeConfig {
            src: pin(cfg.src),
            sinks: cfg.sinks.into_iter().map(pin).collect(),
            ..cfg
        }),
        Invocation::Relay(cfg, tuning) => Invocation::Relay(
            RelayConfig {
                a: pin(cfg.a),
                b: pin(cfg.b),
                ..cfg
            },
            tuning,
        ),
        other => other,
    }
}

/// `copy SRC... DST`: a copy of files, or a pipe when its one source or its destination is
/// not a plain file path.
fn copy_invocation(mut args: CopyArgs) -> Invocation {
    if args.symbolic_link || args.link {
        cli_command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "{}: symbolic/hard link copies are not supported; use ln{}",
                    if args.symbolic_link { "-s" } else { "-l" },
                    if args.symbolic_link { " -s" } else { "" }
                ),
            )
            .exit();
    }
    // cp's rule: a clone keeps the source's extents, holes included, as they are, so it
    // cannot also make holes (--sparse=always) or fill them (--sparse=never).
    if matches!(args.reflink, ReflinkArg::Always) && !matches!(args.sparse, SparseArg::Auto) {
        cli_command()
            .error(
                clap::error::ErrorKind::ArgumentConflict,
                "--reflink=always can be used only with --sparse=auto (a clone keeps the \
                 source's holes as they are)",
            )
            .exit();
    }
    let dest = match args.target_directory.take() {
        Some(dir) => dir,
        None if args.paths.len() < 2 => cli_command()
            .error(
                clap::error::ErrorKind::TooFewValues,
                "copy needs SRC DST, SRC... DIR, or -t DIR SRC...",
            )
            .exit(),
        None => args.paths.pop().expect("two paths at least"),
    };
    for source in &args.paths {
        if let Err(message) = check_source(&source.to_string(), source) {
            cli_command()
                .error(clap::error::ErrorKind::ValueValidation, message)
                .exit();
        }
    }
    let policy = args.resume_http.policy(args.idle_timeout);
    args.paths = std::mem::take(&mut args.paths)
        .into_iter()
        .map(|e| with_resume(e, policy))
        .collect();
    // One stream, or a file with options: what `pipe` does (the help says so).
    let plain = |e: &Endpoint| e.plain_file().is_some();
    // An object into a file by ranged GETs (`-j N`), or continuing a partial file
    // (`--resume`): copy's own (cmd/copy/ranged.rs). Anywhere else -j has no file to fill.
    // An object: an http(s) URL, or an s3:// key outside copy -r.
    let object = |e: &Endpoint| {
        matches!(e, Endpoint::Http { .. })
            || matches!(e, Endpoint::S3 { .. }) && !(args.recursive || args.archive)
    };
    if let [src] = &args.paths[..] {
        if object(src) && args.jobs.is_some() && !plain(&dest) {
            cli_command()
                .error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!(
                        "-j: ranged GETs fill a file at their offsets; '{dest}' is a stream \
                         (use pipe, or a file path)"
                    ),
                )
                .exit();
        }
    }
    let object_download = matches!(&args.paths[..], [src] if object(src))
        && plain(&dest)
        && (args.jobs.is_some() || args.resume);
    // `copy -r` of a tree of objects (`s3://BUCKET/PREFIX/`) is a copy, not one stream.
    let s3 = |e: &Endpoint| matches!(e, Endpoint::S3 { .. });
    let tree_of_objects =
        (args.recursive || args.archive) && (args.paths.iter().any(s3) || s3(&dest));
    // One object up: -j N is its multipart upload's parts in flight (parts= first).
    let mut dest = dest;
    if let (Endpoint::S3 { opts, .. }, Some(jobs), false) = (&mut dest, args.jobs, tree_of_objects)
    {
        opts.parts
            .get_or_insert(jobs.min(crate::endpoint::s3::MAX_PARTS_IN_FLIGHT));
    }
    let stream =
        |src: &Endpoint| !tree_of_objects && !object_download && (!plain(src) || !plain(&dest));
    if let [src] = &args.paths[..] {
        if stream(src) {
            refuse_file_options_on_a_stream(&args, src, &dest);
        }
        if stream(src) {
            return Invocation::Pipe(PipeConfig {
                src: src.clone(),
                dst: dest,
                grace: crate::cmd::relay::GRACE,
                idle_timeout: None,
                keep_open: false,
            });
        }
    }
    Invocation::Copy(CopyConfig {
        sources: args.paths,
        dest,
        recursive: args.recursive || args.archive,
        no_clobber: args.no_clobber,
        update: match args.update {
            None | Some(UpdateArg::All) => Update::All,
            Some(UpdateArg::None) => Update::None,
            Some(UpdateArg::Older) => Update::Older,
        },
        force: args.force,
        preserve: args.preserve || args.archive,
        reflink: match args.reflink {
            ReflinkArg::Auto => ReflinkMode::Auto,
            ReflinkArg::Always => ReflinkMode::Always,
            ReflinkArg::Never => ReflinkMode::Never,
        },
        sparse: match args.sparse {
            SparseArg::Auto => SparseMode::Auto,
            SparseArg::Always => SparseMode::Always,
            SparseArg::Never => SparseMode::Never,
        },
        resume: args.resume,
        special: args.special,
        sync: args.sync,
        verify: args.verify,
        atomic: args.atomic,
        debug: args.debug,
        jobs: args.jobs,
        no_target_directory: args.no_target_directory,
        parents: args.parents,
        interactive: args.interactive,
        dereference: if args.dereference {
            Dereference::Always
        } else if args.dereference_command_line {
            Dereference::CommandLine
        } else if args.no_dereference || args.recursive || args.archive {
            Dereference::Never
        } else {
            Dereference::Always
        },
        remove_destination: args.remove_destination,
    })
}

/// `copy`'s options for files (`--verify`, `--atomic`, `--sync`, `--update`, `--debug`)
/// cannot apply when the copy is a stream (it runs as `pipe`): a usage error naming the
/// option and what the endpoint is, rather than an option silently ignored.
fn refuse_file_options_on_a_stream(args: &CopyArgs, src: &Endpoint, dest: &Endpoint) {
    let plain = |e: &Endpoint| e.plain_file().is_some();
    let (side, e) = if plain(dest) {
        ("source", src)
    } else {
        ("destination", dest)
    };
    let kind = stream_kind(e, side == "source");
    let message = if args.verify {
        format!(
            "--verify: the {side} '{e}' is {kind}: it cannot be read back (copy --verify takes plain file paths)"
        )
    } else {
        let option = [
            (args.atomic, "--atomic"),
            (args.sync, "--sync"),
            (args.update.is_some(), "--update"),
            (args.debug, "--debug"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name));
        let Some(option) = option else {
            return;
        };
        format!("{option}: the {side} '{e}' is {kind}: {option} applies to plain file paths only")
    };
    cli_command()
        .error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit();
}

/// What a non-plain endpoint is, in a message's words.
fn stream_kind(e: &Endpoint, source: bool) -> &'static str {
    match e {
        Endpoint::Stdio if source => "stdin",
        Endpoint::Stdio => "stdout",
        Endpoint::Fd(_) => "an inherited fd",
        Endpoint::FdTls { .. } => "an inherited TLS listener",
        Endpoint::File { .. } => "a file with options (written as a stream)",
        Endpoint::Tcp { .. } | Endpoint::TcpListen { .. } => "a TCP socket",
        Endpoint::Unix { .. } | Endpoint::UnixListen { .. } => "a unix socket",
        Endpoint::Systemd { .. } => "a socket passed by systemd",
        Endpoint::Udp { .. } | Endpoint::UdpListen { .. } => "a UDP socket",
        Endpoint::Command(_) => "a command's pipe",
        Endpoint::S3 { .. } => "an S3 object",
        Endpoint::Http { .. } => "an HTTP exchange (a stream)",
        Endpoint::Pty { .. } => "a pseudo-terminal",
        Endpoint::Terminal { on, .. } => stream_kind(on, source),
    }
}

/// The completion script for `shell`, generated from the clap definition.
/// bash offers the scheme words beside its file names (they go into the word list, and an
/// empty match falls back to files); zsh's generator would offer the words only, so it keeps
/// its file completion; fish, elvish and powershell's generators skip positionals.
pub fn completions(shell: clap_complete::Shell) -> String {
    let mut cmd = cli_command();
    if shell == clap_complete::Shell::Zsh {
        cmd = without_scheme_words(cmd);
    }
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "zerocat", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// `cmd` with its endpoints' value parsers offering no words: completed as files.
fn without_scheme_words(cmd: clap::Command) -> clap::Command {
    let mut cmd = cmd;
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|sub| sub.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, |mut sub| {
            let ids: Vec<String> = sub
                .get_positionals()
                .filter(|a| offers_scheme_words(a))
                .map(|a| a.get_id().to_string())
                .collect();
            for id in ids {
                sub = sub.mut_arg(id, |a| {
                    a.value_parser(clap::builder::OsStringValueParser::new())
                });
            }
            sub
        });
    }
    cmd
}

/// Whether `arg` is an endpoint whose completions offer the scheme words.
fn offers_scheme_words(arg: &clap::Arg) -> bool {
    let values = arg.get_value_parser().possible_values();
    values.is_some_and(|mut v| v.any(|pv| pv.get_name() == scheme_prefixes()[0]))
}

/// The man page (roff), generated from the clap definition plus hand-written sections.
pub fn man_page() -> String {
    crate::cli::man::page(cli_command())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        cli_command().debug_assert();
    }

    #[test]
    fn via_accepts_dashes_and_underscores() {
        assert_eq!(
            parse_via("copy-file-range"),
            Ok(Via::Forced(DataPath::CopyFileRange))
        );
        assert_eq!(
            parse_via("copy_file_range"),
            Ok(Via::Forced(DataPath::CopyFileRange))
        );
        assert_eq!(parse_via("AUTO"), Ok(Via::Auto));
        assert!(parse_via("carrier-pigeon").is_err());
    }

    fn tee_policy(args: &[&str]) -> OnError {
        let argv = ["zerocat", "tee"].iter().chain(args).chain(&["in", "out"]);
        match Cli::try_parse_from(argv).unwrap().into_invocation().1 {
            Invocation::Tee(cfg) => cfg.on_error,
            _ => unreachable!("tee parses as tee"),
        }
    }

    #[test]
    fn tee_error_modes_as_gnu_spells_them_and_the_old_alias() {
        assert_eq!(tee_policy(&[]), OnError::Fail);
        assert_eq!(tee_policy(&["--on-error=fail"]), OnError::Fail);
        assert_eq!(tee_policy(&["--on-error=continue"]), OnError::Warn);
        assert_eq!(tee_policy(&["--output-error"]), OnError::WarnNoPipe);
        assert_eq!(tee_policy(&["-p"]), OnError::WarnNoPipe);
        assert_eq!(tee_policy(&["--output-error=warn"]), OnError::Warn);
        assert_eq!(
            tee_policy(&["--output-error=warn-nopipe"]),
            OnError::WarnNoPipe
        );
        assert_eq!(tee_policy(&["--output-error=exit"]), OnError::Exit);
        assert_eq!(
            tee_policy(&["--output-error=exit-nopipe"]),
            OnError::ExitNoPipe
        );
        // The last one given wins, as with GNU's options.
        assert_eq!(tee_policy(&["-p", "--on-error=fail"]), OnError::Fail);
        assert_eq!(tee_policy(&["--on-error=fail", "-p"]), OnError::WarnNoPipe);
        assert!(Cli::try_parse_from(["zerocat", "tee", "--output-error=bogus", "a", "b"]).is_err());
    }
}

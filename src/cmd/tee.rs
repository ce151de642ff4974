//! `zerocat tee SRC DST [DST...]`: every sink receives every byte of SRC, in order, along
//! the kernel fan-out (splice in, tee(2) out) or the userspace one.

use std::os::fd::AsFd;
use std::time::Instant;

use anyhow::anyhow;
use nix::errno::Errno;

use super::common::{
    child_failure, describe, failure_message, finish_datagram_sink, finish_dump, finish_http,
    finish_socket_sink, idle_outcome, inspect, next_client, predict, reap_child, refuse_same_file,
    refused_by_listeners, remaining, start_dump, stdout_gone, tap_stream, truncate_if_pending,
    IdleWatch, Quiet,
};
use crate::endpoint::http::HttpEnd;
use crate::endpoint::proxy::Addresses;
use crate::endpoint::s3::Transfer;
use crate::endpoint::{Endpoint, Opened, Role};
use crate::engine::fanout::{self as fan, FanOut, OnError, Sink, SinkOutcome};
use crate::engine::{DataPath, Failure, Via};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::progress::{self, Watch};
use crate::report::HttpInfo;
use crate::report::{sinks_word, Ending, FanOutReport, Named, SinkReport};
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::process::ChildExit;

#[derive(Debug, Clone)]
pub struct TeeConfig {
    pub src: Endpoint,
    /// At least one.
    pub sinks: Vec<Endpoint>,
    pub on_error: OnError,
    /// An `exec:`/`sh:` child of an interrupted run gets this long after SIGTERM, then
    /// SIGKILL.
    pub grace: std::time::Duration,
    /// `-i`: SIGINT is ignored (GNU tee's --ignore-interrupts).
    pub ignore_interrupts: bool,
    /// `--idle-timeout`: the run ends once no byte moved for this long.
    pub idle_timeout: Option<std::time::Duration>,
    /// A failed output is said as GNU tee says it (`tee: FILE: No such file or
    /// directory`): zerocat answering to the name `tee`.
    pub gnu_words: bool,
    /// `--keep-open`: the source is a listener whose connections go to every sink one after
    /// another, until a signal.
    pub keep_open: bool,
}

pub fn run(opts: &Options, cfg: &TeeConfig) -> anyhow::Result<ExitCode> {
    refuse_gnu_form(cfg)?;
    check_via(opts.via)?;
    if cfg.ignore_interrupts {
        crate::sys::process::ignore_interrupts();
    }
    if opts.explain {
        return explain(opts, cfg);
    }
    // Before any endpoint opens: a dump that cannot be written fails the run now.
    let dump = start_dump(opts)?;
    if cfg.keep_open {
        return keep_open(opts, cfg, dump);
    }
    // Bind every listening sink first, so each is announced before any accept blocks.
    let listeners = cfg
        .sinks
        .iter()
        .map(|s| s.is_listener().then(|| s.listen()).transpose())
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (mut src, origin) = cfg.src.open_carrying(Role::Source, &Addresses::Unknown)?;
    // A command sink is told the source socket's addresses (`ZEROCAT_PEER_ADDR`...).
    let sink_env = cfg
        .src
        .names_a_peer()
        .then(|| super::common::peer_env(&cfg.src, &src, &origin));
    let src_s3 = src.s3.take();
    let src_http = src.http.take();
    let src_info = inspect(src.fd.as_fd(), &cfg.src)?;
    // A sink that cannot be opened is a failed sink like any other (GNU tee: said, the
    // others still get every byte, exit 1), in every --output-error mode.
    let mut opened = Vec::with_capacity(cfg.sinks.len());
    // `s3://` ends: checked (a GET) or completed or aborted (an upload) once closed.
    let mut sink_s3: Vec<Option<Transfer>> = (0..cfg.sinks.len()).map(|_| None).collect();
    // `http(s)://` sinks: an upload answered, or cut, once closed.
    let mut sink_http: Vec<Option<HttpEnd>> = (0..cfg.sinks.len()).map(|_| None).collect();
    let mut unopened = Vec::new();
    for (i, (sink, listener)) in cfg.sinks.iter().zip(listeners).enumerate() {
        let sink_fd = match listener {
            Some(listener) => Opened::accept(&listener)?.0.for_role(Role::Sink),
            None => match sink
                .open_carrying_for(Role::Sink, &Addresses::Unknown, sink_env.as_ref())
                .map(|(opened, _)| opened)
            {
                Ok(opened) => opened,
                Err(e) if must_stop(&e) => return Err(e),
                Err(e) => {
                    let errno = e.chain().find_map(errno_in);
                    let message = format!("{e:#}");
                    // GNU tee says it at once, whatever follows (a reader that goes away
                    // ends the run quietly, check 126 of its tee.sh).
                    let said = cfg.on_error == OnError::Gnu;
                    let error = SinkError {
                        sink: i,
                        message,
                        errno,
                        counts: true,
                        stops: false,
                        said,
                    };
                    // GNU tee's `exit` modes end the run at an output that cannot be
                    // opened, before any byte and before the outputs after it (coreutils
                    // 9.1, seen). zerocat's own tee keeps issue 28's rule (that output
                    // fails alone); answering as `tee`, it does as GNU's does.
                    let exits = cfg.gnu_words
                        && matches!(cfg.on_error, OnError::Exit | OnError::ExitNoPipe);
                    if said || exits {
                        error.say(cfg);
                    }
                    if exits {
                        return Ok(ExitCode::Failure);
                    }
                    unopened.push(error);
                    continue;
                }
            },
        };
        let mut sink_fd = sink_fd;
        sink_s3[i] = sink_fd.s3.take();
        sink_http[i] = sink_fd.http.take();
        let info = inspect(sink_fd.fd.as_fd(), sink)?;
        refuse_same_file(&cfg.src, &src_info, sink, &info)?;
        opened.push((i, sink_fd, info));
    }
    for (i, sink_fd, _) in &opened {
        truncate_if_pending(sink_fd, &cfg.sinks[*i])?;
    }
    let mut ends: Vec<(&Endpoint, &Opened)> = vec![(&cfg.src, &src)];
    ends.extend(opened.iter().map(|(i, o, _)| (&cfg.sinks[*i], o)));
    let refused = refused_by_listeners(&ends);
    let sinks: Vec<Sink<'_>> = opened
        .iter()
        .map(|(_, o, info)| Sink {
            fd: o.fd.as_fd(),
            info: *info,
        })
        .collect();
    // Every sink's kind, as opened, or as it would have been for one that was not.
    let mut infos: Vec<FdInfo> = cfg
        .sinks
        .iter()
        .map(|s| predict(s, Role::Sink).unwrap_or(FdInfo::assumed(FdKind::Other)))
        .collect();
    for (i, _, info) in &opened {
        infos[*i] = *info;
    }
    opts.print_plan(
        &(plan_line(opts.via, cfg, &src_info, &infos)
            + &crate::engine::meter::plan_words(opts.limit)),
    );

    // Counts what every sink got (the slowest one), less what still sits in sink pipes.
    let meter = progress::meter(opts);
    let mut watch =
        Watch::new(&meter).total(opts.size.or_else(|| remaining(src.fd.as_fd(), &src_info)));
    for sink in sinks.iter().filter(|s| s.info.kind == FdKind::Pipe) {
        watch = watch.sink_pipe(sink.fd);
    }
    let progress = watch.start(opts);
    let started = Instant::now();
    // An http(s) body's quiet is a cut its pump resumes (endpoint/http/resume.rs).
    let idle = cfg
        .idle_timeout
        .filter(|_| !sinks.is_empty() && !cfg.src.pumps_a_body())
        .map(|idle| IdleWatch::start(meter.clone(), idle, src.fd.as_fd()));
    let mut out = if sinks.is_empty() {
        // Not one sink opened: nothing to read the source for.
        FanOut {
            record: Default::default(),
            sinks: Vec::new(),
            failure: None,
        }
    } else {
        // The source's stream is one in the dump (to no one address: there are many sinks).
        let tapped = tap_stream(dump.as_ref(), src.fd.as_fd(), None);
        let out = fan::fan_out(
            src.fd.as_fd(),
            &src_info,
            &sinks,
            opts.via,
            cfg.on_error,
            &meter,
            tapped.as_ref(),
        );
        if let Some(tapped) = &tapped {
            match out.failure {
                None => tapped.borrow_mut().end(),
                Some(_) => tapped.borrow_mut().settle(),
            }
        }
        out
    };
    let timed_out = idle.map_or(Quiet::No, IdleWatch::stop);
    let (failure, idle_ending) = idle_outcome(out.failure.take(), timed_out, cfg.idle_timeout);
    out.failure = failure;
    if idle_ending.is_some() {
        // Stopped by the quiet, every byte taken delivered: no sink was cut.
        for result in &mut out.sinks {
            if matches!(result.failure, Some(Failure::Interrupted)) {
                result.failure = None;
            }
        }
    }
    let http_sinks: Vec<bool> = opened
        .iter()
        .map(|(i, _, _)| sink_http[*i].is_some())
        .collect();
    for ((sink, result), http) in sinks.iter().zip(&out.sinks).zip(&http_sinks) {
        // An upload's connection stays open for the server's answer.
        if result.failure.is_none() && sink.info.kind == FdKind::Socket && !http {
            finish_socket_sink(sink.fd);
        }
        if result.failure.is_none() && sink.info.kind == FdKind::Datagram {
            finish_datagram_sink(sink.fd);
        }
    }
    let seconds = (started.elapsed().as_secs_f64(), meter.moving_seconds());
    progress.finish();
    // After the transfer's time: the dump's writer may still be formatting.
    let dump = finish_dump(opts, dump);
    // Every end closes (a sink child sees EOF, a source child SIGPIPE), then the children
    // are waited for: an interrupted one gets SIGTERM, then SIGKILL after --grace.
    drop(sinks);
    let stopping = matches!(out.failure, Some(Failure::Interrupted));
    // An upload whose sink failed, or whose source did not end well, is cut (never
    // completed short).
    for ((i, _, _), result) in opened.iter().zip(&out.sinks) {
        if let Some(end) = &sink_http[*i] {
            if out.failure.is_some() || result.failure.is_some() {
                end.cut();
            }
        }
    }
    let src_child = reap_child(&cfg.src, src, cfg.grace, stopping)?;
    let mut children = vec![None; cfg.sinks.len()];
    for (i, opened, _) in opened {
        children[i] = reap_child(&cfg.sinks[i], opened, cfg.grace, stopping)?;
    }
    // One outcome per sink given, in order: an unopened sink moved nothing.
    for e in &unopened {
        out.sinks.insert(
            e.sink,
            SinkOutcome {
                record: Default::default(),
                failure: None,
            },
        );
    }
    // The fds are closed: an S3 source checks its length; an S3 sink completes its upload
    // only when the source ended well and the sink itself did not fail, else aborts.
    let src_whole = out.failure.is_none() && child_failure(&cfg.src, src_child).is_none();
    let (src_requests, src_s3_failure) = src_s3
        .map(|t| t.finish(out.record.bytes(), src_whole))
        .unwrap_or_default();
    let (src_http, src_http_failure) = finish_http(src_http);
    let src_s3_failure = src_http_failure.or(src_s3_failure);
    let src_whole = src_whole && src_s3_failure.is_none();
    let mut s3_failures = vec![None; cfg.sinks.len()];
    let mut requests = vec![Vec::new(); cfg.sinks.len()];
    for (i, transfer) in sink_s3.into_iter().enumerate() {
        let Some(transfer) = transfer else { continue };
        let result = &out.sinks[i];
        let whole = src_whole && result.failure.is_none();
        let (made, failure) = transfer.finish(result.record.bytes(), whole);
        requests[i] = made;
        s3_failures[i] = failure.map(|f| format!("{}: {f}", cfg.sinks[i]));
    }
    let mut sinks_http = vec![None; cfg.sinks.len()];
    for (i, end) in sink_http.into_iter().enumerate() {
        let (info, failure) = finish_http(end);
        sinks_http[i] = info;
        if failure.is_some() {
            s3_failures[i] = failure;
        }
    }
    let ends = Ends {
        src_info: &src_info,
        infos: &infos,
        src_child,
        children,
        idle_ending,
        src_failure: src_s3_failure,
        src_requests,
        s3_failures,
        requests,
        src_http,
        sinks_http,
        refused,
        dump,
    };
    conclude(opts, cfg, &ends, out, unopened, seconds)
}

/// What the report says of each end: its kind, and the child of a command.
struct Ends<'a> {
    src_info: &'a FdInfo,
    infos: &'a [FdInfo],
    src_child: Option<ChildExit>,
    /// One per sink given.
    children: Vec<Option<ChildExit>>,
    /// `--idle-timeout` ended the run, every byte taken delivered.
    idle_ending: Option<Ending>,
    /// An `s3://` source whose object ended short.
    src_failure: Option<String>,
    src_requests: Vec<(&'static str, u64)>,
    /// One per sink given: an `s3://` sink's upload that failed, and its requests.
    s3_failures: Vec<Option<String>>,
    requests: Vec<Vec<(&'static str, u64)>>,
    /// `http(s)://` ends: the source's exchange, and one per sink given.
    src_http: Option<HttpInfo>,
    sinks_http: Vec<Option<HttpInfo>>,
    /// As [`crate::report::Report::refused`].
    refused: Option<u64>,
    /// `--dump`: what went into it.
    dump: Option<crate::engine::dump::DumpTotals>,
}

/// An error that ends the run wherever it comes from: a signal, or a usage error.
fn must_stop(e: &anyhow::Error) -> bool {
    e.downcast_ref::<crate::exit::Interrupted>().is_some()
        || e.downcast_ref::<UsageError>().is_some()
}

/// tee moves bytes with tee(2) and splice, or in userspace; nothing else fans out.
/// `printf x | zerocat tee t1 t2` is GNU tee's habit: it means "stdin into t1 and t2", but
/// zerocat's first operand is the source, so it would read t1 and overwrite t2 while the
/// piped bytes go nowhere. When stdin is a pipe or a file and the source is a file, that
/// is refused with the spelling that does what GNU tee does.
fn refuse_gnu_form(cfg: &TeeConfig) -> anyhow::Result<()> {
    let Endpoint::File { .. } = &cfg.src else {
        return Ok(());
    };
    let stdin_kind = FdInfo::of(std::io::stdin().as_fd()).map(|info| info.kind);
    if !matches!(stdin_kind, Ok(FdKind::Pipe | FdKind::File)) {
        return Ok(());
    }
    let operand = |e: &Endpoint| {
        e.plain_file()
            .map_or_else(|| e.to_string(), |p| p.display().to_string())
    };
    let sinks: Vec<String> = std::iter::once(&cfg.src)
        .chain(&cfg.sinks)
        .map(operand)
        .collect();
    let stdin_word = if matches!(stdin_kind, Ok(FdKind::Pipe)) {
        "pipe"
    } else {
        "file"
    };
    Err(UsageError(format!(
        "tee: the first operand '{src}' is the source, yet stdin is a {stdin_word}: zerocat \
         would read '{src}' and ignore stdin. For GNU tee's meaning (stdin into each file \
         and stdout) write: zerocat tee - {} -",
        sinks.join(" "),
        src = operand(&cfg.src),
    ))
    .into())
}

fn check_via(via: Via) -> anyhow::Result<()> {
    match via {
        Via::Auto | Via::Forced(DataPath::Tee | DataPath::Splice | DataPath::Userspace) => Ok(()),
        Via::Forced(path) => Err(UsageError(format!(
            "--via {path}: tee fans out with tee (or splice, the same kernel path) or userspace"
        ))
        .into()),
    }
}

/// Turns what the fan-out did into the report and the exit code.
fn conclude(
    opts: &Options,
    cfg: &TeeConfig,
    ends: &Ends<'_>,
    out: FanOut,
    unopened: Vec<SinkError>,
    seconds: (f64, Option<f64>),
) -> anyhow::Result<ExitCode> {
    let policy = cfg.on_error;
    // Every sink that failed, with its text and whether it fails the run (a reader that
    // went away under a `*-nopipe` mode does not, and is not diagnosed: GNU tee's rule),
    // those that could not be opened first.
    let mut sink_errors = unopened;
    sink_errors.extend(
        out.sinks
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match &s.failure {
                Some(Failure::Io(err, side)) => Some(SinkError {
                    sink: i,
                    message: failure_message(opts.via, &cfg.src, &cfg.sinks[i], err, *side),
                    errno: Some(errno_of(err)),
                    counts: policy.counts(errno_of(err)),
                    stops: policy.stops(errno_of(err)),
                    said: false,
                }),
                _ => None,
            }),
    );
    // A sink command that exited non-zero or died by a signal failed, as its writes would;
    // so did an S3 sink whose upload failed (its message explains an EPIPE said above).
    for (i, child) in ends.children.iter().enumerate() {
        let Some(message) = child_failure(&cfg.sinks[i], *child).or(ends.s3_failures[i].clone())
        else {
            continue;
        };
        if let Some(known) = sink_errors.iter_mut().find(|e| e.sink == i) {
            // The uploader's failure is why its pipe refused the bytes (EPIPE).
            if let Some(s3) = &ends.s3_failures[i] {
                known.message = s3.clone();
            }
        } else {
            sink_errors.push(SinkError {
                sink: i,
                message,
                errno: None,
                counts: true,
                stops: false,
                said: false,
            });
        }
    }
    let counted: Vec<&str> = sink_errors
        .iter()
        .filter(|e| e.counts)
        .map(|e| e.message.as_str())
        .collect();
    let (ending, code) = match &out.failure {
        None if counted.is_empty() => (
            ends.idle_ending.clone().unwrap_or(Ending::Eof),
            ExitCode::Success,
        ),
        None => {
            let message = if matches!(policy, OnError::Warn | OnError::WarnNoPipe) {
                format!(
                    "{} of {} sinks failed: {}",
                    counted.len(),
                    cfg.sinks.len(),
                    counted.join("; ")
                )
            } else {
                counted.join("; ")
            };
            (Ending::Error(message), ExitCode::Failure)
        }
        Some(Failure::Interrupted) => (Ending::Signal, ExitCode::Interrupted),
        Some(Failure::Io(err, side)) => (
            Ending::Error(failure_message(
                opts.via,
                &cfg.src,
                &cfg.sinks[0],
                err,
                *side,
            )),
            ExitCode::Failure,
        ),
    };
    // The source's command failed though every byte it gave was fanned out: the run fails.
    let (ending, code) = match child_failure(&cfg.src, ends.src_child).or(ends.src_failure.clone())
    {
        Some(message) if ending == Ending::Eof => (Ending::Error(message), ExitCode::Failure),
        _ => (ending, code),
    };
    // No failure stopped the fan-out: the sinks still running got every byte.
    let survivors_whole = out.failure.is_none() && !sink_errors.iter().any(|e| e.stops);
    let report = FanOutReport {
        src: Named {
            child: ends.src_child,
            requests: ends.src_requests.clone(),
            http: ends.src_http.clone(),
            ..Named::of(cfg.src.to_string(), ends.src_info)
        },
        sinks: cfg
            .sinks
            .iter()
            .zip(ends.infos)
            .zip(&out.sinks)
            .enumerate()
            .map(|(i, ((uri, info), result))| SinkReport {
                named: Named {
                    child: ends.children[i],
                    requests: ends.requests[i].clone(),
                    http: ends.sinks_http[i].clone(),
                    ..Named::of(uri.to_string(), info)
                },
                ending: sink_ending(i, &sink_errors, &ending, survivors_whole),
                record: result.record.clone(),
                failed_itself: sink_errors.iter().any(|e| e.sink == i),
            })
            .collect(),
        record: out.record,
        seconds: seconds.0,
        moving_seconds: seconds.1,
        ending: ending.clone(),
        connections: None,
        refused: ends.refused,
        dump: ends.dump.clone(),
    };
    // stdout's reader went away and stopped the run: the shell's 141, without a message
    // (DESIGN §5), like `pipe` and like GNU tee killed by SIGPIPE. GNU's `exit` mode says
    // so and exits 1 instead; the other modes go on without that sink.
    let reader_left = policy == OnError::Fail
        && out.failure.is_none()
        && sink_errors.len() == 1
        && stdout_went_away(
            &cfg.sinks[sink_errors[0].sink],
            &out.sinks[sink_errors[0].sink],
        );
    // --on-error=gnu: any reader that went away ends the run as SIGPIPE ends GNU tee.
    let sigpipe = policy == OnError::Gnu
        && out.sinks.iter().any(
            |s| matches!(&s.failure, Some(Failure::Io(err, _)) if errno_of(err) == Errno::EPIPE),
        );
    if sigpipe {
        // Each failed output was said before SIGPIPE ended GNU tee.
        for e in sink_errors.iter().filter(|e| e.counts && !e.said) {
            e.say(cfg);
        }
    }
    if reader_left || sigpipe {
        return Ok(ExitCode::BrokenPipe);
    }
    opts.print_report(&report.render(opts.stats));
    match ending {
        // GNU tee: one line per output that failed, not one line for all of them.
        Ending::Error(_)
            if policy == OnError::Gnu
                && out.failure.is_none()
                && sink_errors.iter().any(|e| e.counts) =>
        {
            for e in sink_errors.iter().filter(|e| e.counts && !e.said) {
                e.say(cfg);
            }
            Ok(code)
        }
        Ending::Error(message) => Err(anyhow!(message)),
        _ => Ok(code),
    }
}

/// One sink's failure, as the report and the exit code see it.
struct SinkError {
    sink: usize,
    message: String,
    /// The errno behind it, when one is (GNU's line is the file and its strerror).
    errno: Option<Errno>,
    /// It fails the run (exit 1, diagnosed).
    counts: bool,
    /// It stopped the whole fan-out.
    stops: bool,
    /// Its line was printed when it happened.
    said: bool,
}

impl SinkError {
    /// Its line on stderr, as the run's own error is printed; as GNU tee prints it
    /// (`tee: FILE: Is a directory`) under `gnu_words`.
    fn say(&self, cfg: &TeeConfig) {
        let sink = &cfg.sinks[self.sink];
        match (cfg.gnu_words, self.errno, sink.plain_file()) {
            (true, Some(errno), Some(path)) => {
                eprintln!("tee: {}: {}", path.display(), errno.desc())
            }
            (true, Some(errno), None) if matches!(sink, Endpoint::Stdio) => {
                eprintln!("tee: 'standard output': {}", errno.desc())
            }
            (true, _, _) => eprintln!("tee: {}", self.message),
            (false, _, _) => eprintln!("zerocat: {}", crate::report::errno_names(&self.message)),
        }
    }
}

/// The errno an error in an open's chain of causes carries.
fn errno_in(cause: &(dyn std::error::Error + 'static)) -> Option<Errno> {
    if let Some(errno) = cause.downcast_ref::<Errno>() {
        return Some(*errno);
    }
    let err = cause.downcast_ref::<std::io::Error>()?;
    match err.raw_os_error() {
        Some(raw) => Some(Errno::from_raw(raw)),
        None if err.kind() == std::io::ErrorKind::IsADirectory => Some(Errno::EISDIR),
        None => None,
    }
}

fn errno_of(err: &std::io::Error) -> Errno {
    Errno::from_raw(err.raw_os_error().unwrap_or(0))
}

/// How sink `i` ended: its own error, or how the run ended. When no failure stopped the
/// fan-out and the source was healthy, a surviving sink got every byte even though the
/// run failed.
fn sink_ending(i: usize, errors: &[SinkError], run: &Ending, survivors_whole: bool) -> Ending {
    if let Some(e) = errors.iter().find(|e| e.sink == i) {
        return Ending::Error(e.message.clone());
    }
    match run {
        Ending::Error(_) if survivors_whole => Ending::Eof,
        Ending::Error(message) => Ending::Error(format!("stopped: {message}")),
        other => other.clone(),
    }
}

fn stdout_went_away(sink: &Endpoint, result: &SinkOutcome) -> bool {
    matches!(&result.failure, Some(Failure::Io(err, side)) if stdout_gone(sink, err, *side))
}

/// `--explain`: the plan from what the endpoints are, opening nothing.
fn explain(opts: &Options, cfg: &TeeConfig) -> anyhow::Result<ExitCode> {
    let src_info = predict(&cfg.src, Role::Source)?;
    let infos = cfg
        .sinks
        .iter()
        .map(|s| predict(s, Role::Sink))
        .collect::<anyhow::Result<Vec<_>>>()?;
    opts.print_plan(&plan_line(opts.via, cfg, &src_info, &infos));
    Ok(ExitCode::Success)
}

/// "plan: in.bin (file) -> 2 sinks: out (file) via tee + splice; - (pipe) via tee"
fn plan_line(via: Via, cfg: &TeeConfig, src: &FdInfo, sinks: &[FdInfo]) -> String {
    let kinds: Vec<FdKind> = sinks.iter().map(|i| i.kind).collect();
    let words = match via {
        Via::Forced(DataPath::Userspace) => vec!["userspace"; sinks.len()],
        _ => fan::lane_words(&kinds),
    };
    let lanes: Vec<String> = cfg
        .sinks
        .iter()
        .zip(sinks)
        .zip(words)
        .map(|((uri, info), word)| format!("{uri} ({}) via {word}", describe(info)))
        .collect();
    let fallback = match via {
        Via::Auto => ", userspace fan-out if the kernel refuses",
        _ => "",
    };
    format!(
        "plan: {} ({}) -> {}{fallback}: {}",
        cfg.src,
        describe(src),
        sinks_word(sinks.len()),
        lanes.join("; ")
    )
}

/// `--keep-open` (nc -lk into tee): the sinks opened once (a sink that cannot be opened ends
/// the run before any accept), then the listener's connections one after another, each
/// fanned out whole to every sink still writing before the next is accepted (the others wait
/// in the backlog), so no two interleave in any sink; until SIGINT/SIGTERM (exit 130, every
/// connection's bytes delivered). A sink that fails is left out of the connections after,
/// as --on-error says of one run: a mode where it stops the fan-out ends the run (exit 1),
/// as does losing the last sink. A connection cut by its client is counted, its bytes kept.
/// Under `--dump`, each connection is a stream of its own in the dump (as pipe's are).
fn keep_open(
    opts: &Options,
    cfg: &TeeConfig,
    dump: Option<crate::engine::dump::Dump>,
) -> anyhow::Result<ExitCode> {
    let listener = cfg.src.listen()?;
    let mut opened = Vec::with_capacity(cfg.sinks.len());
    for sink in &cfg.sinks {
        let one = match sink.is_listener() {
            true => Opened::accept(&sink.listen()?)?.0.for_role(Role::Sink),
            false => sink.open(Role::Sink)?,
        };
        let info = inspect(one.fd.as_fd(), sink)?;
        truncate_if_pending(&one, sink)?;
        opened.push((one, info));
    }
    let infos: Vec<FdInfo> = opened.iter().map(|(_, info)| *info).collect();
    let meter = progress::meter(opts);
    let progress = Watch::new(&meter).start(opts);
    let started = Instant::now();
    let n = cfg.sinks.len();
    let mut records = vec![crate::engine::Record::default(); n];
    // A sink's failure, and whether it fails the run (--on-error's `counts`).
    let mut errors: Vec<Option<(String, bool)>> = vec![None; n];
    let (mut total, mut connections, mut cut) = (crate::engine::Record::default(), 0u64, 0u64);
    // The source's refusals, and those of a listening sink before its one client.
    let mut refused: u64 = opened.iter().map(|(one, _)| one.refused).sum();
    let mut src_info = None;
    let mut plan_said = false;
    let ending = loop {
        if errors.iter().all(Option::is_some) {
            break Ending::Error("no sink left to write to".to_string());
        }
        let accepted = match next_client(&listener, &mut refused) {
            Ok(accepted) => accepted,
            Err(ending) => break ending,
        };
        let info = inspect(accepted.fd.as_fd(), &cfg.src)?;
        if !plan_said {
            plan_said = true;
            opts.print_plan(&plan_line(opts.via, cfg, &info, &infos));
        }
        let live: Vec<usize> = (0..n).filter(|&i| errors[i].is_none()).collect();
        let sinks: Vec<Sink<'_>> = live
            .iter()
            .map(|&i| Sink {
                fd: opened[i].0.fd.as_fd(),
                info: opened[i].1,
            })
            .collect();
        let tapped = tap_stream(dump.as_ref(), accepted.fd.as_fd(), None);
        let out = fan::fan_out(
            accepted.fd.as_fd(),
            &info,
            &sinks,
            opts.via,
            cfg.on_error,
            &meter,
            tapped.as_ref(),
        );
        if let Some(tapped) = &tapped {
            match out.failure {
                None => tapped.borrow_mut().end(),
                Some(_) => tapped.borrow_mut().settle(),
            }
        }
        total.merge(&out.record);
        connections += 1;
        src_info = Some(info);
        let mut stop = None;
        for (&i, result) in live.iter().zip(&out.sinks) {
            records[i].merge(&result.record);
            if let Some(Failure::Io(err, side)) = &result.failure {
                let message = failure_message(opts.via, &cfg.src, &cfg.sinks[i], err, *side);
                if cfg.on_error.stops(errno_of(err)) {
                    stop = Some(message.clone());
                }
                errors[i] = Some((message, cfg.on_error.counts(errno_of(err))));
            }
        }
        let tls_failure = match out.failure {
            None => super::common::finish_tls(&cfg.src, accepted.tls.map(|s| *s)).1,
            Some(_) => {
                if let Some(session) = &accepted.tls {
                    session.cut();
                }
                None
            }
        };
        match out.failure {
            None if tls_failure.is_some() => cut += 1,
            None => {}
            Some(Failure::Interrupted) => break Ending::Signal,
            Some(Failure::Io(_, crate::engine::Side::Source)) => cut += 1,
            Some(Failure::Io(err, side)) => {
                break Ending::Error(failure_message(
                    opts.via,
                    &cfg.src,
                    &cfg.sinks[0],
                    &err,
                    side,
                ))
            }
        }
        if let Some(message) = stop {
            break Ending::Error(message);
        }
    };
    progress.finish();
    for ((one, info), error) in opened.iter().zip(&errors) {
        if error.is_none() && info.kind == FdKind::Socket {
            finish_socket_sink(one.fd.as_fd());
        }
        if error.is_none() && info.kind == FdKind::Datagram {
            finish_datagram_sink(one.fd.as_fd());
        }
    }
    let stopping = ending == Ending::Signal;
    let mut children = Vec::with_capacity(n);
    for (i, (one, _)) in opened.into_iter().enumerate() {
        children.push(reap_child(&cfg.sinks[i], one, cfg.grace, stopping)?);
    }
    let failed: Vec<String> = errors
        .iter()
        .flatten()
        .filter(|(_, counts)| *counts)
        .map(|(message, _)| message.clone())
        .collect();
    let src_info = src_info.unwrap_or_else(|| FdInfo::assumed(FdKind::Socket));
    let report = FanOutReport {
        src: Named::of(cfg.src.to_string(), &src_info),
        sinks: cfg
            .sinks
            .iter()
            .zip(&infos)
            .enumerate()
            .map(|(i, (uri, info))| SinkReport {
                named: Named {
                    child: children[i],
                    ..Named::of(uri.to_string(), info)
                },
                ending: match &errors[i] {
                    Some((message, _)) => Ending::Error(message.clone()),
                    None => ending.clone(),
                },
                record: std::mem::take(&mut records[i]),
                failed_itself: errors[i].is_some(),
            })
            .collect(),
        record: total,
        seconds: started.elapsed().as_secs_f64(),
        moving_seconds: meter.moving_seconds(),
        ending: ending.clone(),
        connections: Some((connections, cut)),
        refused: Some(refused),
        dump: finish_dump(opts, dump),
    };
    opts.print_report(&report.render(opts.stats));
    match ending {
        Ending::Error(message) => Err(anyhow!(message)),
        // A sink failed on the way: said, and the run fails, as tee's without --keep-open.
        _ if !failed.is_empty() => Err(anyhow!(failed.join("; "))),
        Ending::Signal => Ok(ExitCode::Interrupted),
        _ => Ok(ExitCode::Success),
    }
}

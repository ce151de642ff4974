//! `zerocat pipe SRC DST`: one stream from SRC to DST along the cheapest path.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use anyhow::anyhow;

use super::common::{
    child_failure, describe, failure_message, finish_datagram_sink, finish_dump, finish_http,
    finish_socket_sink, finish_tls, idle_outcome, inspect, next_client, predict, reap_child,
    refuse_same_file, refused_by_listeners, remaining, say_socket_options, start_dump, stdout_gone,
    tap_stream, truncate_if_pending, IdleWatch, Quiet,
};
use crate::endpoint::proxy::Addresses;
use crate::endpoint::{Endpoint, Role};
use crate::engine::{self, DataPath, Ends, Failure};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::progress::{self, Watch};
use crate::report::{Ending, Named, Report};
use crate::sys::fdkind::{FdInfo, FdKind};
use crate::sys::pipe::{grow_pipe, OwnPipe};

#[derive(Debug, Clone)]
pub struct PipeConfig {
    pub src: Endpoint,
    pub dst: Endpoint,
    /// An `exec:`/`sh:` child of an interrupted run gets this long after SIGTERM, then
    /// SIGKILL.
    pub grace: Duration,
    /// A datagram source (`udp-listen:`, `udp:`) ends after this long without a datagram.
    pub idle_timeout: Option<Duration>,
    /// `--keep-open`: the source is a listener whose connections go into the sink one
    /// after another, until a signal.
    pub keep_open: bool,
}

pub fn run(opts: &Options, cfg: &PipeConfig) -> anyhow::Result<ExitCode> {
    if opts.explain {
        return explain(opts, cfg);
    }
    // Before any endpoint opens: a dump that cannot be written fails the run now.
    let dump = start_dump(opts)?;
    if cfg.keep_open {
        return keep_open(opts, cfg, dump);
    }
    // A command source whose sink is a socket starts once that socket is connected or
    // accepted, to be told its addresses (nc -e connects, then runs the program).
    let early_dst = match cfg.src.is_command() && cfg.dst.names_a_peer() {
        true => Some(cfg.dst.open_carrying(Role::Sink, &Addresses::Unknown)?),
        false => None,
    };
    let src_env = early_dst
        .as_ref()
        .map(|(dst, origin)| super::common::peer_env(&cfg.dst, dst, origin));
    // An accepted source's client goes on in the sink's PROXY header (`proxy=v1|v2`).
    let (mut src, origin) =
        cfg.src
            .open_carrying_for(Role::Source, &Addresses::Unknown, src_env.as_ref())?;
    let mut src_info = inspect(src.fd.as_fd(), &cfg.src)?;
    if src_info.kind == FdKind::Datagram {
        src_info.quiet_end = cfg.idle_timeout;
    }
    // An http(s) sink sends a regular file's size as Content-Length (the engine's sendfile
    // then goes straight into the connection); a stream goes chunked.
    let upload_len = (src_info.kind == FdKind::File)
        .then(|| remaining(src.fd.as_fd(), &src_info))
        .flatten();
    let (mut dst, _) = match early_dst {
        Some(dst) => dst,
        None => {
            let dst_env = (cfg.dst.is_command() && cfg.src.names_a_peer())
                .then(|| super::common::peer_env(&cfg.src, &src, &origin));
            cfg.dst.with_upload_len(upload_len).open_carrying_for(
                Role::Sink,
                &origin,
                dst_env.as_ref(),
            )?
        }
    };
    say_socket_options(opts, &[&cfg.src, &cfg.dst]);
    let refused = refused_by_listeners(&[(&cfg.src, &src), (&cfg.dst, &dst)]);
    let tls = [src.tls.take(), dst.tls.take()];
    let s3 = [src.s3.take(), dst.s3.take()];
    let http = [src.http.take(), dst.http.take()];
    let dst_info = inspect(dst.fd.as_fd(), &cfg.dst)?;
    refuse_same_file(&cfg.src, &src_info, &cfg.dst, &dst_info)?;
    let chain = chain_for(&src_info, &dst_info, opts)?;
    truncate_if_pending(&dst, &cfg.dst)?;

    let tapped = tap_stream(dump.as_ref(), src.fd.as_fd(), Some(dst.fd.as_fd()));
    let ends = Ends {
        src: src.fd.as_fd(),
        src_info,
        dst: dst.fd.as_fd(),
        dst_info,
        reserve: 0,
        tap: tapped.as_ref(),
    };
    let middle = prepare_splice(&ends, &chain);
    let mut plan = plan_line(
        cfg,
        describe_fd(&ends.src_info, ends.src),
        describe_fd(&ends.dst_info, ends.dst),
        &chain,
    );
    if let Some(pipe) = &middle {
        plan.push_str(&format!("; own pipe of {} bytes", pipe.size));
    }
    opts.print_plan(&(plan + &crate::engine::meter::plan_words(opts.limit)));

    let meter = progress::meter(opts);
    let mut watch =
        Watch::new(&meter).total(opts.size.or_else(|| remaining(ends.src, &ends.src_info)));
    if dst_info.kind == FdKind::Pipe {
        watch = watch.sink_pipe(ends.dst);
    }
    let progress = watch.start(opts);
    let started = Instant::now();
    // A datagram source ends on its own quiet (`quiet_end`); an http(s) body's quiet is a
    // cut its pump resumes (endpoint/http/resume.rs), never the end; any other is watched.
    let idle = cfg
        .idle_timeout
        .filter(|_| ends.src_info.kind != FdKind::Datagram && !cfg.src.pumps_a_body())
        .map(|idle| IdleWatch::start(meter.clone(), idle, ends.src));
    let (record, failure) = engine::transfer(&ends, &chain, middle.as_ref(), &meter);
    if let Some(tapped) = &tapped {
        match failure {
            None => tapped.borrow_mut().end(),
            Some(_) => tapped.borrow_mut().settle(),
        }
    }
    let timed_out = idle.map_or(Quiet::No, IdleWatch::stop);
    let (failure, idle_ending) = idle_outcome(failure, timed_out, cfg.idle_timeout);
    // An upload's connection stays open for the server's answer.
    if failure.is_none() && dst_info.kind == FdKind::Socket && http[1].is_none() {
        finish_socket_sink(ends.dst);
    }
    if failure.is_none() && dst_info.kind == FdKind::Datagram {
        finish_datagram_sink(ends.dst);
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
    // Our pipe ends close first (a sink child sees EOF, a source child SIGPIPE), then the
    // children are reaped.
    let interrupted = matches!(failure, Some(Failure::Interrupted));
    if failure.is_some() {
        // A cut stream: the TLS peer gets a reset, not a close_notify that says "complete".
        tls.iter().flatten().for_each(|session| session.cut());
        http.iter().flatten().for_each(|end| end.cut());
    }
    let [src_child, dst_child] = [
        reap_child(&cfg.src, src, cfg.grace, interrupted)?,
        reap_child(&cfg.dst, dst, cfg.grace, interrupted)?,
    ];
    let [src_tls, dst_tls] = tls;
    let (src_tls, src_tls_failure) = finish_tls(&cfg.src, src_tls);
    let (dst_tls, dst_tls_failure) = finish_tls(&cfg.dst, dst_tls);
    let [src_http, dst_http] = http;
    let (src_http, src_http_failure) = finish_http(src_http);
    let (dst_http, dst_http_failure) = finish_http(dst_http);
    // A TLS end's failure explains the EOF or EPIPE the engine met on its socketpair; an
    // http end's, the EOF of a body cut or refused.
    let tls_failure = src_http_failure
        .or(dst_http_failure)
        .or(src_tls_failure)
        .or(dst_tls_failure);
    let command_failure = child_failure(&cfg.src, src_child)
        .or_else(|| child_failure(&cfg.dst, dst_child))
        .or(tls_failure.clone());
    // The fds are closed: a GET checks its length; an upload completes only when the
    // stream was whole (no failure, no signal, no failed command or TLS source), else it
    // is aborted. An uploader's failure explains the EPIPE the engine met.
    let whole = failure.is_none() && command_failure.is_none();
    let [src_s3, dst_s3] = s3.map(|t| t.map(|t| t.finish(record.bytes(), whole)));
    let (src_requests, src_s3_failure) = src_s3.unwrap_or_default();
    let (dst_requests, dst_s3_failure) = dst_s3.unwrap_or_default();
    let s3_failure = src_s3_failure.or(dst_s3_failure);
    let tls_failure = tls_failure.or(s3_failure.clone());
    let command_failure = command_failure.or(s3_failure);
    // An upload's time is until the object is complete, not until the pipe took it.
    let seconds = if src_requests.is_empty() && dst_requests.is_empty() {
        seconds
    } else {
        started.elapsed().as_secs_f64()
    };

    // After the transfer's time: the dump's writer may still be formatting.
    let dump = finish_dump(opts, dump);
    let mut report = Report {
        command: "pipe",
        src: Named {
            child: src_child,
            tls: src_tls,
            requests: src_requests,
            http: src_http,
            ..Named::of(cfg.src.to_string(), &src_info)
        },
        dst: Named {
            child: dst_child,
            tls: dst_tls,
            requests: dst_requests,
            http: dst_http,
            ..Named::of(cfg.dst.to_string(), &dst_info)
        },
        record,
        seconds,
        moving_seconds: meter.moving_seconds(),
        ending: idle_ending.unwrap_or(Ending::Eof),
        connections: None,
        refused,
        dump,
    };
    let Some(failure) = failure else {
        if let Some(message) = command_failure {
            report.ending = Ending::Error(message.clone());
            opts.print_report(&report.render(opts.stats));
            return Err(anyhow!(message));
        }
        opts.print_report(&report.render(opts.stats));
        return Ok(ExitCode::Success);
    };
    match failure {
        Failure::Interrupted => {
            report.ending = Ending::Signal;
            opts.print_report(&report.render(opts.stats));
            Ok(ExitCode::Interrupted)
        }
        Failure::Io(err, side) => {
            if stdout_gone(&cfg.dst, &err, side) {
                return Ok(ExitCode::BrokenPipe);
            }
            let message = tls_failure
                .unwrap_or_else(|| failure_message(opts.via, &cfg.src, &cfg.dst, &err, side));
            report.ending = Ending::Error(message.clone());
            opts.print_report(&report.render(opts.stats));
            Err(anyhow!(message))
        }
    }
}

/// `--explain`: the plan from what the endpoints are, opening nothing.
fn explain(opts: &Options, cfg: &PipeConfig) -> anyhow::Result<ExitCode> {
    let src_info = predict(&cfg.src, Role::Source)?;
    let dst_info = predict(&cfg.dst, Role::Sink)?;
    let chain = chain_for(&src_info, &dst_info, opts)?;
    opts.print_plan(&plan_line(
        cfg,
        describe(&src_info),
        describe(&dst_info),
        &chain,
    ));
    Ok(ExitCode::Success)
}

/// The engine's chain for these fds; a forced `--via` they cannot take is a usage error.
/// Under `--dump`, the paths the dump can copy from ([`engine::dump::tappable`]).
fn chain_for(src: &FdInfo, dst: &FdInfo, opts: &Options) -> anyhow::Result<Vec<DataPath>> {
    let chain = engine::chain(src, dst, opts.via)
        .map_err(|e| anyhow::Error::from(UsageError(format!("--via: {e}"))))?;
    match opts.dump {
        Some(_) => Ok(engine::dump::tappable(chain)),
        None => Ok(chain),
    }
}

/// Splice goes faster through big pipes: grow the pipes on either side (ours to create
/// when neither side is one, or under `--dump` when the source is none: the dump tee(2)s
/// from the pipe the bytes leave). Best effort: the size granted is what `-v` reports.
fn prepare_splice(ends: &Ends<'_>, chain: &[DataPath]) -> Option<OwnPipe> {
    if !chain.contains(&DataPath::Splice) {
        return None;
    }
    let mut grew = false;
    for (fd, info) in [(ends.src, &ends.src_info), (ends.dst, &ends.dst_info)] {
        if info.kind == FdKind::Pipe {
            grow_pipe(fd);
            grew = true;
        }
    }
    let dumped_through_ours = ends.tap.is_some() && ends.src_info.kind != FdKind::Pipe;
    if grew && !dumped_through_ours {
        return None;
    }
    OwnPipe::new().ok()
}

/// "plan: in.bin (file, 4096 bytes) -> - (pipe) via splice -> userspace"
fn plan_line(cfg: &PipeConfig, src: String, dst: String, chain: &[DataPath]) -> String {
    format!(
        "plan: {} ({src}) -> {} ({dst}) via {}",
        cfg.src,
        cfg.dst,
        super::common::chain_words(chain)
    )
}

/// [`describe`], plus the size of a pipe.
fn describe_fd(info: &FdInfo, fd: BorrowedFd<'_>) -> String {
    let mut s = describe(info);
    if info.kind == FdKind::Pipe {
        if let Ok(size) = crate::sys::pipe::pipe_size(fd) {
            s.push_str(&format!(", pipe of {size} bytes"));
        }
    }
    s
}

/// Whether `path` fell back to the next one in `record` having moved no byte: the kernel
/// refused it for these fds. Userspace, the last, never falls back.
fn refused_before_a_byte(record: &engine::Record, path: DataPath) -> bool {
    let moved = record.paths.iter().any(|&(p, n)| p == path && n > 0);
    !moved
        && record
            .fallbacks
            .iter()
            .any(|f| f.from == path && f.to.is_some())
}

/// `--keep-open` (nc -lk, ncat -k): the sink opened once, then the listener's connections
/// one after another, each moved whole before the next is accepted (the others wait in the
/// backlog), so no two interleave; until SIGINT/SIGTERM (exit 130, every connection's bytes
/// delivered) or the sink fails. A connection cut by its client is counted, its bytes kept.
fn keep_open(
    opts: &Options,
    cfg: &PipeConfig,
    dump: Option<engine::dump::Dump>,
) -> anyhow::Result<ExitCode> {
    let listener = cfg.src.listen()?;
    let dst = cfg.dst.open(Role::Sink)?;
    let dst_info = inspect(dst.fd.as_fd(), &cfg.dst)?;
    truncate_if_pending(&dst, &cfg.dst)?;
    let meter = progress::meter(opts);
    let progress = Watch::new(&meter).start(opts);
    let started = Instant::now();
    let (mut total, mut connections, mut cut) = (engine::Record::default(), 0u64, 0u64);
    let mut refused = 0u64;
    let mut src_info: Option<FdInfo> = None;
    // What the first connection settled, kept for the next ones (a thousand short
    // connections each paid for them: bench/NOTEBOOK.md#keep-open-per-connection): the
    // chain, less each path the kernel refused before it moved a byte (the sink, or a
    // source of the same kind, refuses it again: an O_APPEND log refuses splice); our
    // pipe, empty whenever a transfer starts (OwnPipe's rule); the source's kind, the same
    // for every connection of one listener (inspected again where `,mptcp` may differ).
    let mut settled_chain: Option<Vec<DataPath>> = None;
    let mut own_pipe: Option<Option<OwnPipe>> = None;
    let ending = loop {
        let accepted = match next_client(&listener, &mut refused) {
            Ok(accepted) => accepted,
            Err(ending) => break ending,
        };
        let info = match src_info {
            Some(info) if info.mptcp.is_none() => info,
            _ => inspect(accepted.fd.as_fd(), &cfg.src)?,
        };
        let chain = match &mut settled_chain {
            Some(chain) => chain,
            None => {
                let planned = settled_chain.insert(chain_for(&info, &dst_info, opts)?);
                opts.print_plan(&plan_line(
                    cfg,
                    describe(&info),
                    describe(&dst_info),
                    planned,
                ));
                planned
            }
        };
        // Each connection is one in the dump, as the relay's are.
        let tapped = tap_stream(dump.as_ref(), accepted.fd.as_fd(), Some(dst.fd.as_fd()));
        let ends = Ends {
            src: accepted.fd.as_fd(),
            src_info: info,
            dst: dst.fd.as_fd(),
            dst_info,
            reserve: 0,
            tap: tapped.as_ref(),
        };
        let middle = own_pipe.get_or_insert_with(|| prepare_splice(&ends, chain));
        let (record, failure) = engine::transfer(&ends, chain, middle.as_ref(), &meter);
        chain.retain(|&path| !refused_before_a_byte(&record, path));
        if let Some(tapped) = &tapped {
            match failure {
                None => tapped.borrow_mut().end(),
                Some(_) => tapped.borrow_mut().settle(),
            }
        }
        total.merge(&record);
        connections += 1;
        src_info = Some(info);
        let tls_failure = match failure {
            None => finish_tls(&cfg.src, accepted.tls.map(|s| *s)).1,
            Some(_) => {
                if let Some(session) = &accepted.tls {
                    session.cut();
                }
                None
            }
        };
        match failure {
            None if tls_failure.is_none() => {}
            None => cut += 1,
            Some(Failure::Interrupted) => break Ending::Signal,
            Some(Failure::Io(_, engine::Side::Source)) => cut += 1,
            Some(Failure::Io(err, side)) => {
                if stdout_gone(&cfg.dst, &err, side) {
                    return Ok(ExitCode::BrokenPipe);
                }
                break Ending::Error(failure_message(opts.via, &cfg.src, &cfg.dst, &err, side));
            }
        }
    };
    progress.finish();
    let src_info = src_info.unwrap_or_else(|| FdInfo::assumed(FdKind::Socket));
    let report = Report {
        command: "pipe",
        src: Named::of(cfg.src.to_string(), &src_info),
        dst: Named::of(cfg.dst.to_string(), &dst_info),
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
        Ending::Signal => Ok(ExitCode::Interrupted),
        _ => Ok(ExitCode::Success),
    }
}

//! `zerocat pipe SRC DST`: one stream from SRC to DST along the cheapest path.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use nix::sys::socket::{shutdown, Shutdown};

use crate::endpoint::{Endpoint, Opened, Role};
use crate::engine::{self, DataPath, Ends, Failure, Side, Via};
use crate::exit::{ExitCode, UsageError};
use crate::options::Options;
use crate::progress::{self, Watch};
use crate::report::{Ending, Named, Report};
use crate::sys::fdkind::{FdInfo, FdKind};

#[derive(Debug, Clone)]
pub struct PipeConfig {
    pub src: Endpoint,
    pub dst: Endpoint,
}

pub fn run(opts: &Options, cfg: &PipeConfig) -> anyhow::Result<ExitCode> {
    if opts.explain {
        return explain(opts, cfg);
    }
    let src = cfg.src.open(Role::Source)?;
    let dst = cfg.dst.open(Role::Sink)?;
    let src_info =
        FdInfo::of(src.fd.as_fd()).with_context(|| format!("cannot inspect '{}'", cfg.src))?;
    let dst_info =
        FdInfo::of(dst.fd.as_fd()).with_context(|| format!("cannot inspect '{}'", cfg.dst))?;
    refuse_same_file(&cfg.src, &src_info, &cfg.dst, &dst_info)?;
    let chain = engine::chain(&src_info, &dst_info, opts.via)
        .map_err(|e| UsageError(format!("--via: {e}")))?;
    truncate_if_pending(&dst, &cfg.dst)?;

    let ends = Ends {
        src: src.fd.as_fd(),
        src_info,
        dst: dst.fd.as_fd(),
        dst_info,
    };
    let middle = prepare_splice(&ends, &chain)?;
    let plan = plan_line(cfg, &ends, &chain, middle.as_ref());
    opts.print_plan(&(plan + &crate::engine::meter::plan_words(opts.limit)));

    let meter = progress::meter(opts);
    let mut watch = Watch::new(&meter).total(opts.size.or_else(|| remaining(&ends)));
    if dst_info.kind == FdKind::Pipe {
        watch = watch.sink_pipe(ends.dst);
    }
    let progress = watch.start(opts);
    let started = Instant::now();
    let (record, failure) = engine::transfer(&ends, &chain, middle.as_ref(), &meter);
    if failure.is_none() && dst_info.kind == FdKind::Socket {
        finish_socket_sink(ends.dst);
    }
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();

    let mut report = Report {
        command: "pipe",
        src: Named {
            uri: cfg.src.to_string(),
            kind: src_info.kind,
        },
        dst: Named {
            uri: cfg.dst.to_string(),
            kind: dst_info.kind,
        },
        record,
        seconds,
        ending: Ending::Eof,
    };
    let Some(failure) = failure else {
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
            if err.raw_os_error() == Some(nix::libc::EPIPE)
                && side != Side::Source
                && writes_stdout(&cfg.dst)
            {
                return Ok(ExitCode::BrokenPipe);
            }
            let message = failure_message(opts.via, cfg, &err, side);
            report.ending = Ending::Error(message.clone());
            opts.print_report(&report.render(opts.stats));
            Err(anyhow!(message))
        }
    }
}

/// Bytes left in a regular-file source from its current offset (an inherited fd may have
/// been read from already): the progress total.
pub fn remaining(ends: &Ends<'_>) -> Option<u64> {
    remaining_in(ends.src, &ends.src_info)
}

/// [`remaining`] of any source fd.
pub fn remaining_in(src: BorrowedFd<'_>, info: &FdInfo) -> Option<u64> {
    let size = info.size?;
    let offset = nix::unistd::lseek(src.as_raw_fd(), 0, nix::unistd::Whence::SeekCur).ok()?;
    Some(size.saturating_sub(offset.max(0) as u64))
}

/// `--explain`: the plan from what the endpoints are, opening nothing.
fn explain(opts: &Options, cfg: &PipeConfig) -> anyhow::Result<ExitCode> {
    let src_info = crate::endpoint::predict(&cfg.src, Role::Source)
        .with_context(|| format!("cannot inspect '{}'", cfg.src))?;
    let dst_info = crate::endpoint::predict(&cfg.dst, Role::Sink)
        .with_context(|| format!("cannot inspect '{}'", cfg.dst))?;
    let chain = engine::chain(&src_info, &dst_info, opts.via)
        .map_err(|e| UsageError(format!("--via: {e}")))?;
    opts.print_plan(&format!(
        "plan: {} ({}) -> {} ({}) via {}",
        cfg.src,
        describe(&src_info),
        cfg.dst,
        describe(&dst_info),
        chain_words(&chain)
    ));
    Ok(ExitCode::Success)
}

/// Reading and writing one file at once eats its own output (`cat a >> a`). Checked
/// before the sink is truncated, so the data is still there.
pub fn refuse_same_file(
    src: &Endpoint,
    src_info: &FdInfo,
    dst: &Endpoint,
    dst_info: &FdInfo,
) -> anyhow::Result<()> {
    if src_info.same_file(dst_info) {
        bail!("'{src}' and '{dst}' are the same file: refusing to read and write it at once");
    }
    Ok(())
}

/// A plain file sink is opened without O_TRUNC (so a same-file check can run first);
/// truncate it now, like `>` and `cp`.
///
/// Only a file that holds bytes is truncated: on ext4, truncating even an empty file to 0
/// arms `auto_da_alloc`, and close() then allocates and starts writeback of everything
/// written, in our process (a fresh 1 GiB tcp -> file ran at 1.1 GiB/s instead of 1.9;
/// `>` and O_TRUNC never truncate a file they just created).
pub fn truncate_if_pending(opened: &Opened, endpoint: &Endpoint) -> anyhow::Result<()> {
    if !opened.truncate_pending {
        return Ok(());
    }
    let holds_bytes = nix::sys::stat::fstat(opened.fd.as_raw_fd())
        .map(|st| st.st_size > 0)
        .unwrap_or(true);
    if holds_bytes {
        nix::unistd::ftruncate(opened.fd.as_fd(), 0)
            .with_context(|| format!("cannot truncate '{endpoint}'"))?;
    }
    Ok(())
}

/// Splice goes faster through big pipes: grow the pipes on either side (ours to create
/// when neither side is one). Best effort: the size granted is what `-v` reports.
pub fn prepare_splice(
    ends: &Ends<'_>,
    chain: &[DataPath],
) -> anyhow::Result<Option<crate::sys::pipe::OwnPipe>> {
    if !chain.contains(&DataPath::Splice) {
        return Ok(None);
    }
    let mut grew = false;
    for (fd, info) in [(ends.src, &ends.src_info), (ends.dst, &ends.dst_info)] {
        if info.kind == FdKind::Pipe {
            crate::sys::pipe::grow_pipe(fd);
            grew = true;
        }
    }
    if grew {
        return Ok(None);
    }
    Ok(crate::sys::pipe::OwnPipe::new().ok())
}

fn plan_line(
    cfg: &PipeConfig,
    ends: &Ends<'_>,
    chain: &[DataPath],
    middle: Option<&crate::sys::pipe::OwnPipe>,
) -> String {
    let mut line = format!(
        "plan: {} ({}) -> {} ({}) via {}",
        cfg.src,
        describe_fd(&ends.src_info, ends.src),
        cfg.dst,
        describe_fd(&ends.dst_info, ends.dst),
        chain_words(chain)
    );
    if let Some(pipe) = middle {
        line.push_str(&format!("; own pipe of {} bytes", pipe.size));
    }
    line
}

/// "copy_file_range -> splice -> userspace"
pub fn chain_words(chain: &[DataPath]) -> String {
    chain
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(" -> ")
}

pub fn describe(info: &FdInfo) -> String {
    let mut s = info.kind.name().to_string();
    if info.append {
        s.push_str(", append");
    }
    if info.nonblocking {
        s.push_str(", non-blocking");
    }
    if let Some(size) = info.size {
        s.push_str(&format!(", {size} bytes"));
    }
    s
}

fn describe_fd(info: &FdInfo, fd: BorrowedFd<'_>) -> String {
    let mut s = describe(info);
    if info.kind == FdKind::Pipe {
        if let Ok(size) = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETPIPE_SZ) {
            s.push_str(&format!(", pipe of {size} bytes"));
        }
    }
    s
}

/// Sends FIN rather than RST: shut the write side, and swallow anything the peer sent
/// that nobody will read (closing with unread input resets the connection, HAZARDS §2).
pub fn finish_socket_sink(fd: BorrowedFd<'_>) {
    let _ = shutdown(fd.as_raw_fd(), Shutdown::Write);
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = crate::sys::queued(fd) {
        match nix::sys::socket::recv(
            fd.as_raw_fd(),
            &mut buf[..n.min(16 * 1024)],
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(1..) => {}
            _ => break,
        }
    }
}

fn writes_stdout(dst: &Endpoint) -> bool {
    matches!(dst, Endpoint::Stdio | Endpoint::Fd(1))
}

/// "cannot write to 'out.bin': No space left on device (os error 28)"
pub fn failure_message(via: Via, cfg: &PipeConfig, err: &std::io::Error, side: Side) -> String {
    if let Via::Forced(path) = via {
        if err
            .raw_os_error()
            .map(|e| engine::is_unsupported(nix::errno::Errno::from_raw(e)))
            == Some(true)
        {
            return format!(
                "--via {path}: the kernel refused {path} from '{}' to '{}': {err}",
                cfg.src, cfg.dst
            );
        }
    }
    match side {
        Side::Source => format!("cannot read from '{}': {err}", cfg.src),
        Side::Sink => format!("cannot write to '{}': {err}", cfg.dst),
        Side::Either => format!(
            "cannot move bytes from '{}' to '{}': {err}",
            cfg.src, cfg.dst
        ),
    }
}

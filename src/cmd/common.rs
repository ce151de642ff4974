//! The steps the commands share: inspecting what was opened, refusing to read and write one
//! file, preparing a sink, the words of a plan, the text of a failure, and waiting for a
//! command's child. Each takes the endpoints and fds it works on, never a command's config.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

use anyhow::{bail, Context};
use nix::sys::socket::{shutdown, Shutdown};

use crate::endpoint::http::HttpEnd;
use crate::endpoint::peer_env::PeerEnv;
use crate::endpoint::proxy::Addresses;
use crate::endpoint::tls::{Session, TlsInfo};
use crate::endpoint::{self, command, Endpoint, Opened, Role};
use crate::engine::{self, DataPath, Side, Via};
use crate::report::{HttpInfo, HttpResume};
use crate::sys::fdkind::FdInfo;
use crate::sys::process::ChildExit;
use crate::sys::socket::Mptcp;

/// What an opened endpoint's fd is.
pub fn inspect(fd: BorrowedFd<'_>, endpoint: &Endpoint) -> anyhow::Result<FdInfo> {
    let info = FdInfo::of(fd).with_context(|| format!("cannot inspect '{endpoint}'"))?;
    Ok(FdInfo {
        datagram_size: endpoint.datagram_size(),
        mptcp: endpoint.asks_mptcp().then(|| Mptcp::of(fd)),
        ..info
    })
}

/// `-v`: the socket options each endpoint set (`bind=`, `nodelay`, `mark=`...), once its
/// socket was made: "zerocat: tcp:db:5432,nodelay: socket options set: nodelay".
pub fn say_socket_options(opts: &crate::options::Options, endpoints: &[&Endpoint]) {
    for endpoint in endpoints {
        if let Some(words) = endpoint.sock_opts().and_then(|s| s.describe()) {
            opts.print_plan(&format!("{endpoint}: socket options set: {words}"));
        }
    }
}

/// What an endpoint's fd would be, opening nothing: for `--explain`.
pub fn predict(endpoint: &Endpoint, role: Role) -> anyhow::Result<FdInfo> {
    endpoint::predict(endpoint, role).with_context(|| format!("cannot inspect '{endpoint}'"))
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
/// Only a file that holds bytes: truncating a fresh ext4 file arms auto_da_alloc, and
/// close() pays its writeback (bench/NOTEBOOK.md, `pipe: truncate only a file that holds
/// bytes`).
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

/// Bytes left in a regular-file source from its current offset (an inherited fd may have
/// been read from already): the progress total.
pub fn remaining(src: BorrowedFd<'_>, info: &FdInfo) -> Option<u64> {
    let size = info.size?;
    let offset = nix::unistd::lseek(src.as_raw_fd(), 0, nix::unistd::Whence::SeekCur).ok()?;
    Some(size.saturating_sub(offset.max(0) as u64))
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

/// The end of a UDP stream: an empty datagram, which a zerocat receiver (`pipe udp-listen:`,
/// `relay udp-listen: -`) reads as its EOF, so zerocat to zerocat over UDP ends by itself.
/// Any other receiver gets an empty datagram (nc writes nothing for it). Best effort: lost
/// like any datagram, it leaves the receiver to its `--idle-timeout` or a signal.
pub fn finish_datagram_sink(fd: BorrowedFd<'_>) {
    let _ = nix::sys::socket::send(
        fd.as_raw_fd(),
        &[],
        nix::sys::socket::MsgFlags::MSG_DONTWAIT,
    );
}

/// "copy_file_range -> splice -> userspace"
pub fn chain_words(chain: &[DataPath]) -> String {
    chain
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// "file, append, 4096 bytes": an fd as the plan shows it.
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

/// stdout's reader went away while writing `dst`: the shell's 141, without a message
/// (DESIGN §5), as if SIGPIPE had killed us.
pub fn stdout_gone(dst: &Endpoint, err: &std::io::Error, side: Side) -> bool {
    err.raw_os_error() == Some(nix::libc::EPIPE)
        && side != Side::Source
        && matches!(dst, Endpoint::Stdio | Endpoint::Fd(1))
}

/// "cannot write to 'out.bin': No space left on device (os error 28)"; under a forced
/// `--via`, a refusal names the path the kernel refused.
pub fn failure_message(
    via: Via,
    src: &Endpoint,
    dst: &Endpoint,
    err: &std::io::Error,
    side: Side,
) -> String {
    if let Via::Forced(path) = via {
        if err
            .raw_os_error()
            .map(|e| engine::is_unsupported(nix::errno::Errno::from_raw(e)))
            == Some(true)
        {
            return format!(
                "--via {path}: the kernel refused {path} from '{src}' to '{dst}': {err}"
            );
        }
    }
    match side {
        Side::Source => format!("cannot read from '{src}': {err}"),
        Side::Sink => format!("cannot write to '{dst}': {err}"),
        Side::Either => format!("cannot move bytes from '{src}' to '{dst}': {err}"),
    }
}

/// Close the end, then wait for what is behind it: a TLS end's record layer sends its last
/// records and close_notify (its failure is an error naming the endpoint; `pipe` takes
/// the session out first to report it), and the child (`exec:`/`sh:`) exits; `stopping`
/// (the run was interrupted, or is while it waits): the child gets SIGTERM and `grace`
/// before SIGKILL.
pub fn reap_child(
    endpoint: &Endpoint,
    opened: Opened,
    grace: Duration,
    stopping: bool,
) -> anyhow::Result<Option<ChildExit>> {
    let Opened { fd, child, tls, .. } = opened;
    drop(fd);
    if let (_, Some(failure)) = finish_tls(endpoint, tls) {
        anyhow::bail!(failure);
    }
    let Some(mut child) = child else {
        return Ok(None);
    };
    let status = command::reap(&mut child, grace, stopping)
        .with_context(|| format!("cannot wait for {endpoint}"))?;
    Ok(Some(ChildExit::of(child.id(), status)))
}

/// After its fd closed: the TLS stream behind an end sends what it holds and its
/// close_notify (at most [`TLS_FINISH`]), then says what it negotiated, for the report, and
/// its record layer's failure (a truncated stream, an alert), naming the endpoint.
pub fn finish_tls(
    endpoint: &Endpoint,
    session: Option<Session>,
) -> (Option<TlsInfo>, Option<String>) {
    let Some(session) = session else {
        return (None, None);
    };
    let info = session.info.clone();
    let failure = session
        .finish(TLS_FINISH)
        .map(|reason| format!("{endpoint}: {reason}"));
    (Some(info), failure)
}

/// Finishes an `http(s)://` endpoint's exchange (its fd closed first): what the report says
/// of it, and its failure (the URL named) if it failed — a status not 2xx, a body cut or
/// longer than announced, an upload the server did not take.
pub fn finish_http(end: Option<HttpEnd>) -> (Option<HttpInfo>, Option<String>) {
    let Some(end) = end else {
        return (None, None);
    };
    let s = end.finish();
    let info = HttpInfo {
        method: s.method,
        status: s.status,
        reason: s.reason,
        url: s.url,
        etag: s.etag,
        redirects: s.redirects,
        framing: s.framing,
        length: s.length,
        spliced: s.spliced,
        copied: s.copied,
        unverified: s.unverified,
        resumes: s
            .resumes
            .iter()
            .map(|r| HttpResume {
                offset: r.offset,
                cause: r.cause.word(),
                attempts: r.attempts,
            })
            .collect(),
        resume_off: s.resume_off,
        tls: s.tls,
        ..HttpInfo::default()
    };
    (Some(info), s.error)
}

/// How long an ended run waits for a TLS sink to send its last records and close_notify.
pub const TLS_FINISH: Duration = Duration::from_secs(5);

/// "exec:false: the command exited with status 3": the failure of the command behind
/// `endpoint` when its child exited non-zero or died by a signal; None otherwise.
pub fn child_failure(endpoint: &Endpoint, child: Option<ChildExit>) -> Option<String> {
    let child = child.filter(ChildExit::failed)?;
    Some(format!("{endpoint}: the command {}", child.describe()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::fdkind::FdKind;
    use nix::errno::Errno;
    use std::io::Error;

    fn endpoint(arg: &str) -> Endpoint {
        endpoint::parse(arg).unwrap()
    }

    #[test]
    fn a_failure_names_the_side_that_failed() {
        let (src, dst) = (endpoint("in.bin"), endpoint("out.bin"));
        let enospc = Error::from(Errno::ENOSPC);
        assert_eq!(
            failure_message(Via::Auto, &src, &dst, &enospc, Side::Sink),
            format!("cannot write to 'file:out.bin': {enospc}")
        );
        assert_eq!(
            failure_message(Via::Auto, &src, &dst, &enospc, Side::Source),
            format!("cannot read from 'file:in.bin': {enospc}")
        );
        assert_eq!(
            failure_message(Via::Auto, &src, &dst, &enospc, Side::Either),
            format!("cannot move bytes from 'file:in.bin' to 'file:out.bin': {enospc}")
        );
    }

    #[test]
    fn a_forced_path_the_kernel_refuses_is_named() {
        let (src, dst) = (endpoint("in.bin"), endpoint("-"));
        let einval = Error::from(Errno::EINVAL);
        let forced = Via::Forced(DataPath::Splice);
        assert_eq!(
            failure_message(forced, &src, &dst, &einval, Side::Sink),
            format!("--via splice: the kernel refused splice from 'file:in.bin' to '-': {einval}")
        );
        // A real error under a forced path is still the side's error.
        let eio = Error::from(Errno::EIO);
        assert_eq!(
            failure_message(forced, &src, &dst, &eio, Side::Sink),
            format!("cannot write to '-': {eio}")
        );
    }

    #[test]
    fn only_epipe_writing_stdout_is_the_quiet_141() {
        let epipe = Error::from(Errno::EPIPE);
        assert!(stdout_gone(&endpoint("-"), &epipe, Side::Sink));
        assert!(stdout_gone(&endpoint("fd:1"), &epipe, Side::Either));
        assert!(!stdout_gone(&endpoint("-"), &epipe, Side::Source));
        assert!(!stdout_gone(&endpoint("fd:3"), &epipe, Side::Sink));
        assert!(!stdout_gone(&endpoint("out.bin"), &epipe, Side::Sink));
        let eio = Error::from(Errno::EIO);
        assert!(!stdout_gone(&endpoint("-"), &eio, Side::Sink));
    }

    #[test]
    fn one_file_as_source_and_sink_is_refused() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let other = tempfile::NamedTempFile::new().unwrap();
        let info = |f: &tempfile::NamedTempFile| FdInfo::of(f.as_file().as_fd()).unwrap();
        let (src, dst) = (endpoint("a"), endpoint("file:b,append"));
        let e = refuse_same_file(&src, &info(&file), &dst, &info(&file)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "'file:a' and 'file:b,append' are the same file: refusing to read and write it at once"
        );
        assert!(refuse_same_file(&src, &info(&file), &dst, &info(&other)).is_ok());
    }

    #[test]
    fn plan_words_name_the_paths_and_what_each_fd_is() {
        assert_eq!(
            chain_words(&[
                DataPath::CopyFileRange,
                DataPath::Splice,
                DataPath::Userspace
            ]),
            "copy_file_range -> splice -> userspace"
        );
        let info = FdInfo {
            append: true,
            nonblocking: true,
            size: Some(4096),
            ..FdInfo::assumed(FdKind::File)
        };
        assert_eq!(describe(&info), "file, append, non-blocking, 4096 bytes");
        assert_eq!(describe(&FdInfo::assumed(FdKind::Pipe)), "pipe");
    }
}

/// `--idle-timeout` for pipe and tee: a thread that watches the bytes delivered and, once
/// none moved for `idle`, stops the run as a signal would
/// ([`crate::sys::process::stop_for_timeout`]): the source is read no more, what was taken
/// is delivered, and the engine's thread is woken from whatever it blocks in (a socket, a
/// pipe, a terminal, a TLS record layer's socketpair alike).
pub struct IdleWatch {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<bool>,
}

/// How `--idle-timeout` ended a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quiet {
    /// It did not.
    No,
    /// The source had nothing to read: the quiet was the source's (a clean end).
    Source,
    /// The source had bytes, the sink took none of them (a failure).
    Sink,
}

impl IdleWatch {
    /// Watches `meter` from now; the calling thread is the one to wake. `src` (open until
    /// [`IdleWatch::stop`]) says, when the time is up, whose quiet it was.
    pub fn start(
        meter: std::sync::Arc<crate::engine::meter::Meter>,
        idle: Duration,
        src: BorrowedFd<'_>,
    ) -> IdleWatch {
        let src = src.as_raw_fd();
        use std::sync::atomic::Ordering;
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // SAFETY: pthread_self has no preconditions.
        let engine = unsafe { nix::libc::pthread_self() };
        let seen = done.clone();
        let thread = std::thread::spawn(move || {
            let step = crate::sys::process::STOP_TICK.min(idle / 4);
            let (mut last, mut since) = (meter.delivered(), std::time::Instant::now());
            let mut source_ready = None;
            while !seen.load(Ordering::SeqCst) {
                std::thread::sleep(step);
                let now = meter.delivered();
                if now != last {
                    (last, since) = (now, std::time::Instant::now());
                } else if since.elapsed() >= idle && !seen.load(Ordering::SeqCst) {
                    // SAFETY: the caller keeps `src` open until `stop`, which ends this loop.
                    let fd = unsafe { BorrowedFd::borrow_raw(src) };
                    source_ready.get_or_insert_with(|| {
                        crate::sys::wait_within(fd, nix::poll::PollFlags::POLLIN, Duration::ZERO)
                            .unwrap_or(false)
                    });
                    // The engine's thread runs until `done`: it is there to be woken.
                    crate::sys::process::stop_for_timeout(engine);
                }
            }
            source_ready.unwrap_or(false)
        });
        IdleWatch { done, thread }
    }

    /// Ends the watch (before the engine's thread goes on to other work): whether the
    /// timeout stopped the run, and on whose quiet.
    pub fn stop(self) -> Quiet {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        let source_ready = self.thread.join().unwrap_or(false);
        match (crate::sys::process::timed_out(), source_ready) {
            (false, _) => Quiet::No,
            (true, false) => Quiet::Source,
            (true, true) => Quiet::Sink,
        }
    }
}

/// What the engine's ending means once `--idle-timeout` may have stopped the run: stopped
/// with everything taken delivered (the grace not over) is a clean end, said as the idle
/// timeout; stopped with bytes the sink never took is a failure that says so.
pub fn idle_outcome(
    failure: Option<engine::Failure>,
    quiet: Quiet,
    idle: Option<Duration>,
) -> (Option<engine::Failure>, Option<crate::report::Ending>) {
    let (Quiet::Source | Quiet::Sink, Some(idle)) = (quiet, idle) else {
        return (failure, None);
    };
    let idle_words = crate::units::human_duration(idle.as_secs_f64());
    match failure {
        Some(engine::Failure::Interrupted)
            if quiet == Quiet::Source && !crate::sys::process::must_stop() =>
        {
            (None, Some(crate::report::Ending::IdleTimeout(idle)))
        }
        Some(engine::Failure::Interrupted) => (
            Some(engine::Failure::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the sink took no byte for {idle_words} (--idle-timeout): the source's \
                         bytes from there on were not delivered"
                    ),
                ),
                engine::Side::Sink,
            )),
            None,
        ),
        other => (other, None),
    }
}

/// `--dump` for pipe and tee (and the relay's): started before any endpoint opens, so a
/// file that cannot be written fails the run before a byte moves. A forced path whose
/// bytes pass through no pipe or buffer of zerocat's (copy_file_range, sendfile, reflink)
/// cannot be dumped: a usage error, before the file is made.
pub fn start_dump(opts: &crate::options::Options) -> anyhow::Result<Option<engine::dump::Dump>> {
    let Some(spec) = &opts.dump else {
        return Ok(None);
    };
    if let Via::Forced(path) = opts.via {
        if !matches!(path, DataPath::Splice | DataPath::Userspace | DataPath::Tee) {
            bail!(crate::exit::UsageError(format!(
                "--dump: --via {path} moves bytes the dump cannot see; \
                 --via splice or userspace can be dumped"
            )));
        }
    }
    let dump = engine::dump::Dump::start(spec)
        .with_context(|| format!("--dump {}", spec.path.display()))?;
    Ok(Some(dump))
}

/// The dump is over: its totals, said on their own line (`zerocat: dump: ...`, whatever
/// `--stats` is, not under `-q`) and kept for the JSON report.
pub fn finish_dump(
    opts: &crate::options::Options,
    dump: Option<engine::dump::Dump>,
) -> Option<engine::dump::DumpTotals> {
    let totals = dump?.finish();
    if !opts.quiet {
        eprintln!("zerocat: {}", totals.line());
    }
    Some(totals)
}

/// One stream of pipe or tee in the dump, from `src` to `dst` (the peers' addresses where
/// they are IP sockets; tee's many sinks are none).
pub fn tap_stream(
    dump: Option<&engine::dump::Dump>,
    src: BorrowedFd<'_>,
    dst: Option<BorrowedFd<'_>>,
) -> Option<std::cell::RefCell<engine::dump::Tapped>> {
    let tap = dump?.tap();
    let conn = tap.next_conn();
    let peer = engine::dump::peer_of;
    tap.open(conn, [peer(src), dst.and_then(peer)]);
    Some(std::cell::RefCell::new(engine::dump::Tapped::new(
        tap, conn, 0,
    )))
}

/// What a command at the other end of the socket `opened` (of `endpoint`) learns of it:
/// its addresses (`origin`, when a listener accepted it), and a TLS client's certificate
/// subject when a listener's client presented one.
pub fn peer_env(endpoint: &Endpoint, opened: &Opened, origin: &Addresses) -> PeerEnv {
    let tls = opened.tls.as_ref().map(|session| {
        endpoint
            .listens()
            .then_some(session.info.peer_subject.as_deref())
            .flatten()
    });
    PeerEnv::of_socket(origin, opened.fd.as_fd(), tls)
}

/// The next client of a `--keep-open` listener (pipe's and tee's), accepting again where
/// there is nothing to serve (EINTR, a client gone before it was served, a refused PROXY
/// header or handshake) and counting in `refused` each client the listener's `allow=`/`deny=`
/// refused (closed unread), said on stderr as a single accept says it. `Err`: how the run
/// ends — SIGINT/SIGTERM, or the listener failed.
pub fn next_client(
    listener: &endpoint::Listener,
    refused: &mut u64,
) -> Result<endpoint::Accepted, crate::report::Ending> {
    use crate::report::Ending;
    loop {
        match listener.accept_from() {
            Ok(accepted) => return Ok(accepted),
            Err(_) if crate::sys::process::interrupted() => return Err(Ending::Signal),
            Err(e) if e.raw_os_error() == Some(nix::libc::EINTR) => {}
            Err(e) => match endpoint::Rejected::of(&e) {
                Some(rejected) if rejected.refused => {
                    eprintln!("zerocat: {rejected}");
                    *refused += 1;
                }
                Some(_) => {}
                None if e.raw_os_error() == Some(nix::libc::ECONNABORTED) => {}
                None => {
                    return Err(Ending::Error(format!(
                        "cannot accept a connection on {}: {e}",
                        listener.local_addr()
                    )))
                }
            },
        }
    }
}

/// The report's `refused` ([`crate::report::Report::refused`]): where any of `ends` listens
/// (`udp-listen:` included), the clients their allow/deny lists refused before the ones
/// they accepted (a `udp-listen:`'s: the datagrams it dropped).
pub fn refused_by_listeners(ends: &[(&Endpoint, &Opened)]) -> Option<u64> {
    ends.iter()
        .any(|(endpoint, _)| endpoint.listens() || matches!(endpoint, Endpoint::UdpListen { .. }))
        .then(|| ends.iter().map(|(_, opened)| opened.refused).sum())
}

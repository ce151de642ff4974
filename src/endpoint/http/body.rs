//! Bodies: how a response's body ends ([`Framing`]), and the pumps that move bodies between
//! the connection and a pipe of zerocat's own with splice, so that the engine sees a pipe
//! and runs its own chain (pipe -> file, pipe -> socket, tee(2) to many sinks…).
//!
//! - [`BodyPump`] (GET): splices exactly the body from the connection into the pipe: a
//!   Content-Length's bytes, each chunk's bytes (chunk-size lines and trailers read in
//!   userspace with MSG_PEEK, so no body byte ever is), or all until the server closes.
//!   Never a byte past the framing: what follows is not the body (HAZARDS §3).
//! - [`UploadPump`] (PUT/POST from a stream): each run of bytes the pipe holds becomes one
//!   chunk: its size line written, its bytes spliced from the pipe into the connection.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::PollFlags;
use nix::sys::socket::{recv, MsgFlags};
use url::Url;

use super::head::{retry_eintr, ResponseHead};
use super::resume::{Cause, Resume, Resumer};
use super::{pool, read_answer, Connection, Response};
use crate::endpoint::redact_url;
use crate::sys;
use crate::sys::ktls::TlsInfo;
use crate::sys::pipe::OwnPipe;

/// How a response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length: N` (0 also for HEAD, 204, 304).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body ends when the server closes (HTTP/1.0 style). A cut cannot be told
    /// from the end, so the report calls it unverified (HAZARDS §3).
    UntilClose,
}

impl Framing {
    /// "content-length", "chunked", "close": the JSON word.
    pub fn word(&self) -> &'static str {
        match self {
            Framing::Length(_) => "content-length",
            Framing::Chunked => "chunked",
            Framing::UntilClose => "close",
        }
    }
}

/// The longest chunk-size line (with extensions) and the most trailer bytes taken.
const MAX_CHUNK_LINE: usize = 4096;
const MAX_TRAILERS: usize = 64 * 1024;
/// The most one splice of a body asks for.
const SPAN: usize = 1 << 20;
/// How long a finished run waits for a pump to end once its pipe end is closed.
pub const PUMP_FINISH: Duration = Duration::from_secs(5);

/// What a pump did, for the report.
#[derive(Debug, Clone, Default)]
pub struct PumpEnd {
    /// Body bytes spliced, and moved with read/write where splice was refused.
    pub spliced: u64,
    pub copied: u64,
    /// Why it stopped short (the URL named), if it did.
    pub error: Option<String>,
    /// Ended at the server's close with no length to check it by.
    pub unverified: bool,
    /// The upload's answer (an [`UploadPump`]), as its status line.
    pub answer: Option<ResponseHead>,
    /// Where a download stopped short and continued ([`Resumer`]), in order.
    pub resumes: Vec<Resume>,
    /// The resume that gave up, when one did ([`Resumer::failed`]).
    pub resume_failed: Option<Resume>,
}

impl PumpEnd {
    pub fn bytes(&self) -> u64 {
        self.spliced + self.copied
    }
}

/// The GET body's pump: a thread splicing the body into the pipe the engine reads.
#[derive(Debug)]
pub struct BodyPump {
    pub head: ResponseHead,
    pub url: Url,
    pub redirects: u32,
    pub tls: Option<TlsInfo>,
    /// Why a cut body would not be resumed (no validator, `--retries 0`): for the report.
    pub resume_off: Option<&'static str>,
    thread: JoinHandle<PumpEnd>,
}

impl BodyPump {
    /// Waits for the pump to end (the engine's end of the pipe must be closed first, so a
    /// pump blocked on a full pipe sees EPIPE) and says what it did; a pump still blocked
    /// after `limit` is left behind and said.
    pub fn finish(self, limit: Duration) -> PumpEnd {
        join(self.thread, limit, &self.url)
    }
}

fn join(thread: JoinHandle<PumpEnd>, limit: Duration, url: &Url) -> PumpEnd {
    let until = Instant::now() + limit;
    while !thread.is_finished() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    if !thread.is_finished() {
        return PumpEnd {
            error: Some(format!(
                "{}: the connection did not end within {} s",
                redact_url(url),
                limit.as_secs()
            )),
            ..PumpEnd::default()
        };
    }
    thread.join().unwrap_or_else(|_| PumpEnd {
        error: Some(format!("{}: the body's pump panicked", redact_url(url))),
        ..PumpEnd::default()
    })
}

pub(super) fn start_source(
    response: Response,
    resumer: Option<Resumer>,
) -> anyhow::Result<(OwnedFd, BodyPump)> {
    let OwnPipe { read, write, .. } =
        OwnPipe::new().map_err(|e| anyhow::anyhow!("cannot make a pipe for the body: {e}"))?;
    let Response {
        conn,
        head,
        url,
        redirects,
    } = response;
    let tls = conn.tls.as_ref().map(|s| s.info.clone());
    let framing = head.framing;
    let keeps_alive = head.keeps_alive();
    let shown = match &resumer {
        Some(r) => r.shown(&url),
        None => redact_url(&url),
    };
    let thread = std::thread::Builder::new()
        .name("http-body".into())
        .spawn(move || pump_source(conn, framing, keeps_alive, write, &shown, resumer))?;
    Ok((
        read,
        BodyPump {
            head,
            url,
            redirects,
            tls,
            resume_off: None,
            thread,
        },
    ))
}

fn pump_source(
    mut conn: Connection,
    mut framing: Framing,
    mut keeps_alive: bool,
    pipe: OwnedFd,
    url: &str,
    mut resumer: Option<Resumer>,
) -> PumpEnd {
    let mut end = PumpEnd::default();
    let mut mover = Mover::default();
    let idle = resumer.as_ref().map(|r| r.idle);
    let result = loop {
        let result = move_body(
            conn.fd.as_fd(),
            pipe.as_fd(),
            framing,
            &mut mover,
            url,
            idle,
        );
        // A body cut short continues, into the same pipe, from the answer that continues
        // it exactly (resume.rs), or the run fails saying both why it stopped and why not.
        let (Err(Stop::Short(message, cause)), Some(r)) = (&result, resumer.as_mut()) else {
            break result;
        };
        match r.reconnect(mover.spliced + mover.copied, *cause) {
            Ok(next) => {
                framing = next.head.framing;
                keeps_alive = next.head.keeps_alive();
                finish_connection(std::mem::replace(&mut conn, next.conn));
            }
            Err(why) => break Err(Stop::Failed(format!("{message}; {why}"))),
        }
    };
    end.spliced = mover.spliced;
    end.copied = mover.copied;
    if let Some(r) = resumer {
        end.resumes = r.resumes;
        end.resume_failed = r.failed;
    }
    // Read exactly to its framing's end: the connection may carry the next request.
    let whole = matches!(result, Ok(false));
    match result {
        Ok(unverified) => end.unverified = unverified,
        Err(Stop::ReaderGone) => {}
        Err(Stop::Failed(message) | Stop::Short(message, _)) => end.error = Some(message),
    }
    // The engine sees EOF once the pipe closes; the connection goes after it.
    drop(pipe);
    if whole {
        pool::release(conn, keeps_alive);
        return end;
    }
    let Connection { fd, tls, .. } = conn;
    drop(fd);
    if let Some(session) = tls {
        // A body framed by its length or chunks is whole whatever the close looked like;
        // one that ends at the close is only as sure as the close_notify.
        let failure = session.finish(PUMP_FINISH);
        if let (Some(why), true, None) = (failure, framing == Framing::UntilClose, &end.error) {
            end.error = Some(format!("{url}: {why}"));
        }
    }
    end
}

enum Stop {
    /// The engine's end of the pipe closed: the run ends for another reason.
    ReaderGone,
    Failed(String),
    /// The body stopped short of its framing's end (a cut a resume may mend).
    Short(String, Cause),
}

/// What a failed read of the body means: a cut (resumable), or a failure.
fn stop_reading(message: String, errno: Errno) -> Stop {
    match errno {
        Errno::ECONNRESET
        | Errno::ECONNABORTED
        | Errno::ETIMEDOUT
        | Errno::EHOSTUNREACH
        | Errno::ENETUNREACH
        | Errno::ENETDOWN => Stop::Short(message, Cause::Reset),
        _ => Stop::Failed(message),
    }
}

/// Waits until `sock` has something (data, its end, an error) for at most `idle`: a body
/// that sends nothing for that long is cut (`--idle-timeout`).
fn idle_wait(
    sock: BorrowedFd<'_>,
    idle: Option<Duration>,
    url: &str,
    moved: u64,
) -> Result<(), Stop> {
    let Some(idle) = idle else { return Ok(()) };
    match sys::wait_within(sock, PollFlags::POLLIN, idle) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Stop::Short(
            format!(
                "{url}: no byte of the body for {} (--idle-timeout) after {moved} bytes",
                crate::units::human_duration(idle.as_secs_f64())
            ),
            Cause::Idle,
        )),
        Err(Errno::EINTR) => Err(Stop::ReaderGone),
        Err(e) => Err(stop_reading(
            format!("{url}: waiting for the body: {e:?}"),
            e,
        )),
    }
}

/// Splices, or reads and writes where the kernel refuses splice for these fds.
#[derive(Default)]
struct Mover {
    spliced: u64,
    copied: u64,
    userspace: bool,
    buf: Vec<u8>,
}

impl Mover {
    /// Moves up to `len` bytes from `src` to `dst`: 0 at `src`'s end.
    fn step(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        len: usize,
    ) -> Result<usize, Errno> {
        loop {
            if self.userspace {
                return self.copy(src, dst, len);
            }
            match sys::splice(src, dst, len) {
                Ok(n) => {
                    self.spliced += n as u64;
                    return Ok(n);
                }
                Err(Errno::EINTR) if !sys::process::must_stop() => {}
                Err(Errno::EAGAIN) => {
                    sys::wait(dst, PollFlags::POLLOUT)?;
                    sys::wait(src, PollFlags::POLLIN)?;
                }
                // Refused before a byte moved: these fds go through userspace.
                Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) if self.spliced == 0 => {
                    self.userspace = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn copy(
        &mut self,
        src: BorrowedFd<'_>,
        dst: BorrowedFd<'_>,
        len: usize,
    ) -> Result<usize, Errno> {
        self.buf.resize(64 * 1024, 0);
        let want = len.min(self.buf.len());
        let n = retry_eintr(|| sys::read(src, &mut self.buf[..want]))?;
        sys::write_all(dst, &self.buf[..n]).map_err(|(_, e)| e)?;
        self.copied += n as u64;
        Ok(n)
    }
}

/// Moves the body; Ok(true) when it ended at the server's close with nothing to check it by.
fn move_body(
    sock: BorrowedFd<'_>,
    pipe: BorrowedFd<'_>,
    framing: Framing,
    mover: &mut Mover,
    url: &str,
    idle: Option<Duration>,
) -> Result<bool, Stop> {
    match framing {
        Framing::Length(len) => {
            move_span(sock, pipe, len, mover, url, idle, |moved| {
                format!("the body ended after {moved} of its {len} bytes (Content-Length)")
            })?;
            nothing_follows(sock, url, &format!("its Content-Length of {len} bytes"))?;
            Ok(false)
        }
        Framing::UntilClose => {
            move_span(sock, pipe, u64::MAX, mover, url, idle, |_| unreachable!())?;
            Ok(true)
        }
        Framing::Chunked => {
            let mut total = 0u64;
            loop {
                idle_wait(sock, idle, url, total)?;
                let size = chunk_size(sock, url, total)?;
                if size == 0 {
                    trailers(sock, url)?;
                    nothing_follows(sock, url, "its last chunk")?;
                    return Ok(false);
                }
                move_span(sock, pipe, size, mover, url, idle, |moved| {
                    format!(
                        "the body ended inside a chunk ({moved} of its {size} bytes), after {} \
                         bytes",
                        total + moved
                    )
                })
                .map_err(|stop| match stop {
                    Stop::Short(message, Cause::Eof) => Stop::Short(message, Cause::ChunkedCut),
                    other => other,
                })?;
                total += size;
                expect_crlf(sock, url, total)?;
            }
        }
    }
}

/// Moves `len` bytes (to the end for u64::MAX); an end before them is `short(moved)`.
fn move_span(
    sock: BorrowedFd<'_>,
    pipe: BorrowedFd<'_>,
    len: u64,
    mover: &mut Mover,
    url: &str,
    idle: Option<Duration>,
    short: impl Fn(u64) -> String,
) -> Result<(), Stop> {
    let mut moved = 0u64;
    while moved < len {
        if sys::process::must_stop() {
            return Err(Stop::ReaderGone);
        }
        idle_wait(sock, idle, url, moved)?;
        let want = (len - moved).min(SPAN as u64) as usize;
        match mover.step(sock, pipe, want) {
            Ok(0) if len == u64::MAX => return Ok(()),
            Ok(0) => return Err(Stop::Short(format!("{url}: {}", short(moved)), Cause::Eof)),
            Ok(n) => moved += n as u64,
            Err(Errno::EPIPE) => return Err(Stop::ReaderGone),
            Err(e) => {
                return Err(stop_reading(
                    format!(
                        "{url}: reading the body after {moved} bytes: {e:?}: {}",
                        e.desc()
                    ),
                    e,
                ))
            }
        }
    }
    Ok(())
}

/// After the framing said the body ended: anything already waiting is more than the
/// server announced (the connection asked `Connection: close`, so nothing may follow).
fn nothing_follows(sock: BorrowedFd<'_>, url: &str, announced: &str) -> Result<(), Stop> {
    let mut byte = [0u8; 1];
    match recv(
        sock.as_raw_fd(),
        &mut byte,
        MsgFlags::MSG_PEEK | MsgFlags::MSG_DONTWAIT,
    ) {
        Ok(1..) => Err(Stop::Failed(format!(
            "{url}: the server sent more than {announced}: the rest was not taken"
        ))),
        _ => Ok(()),
    }
}

/// Peeks what has arrived, up to `max` bytes.
fn peek(sock: BorrowedFd<'_>, buf: &mut [u8]) -> Result<usize, Errno> {
    retry_eintr(|| recv(sock.as_raw_fd(), buf, MsgFlags::MSG_PEEK))
}

/// Takes exactly `len` already peeked bytes.
fn take(sock: BorrowedFd<'_>, len: usize) -> Result<(), Errno> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match retry_eintr(|| recv(sock.as_raw_fd(), &mut buf[got..], MsgFlags::MSG_WAITALL))? {
            0 => return Err(Errno::ECONNRESET),
            n => got += n,
        }
    }
    Ok(())
}

/// Reads one chunk-size line (`1a2b;ext\r\n`) and takes exactly it.
fn chunk_size(sock: BorrowedFd<'_>, url: &str, total: u64) -> Result<u64, Stop> {
    let fail = |what: String| Stop::Failed(format!("{url}: {what} (after {total} body bytes)"));
    let mut line: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; MAX_CHUNK_LINE];
    loop {
        let said = |what: String| format!("{url}: {what} (after {total} body bytes)");
        let n = peek(sock, &mut buf).map_err(|e| {
            stop_reading(
                said(format!("reading a chunk size: {e:?}: {}", e.desc())),
                e,
            )
        })?;
        if n == 0 {
            let message = said("the chunked body ended before its last chunk".into());
            return Err(Stop::Short(message, Cause::ChunkedCut));
        }
        let mut all = line.clone();
        all.extend_from_slice(&buf[..n]);
        match httparse::parse_chunk_size(&all) {
            Ok(httparse::Status::Complete((used, size))) => {
                take(sock, used - line.len())
                    .map_err(|e| fail(format!("reading a chunk size: {e:?}")))?;
                return Ok(size);
            }
            Ok(httparse::Status::Partial) if all.len() < MAX_CHUNK_LINE => {
                take(sock, n).map_err(|e| fail(format!("reading a chunk size: {e:?}")))?;
                line = all;
            }
            _ => {
                let shown = String::from_utf8_lossy(&all[..all.len().min(40)]).into_owned();
                return Err(fail(format!("bad chunk size \"{}\"", shown.escape_debug())));
            }
        }
    }
}

/// The CRLF after a chunk's bytes.
fn expect_crlf(sock: BorrowedFd<'_>, url: &str, total: u64) -> Result<(), Stop> {
    let mut crlf = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match retry_eintr(|| recv(sock.as_raw_fd(), &mut crlf[got..], MsgFlags::MSG_WAITALL)) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    if got == 2 && crlf == *b"\r\n" {
        return Ok(());
    }
    if got < 2 {
        return Err(Stop::Short(
            format!(
                "{url}: the chunked body ended before its last chunk (after {total} body bytes)"
            ),
            Cause::ChunkedCut,
        ));
    }
    Err(Stop::Failed(format!(
        "{url}: a chunk is longer than its size said, or is cut (after {total} body bytes)"
    )))
}

/// The trailer section after the last chunk: header lines up to an empty one, dropped.
fn trailers(sock: BorrowedFd<'_>, url: &str) -> Result<(), Stop> {
    let mut seen = 0;
    let mut buf = vec![0u8; 4096];
    let mut line_len = 0;
    loop {
        let n = peek(sock, &mut buf)
            .map_err(|e| Stop::Failed(format!("{url}: reading the trailers: {e:?}")))?;
        if n == 0 {
            return Err(Stop::Failed(format!(
                "{url}: the chunked body ended inside its trailers"
            )));
        }
        // Take up to and including the first LF, or all that was peeked.
        let upto = buf[..n].iter().position(|&b| b == b'\n').map(|i| i + 1);
        let used = upto.unwrap_or(n);
        take(sock, used)
            .map_err(|e| Stop::Failed(format!("{url}: reading the trailers: {e:?}")))?;
        seen += used;
        line_len += used;
        if seen > MAX_TRAILERS {
            return Err(Stop::Failed(format!(
                "{url}: the trailers are larger than {} KiB",
                MAX_TRAILERS / 1024
            )));
        }
        if upto.is_some() {
            // An empty line (CRLF alone) ends them.
            if line_len <= 2 {
                return Ok(());
            }
            line_len = 0;
        }
    }
}

/// The upload's pump: each run of bytes in the pipe becomes one chunk on the connection;
/// at the pipe's end, the last chunk, then the server's answer.
#[derive(Debug)]
pub struct UploadPump {
    pub url: Url,
    pub method: String,
    pub tls: Option<TlsInfo>,
    cut: Arc<AtomicBool>,
    thread: JoinHandle<PumpEnd>,
}

impl UploadPump {
    /// Starts the pump on `conn` (the request head sent, the server said go); returns the
    /// pipe end the engine writes the body into.
    pub fn start(
        conn: Connection,
        url: Url,
        method: String,
    ) -> anyhow::Result<(OwnedFd, UploadPump)> {
        let OwnPipe { read, write, .. } =
            OwnPipe::new().map_err(|e| anyhow::anyhow!("cannot make a pipe for the body: {e}"))?;
        let tls = conn.tls.as_ref().map(|s| s.info.clone());
        let target = url.clone();
        let cut = Arc::new(AtomicBool::new(false));
        let told = Arc::clone(&cut);
        let asked = method.clone();
        let thread = std::thread::Builder::new()
            .name("http-upload".into())
            .spawn(move || pump_upload(conn, read, &target, &asked, &told))?;
        Ok((
            write,
            UploadPump {
                url,
                method,
                tls,
                cut,
                thread,
            },
        ))
    }

    /// The run failed: the pipe's end is not the body's end, so no last chunk is sent
    /// (the server drops a body it never saw end). Call before closing the pipe's end.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    /// Waits for the last chunk and the answer (the engine's end of the pipe must be closed
    /// first).
    pub fn finish(self, limit: Duration) -> PumpEnd {
        join(self.thread, limit, &self.url)
    }
}

fn pump_upload(
    conn: Connection,
    pipe: OwnedFd,
    url: &Url,
    method: &str,
    cut: &AtomicBool,
) -> PumpEnd {
    let shown = redact_url(url);
    let mut end = PumpEnd::default();
    let mut mover = Mover::default();
    let sent = send_chunks(conn.fd.as_fd(), pipe.as_fd(), &mut mover, &shown, cut);
    end.spliced = mover.spliced;
    end.copied = mover.copied;
    drop(pipe);
    match sent.and_then(|()| read_answer(&conn, url, method).map_err(|e| format!("{e:#}"))) {
        Ok(head) => end.answer = Some(head),
        Err(message) => end.error = Some(message),
    }
    finish_connection(conn);
    end
}

/// Closes the connection, and finishes its TLS stream.
pub fn finish_connection(conn: Connection) {
    let Connection { fd, tls, .. } = conn;
    drop(fd);
    if let Some(session) = tls {
        let _ = session.finish(PUMP_FINISH);
    }
}

fn send_chunks(
    sock: BorrowedFd<'_>,
    pipe: BorrowedFd<'_>,
    mover: &mut Mover,
    url: &str,
    cut: &AtomicBool,
) -> Result<(), String> {
    let fail = |what: &str, e: Errno| format!("{url}: {what}: {e:?}: {}", e.desc());
    loop {
        sys::wait(pipe, PollFlags::POLLIN).map_err(|e| fail("waiting for the body", e))?;
        let queued = sys::queued(pipe).map_err(|e| fail("reading the body", e))?;
        if queued == 0 && cut.load(Ordering::SeqCst) {
            return Err(format!(
                "{url}: the upload was cut short: no last chunk sent, so the server keeps nothing"
            ));
        }
        if queued == 0 {
            // Readable with nothing in it: the writer closed, the body is whole.
            sys::write_all(sock, b"0\r\n\r\n")
                .map_err(|(_, e)| fail("sending the last chunk", e))?;
            return Ok(());
        }
        sys::write_all(sock, format!("{queued:x}\r\n").as_bytes())
            .map_err(|(_, e)| fail("sending a chunk", e))?;
        let mut left = queued;
        while left > 0 {
            match mover.step(pipe, sock, left) {
                Ok(0) => return Err(format!("{url}: the body's pipe ended inside a chunk")),
                Ok(n) => left -= n,
                Err(e) => return Err(fail("sending a chunk", e)),
            }
        }
        sys::write_all(sock, b"\r\n").map_err(|(_, e)| fail("sending a chunk", e))?;
    }
}

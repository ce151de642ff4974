//! A WebSocket connection's threads: the upgrade, then one thread per direction between
//! the network fd and our end of a socketpair (the engine's or the relay's end is the
//! other). Blocking I/O in each; frames going out are written whole under one lock, so a
//! pong never lands inside a data frame.
//!
//! Paths: a frame the server sends is unmasked, so its payload is spliced from the
//! socketpair through a pipe into the socket, between headers written by hand; a client
//! receiving such frames splices their payloads from the socket through a pipe into the
//! socketpair (the header read by hand, so no byte past the payload is taken). Masked
//! payloads (what a client sends), text messages (their UTF-8 is checked) and the bytes
//! read together with a header go through a buffer. Where the fd refuses splice (EINVAL)
//! the buffer carries the rest.
//!
//! Ends: the peer's close frame is EOF on the socketpair (shutdown), our end's EOF is a
//! close frame (1000); once both went, the socket is shut. A frame the peer must not send
//! closes the connection with the RFC's code (1002, 1007), said on stderr and counted
//! ([`counts`], in the relay's JSON report); other connections go on.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::PollFlags;
use nix::sys::socket::{self, AddressFamily, Shutdown, SockFlag, SockType};

use super::*;
use crate::sys;
use crate::sys::pipe::OwnPipe;

/// How long the upgrade may take.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// The most an HTTP head of the upgrade may hold.
const HEAD_MAX: usize = 16 * 1024;
/// A buffer's size (masked payloads, text, reads).
const CHUNK: usize = 256 * 1024;
const STACK: usize = 256 * 1024;

/// Connections closed for a frame the peer must not send, over the whole run, by close
/// code: 1002 (protocol error), 1007 (text not UTF-8).
static CLOSED_PROTOCOL_ERROR: AtomicU64 = AtomicU64::new(0);
static CLOSED_INVALID_DATA: AtomicU64 = AtomicU64::new(0);
/// Pings the peers sent (each answered with a pong unless our close had gone).
static PINGS: AtomicU64 = AtomicU64::new(0);

/// The run's WebSocket counts, for the reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Payload bytes spliced, and carried through a buffer.
    pub spliced: u64,
    pub copied: u64,
    /// Connections closed with 1002 and with 1007.
    pub closed_1002: u64,
    pub closed_1007: u64,
    pub pings: u64,
}

pub fn counts() -> Counts {
    let (spliced, copied) = paths();
    Counts {
        spliced,
        copied,
        closed_1002: CLOSED_PROTOCOL_ERROR.load(Ordering::Relaxed),
        closed_1007: CLOSED_INVALID_DATA.load(Ordering::Relaxed),
        pings: PINGS.load(Ordering::Relaxed),
    }
}

/// Which end of the WebSocket zerocat is.
#[derive(Debug, Clone)]
pub enum Role {
    Client {
        host: String,
        port: u16,
        path: String,
    },
    /// `path`: the only path served (else any).
    Server { path: Option<String> },
}

#[derive(Default)]
struct Shared {
    error: Mutex<Option<String>>,
    write: Mutex<()>,
    sent_close: AtomicBool,
    got_close: AtomicBool,
}

/// The threads of the connections still running, joined at the end of the run
/// ([`finish_all`]) so a last close frame or the last bytes are not lost with the process.
static LIVE: sys::process::Finishing = sys::process::Finishing::new();

/// Payload bytes over the whole run: spliced, and carried through a buffer.
static SPLICED: AtomicU64 = AtomicU64::new(0);
static COPIED: AtomicU64 = AtomicU64::new(0);

/// (spliced, copied) payload bytes of every WebSocket connection so far.
pub fn paths() -> (u64, u64) {
    (
        SPLICED.load(Ordering::Relaxed),
        COPIED.load(Ordering::Relaxed),
    )
}

/// Waits (at most `limit` in all) for the connections' threads: each ends once its
/// close frames are exchanged (the engine's ends are closed by now).
pub fn finish_all(limit: Duration) {
    LIVE.finish(limit);
}

/// Called once the peer's close frame came whole, before that direction's EOF reaches the
/// engine (the TLS under it then takes a FIN without close_notify as the end it is).
pub type OnPeerClose = Box<dyn FnOnce() + Send>;

/// Starts the upgrade on `net` (connected, its TLS if any established) and the threads
/// after it. Returns our socketpair's other end (CLOEXEC; O_NONBLOCK if `nonblocking`).
pub fn start(
    net: OwnedFd,
    role: Role,
    nonblocking: bool,
    peer: String,
    on_close: Option<OnPeerClose>,
) -> io::Result<OwnedFd> {
    let (engine, local) = socket::socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    if nonblocking {
        sys::socket::set_nonblocking(engine.as_raw_fd())?;
    }
    set_blocking(net.as_fd())?;
    let shared = Arc::new(Shared::default());
    let thread = std::thread::Builder::new()
        .name("zerocat-ws".into())
        .stack_size(STACK)
        .spawn(move || run(net, local, role, shared, peer, on_close))?;
    LIVE.keep(thread);
    Ok(engine)
}

fn set_blocking(fd: BorrowedFd<'_>) -> Result<(), Errno> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(())
}

fn set_read_timeout(fd: BorrowedFd<'_>, limit: Option<Duration>) {
    let tv = limit.map_or(nix::sys::time::TimeVal::new(0, 0), |d| {
        nix::sys::time::TimeVal::new(d.as_secs() as i64, d.subsec_micros() as i64)
    });
    let _ = socket::setsockopt(&fd, socket::sockopt::ReceiveTimeout, &tv);
}

fn fail(shared: &Shared, text: String) {
    shared
        .error
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(text);
}

/// The upgrade, then both directions; the thread ends when both have.
fn run(
    net: OwnedFd,
    local: OwnedFd,
    role: Role,
    shared: Arc<Shared>,
    peer: String,
    on_close: Option<OnPeerClose>,
) {
    set_read_timeout(net.as_fd(), Some(HANDSHAKE_DEADLINE));
    let upgraded = match &role {
        Role::Client { host, port, path } => client_upgrade(net.as_fd(), host, *port, path),
        Role::Server { path } => server_upgrade(net.as_fd(), path.as_deref()),
    };
    set_read_timeout(net.as_fd(), None);
    let ahead = match upgraded {
        Ok(ahead) => ahead,
        Err(text) => {
            eprintln!("zerocat: ws: {peer}: {text}");
            fail(&shared, text);
            let _ = socket::shutdown(net.as_raw_fd(), Shutdown::Both);
            let _ = socket::shutdown(local.as_raw_fd(), Shutdown::Both);
            return;
        }
    };
    let server = matches!(role, Role::Server { .. });
    let (net, local) = (Arc::new(net), Arc::new(local));
    let writer = {
        let (net, local, shared) = (Arc::clone(&net), Arc::clone(&local), Arc::clone(&shared));
        std::thread::Builder::new()
            .name("zerocat-ws-out".into())
            .stack_size(STACK)
            .spawn(move || Writer::new(server, &shared).run(net.as_fd(), local.as_fd()))
    };
    let mut reader = Reader {
        server,
        buf: vec![0u8; CHUNK].into_boxed_slice(),
        start: 0,
        end: 0,
        pipe: None,
        splice: true,
        message: None,
        utf8: Utf8Check::default(),
        shared: &shared,
    };
    reader.buf[..ahead.len()].copy_from_slice(&ahead);
    reader.end = ahead.len();
    let ended = reader.run(net.as_fd(), local.as_fd());
    match ended {
        Ok(()) => {
            shared.got_close.store(true, Ordering::SeqCst);
            if let Some(on_close) = on_close {
                on_close();
            }
            let _ = socket::shutdown(local.as_raw_fd(), Shutdown::Write);
            if shared.sent_close.load(Ordering::SeqCst) {
                let _ = socket::shutdown(net.as_raw_fd(), Shutdown::Both);
            }
        }
        Err(End::PeerGone) => {
            // TCP's end without a close frame: EOF all the same (the stream's bytes are in).
            shared.got_close.store(true, Ordering::SeqCst);
            let _ = socket::shutdown(local.as_raw_fd(), Shutdown::Write);
        }
        Err(End::Fault(v)) => {
            match v.code {
                INVALID_DATA => &CLOSED_INVALID_DATA,
                _ => &CLOSED_PROTOCOL_ERROR,
            }
            .fetch_add(1, Ordering::Relaxed);
            let text = format!("{peer} sent {}: closed with {}", v.why, v.code);
            eprintln!("zerocat: ws: {text}");
            fail(&shared, text);
            send_close(net.as_fd(), &shared, server, v.code);
            let _ = socket::shutdown(net.as_raw_fd(), Shutdown::Both);
            let _ = socket::shutdown(local.as_raw_fd(), Shutdown::Both);
        }
        Err(End::Io(errno)) => {
            fail(&shared, format!("{peer}: {errno}"));
            let _ = socket::shutdown(net.as_raw_fd(), Shutdown::Both);
            let _ = socket::shutdown(local.as_raw_fd(), Shutdown::Both);
        }
    }
    if let Ok(writer) = writer {
        let _ = writer.join();
    }
}

/// Reads an HTTP head: the head, and the bytes read past it.
fn read_head(net: BorrowedFd<'_>) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = vec![0u8; HEAD_MAX];
    let mut got = 0;
    loop {
        if let Some(end) = head_end(&buf[..got]) {
            return Ok((buf[..end].to_vec(), buf[end..got].to_vec()));
        }
        if got == buf.len() {
            return Err("an HTTP head over 16 KiB".into());
        }
        match sys::read(net, &mut buf[got..]) {
            Ok(0) => return Err("the peer closed during the WebSocket upgrade".into()),
            Ok(n) => got += n,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => return Err("the WebSocket upgrade timed out".into()),
            Err(e) => return Err(format!("the WebSocket upgrade failed: {e}")),
        }
    }
}

fn client_upgrade(
    net: BorrowedFd<'_>,
    host: &str,
    port: u16,
    path: &str,
) -> Result<Vec<u8>, String> {
    let mut nonce = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
        .map_err(|_| "no random bytes for the WebSocket key".to_string())?;
    let key = base64(&nonce);
    sys::write_all(net, request(host, port, path, &key).as_bytes())
        .map_err(|(_, e)| format!("sending the WebSocket upgrade: {e}"))?;
    let (head, ahead) = read_head(net)?;
    check_answer(&head, &key)?;
    Ok(ahead)
}

fn server_upgrade(net: BorrowedFd<'_>, path: Option<&str>) -> Result<Vec<u8>, String> {
    let (head, ahead) = read_head(net)?;
    let (response, ok) = answer(&head, path);
    let _ = sys::write_all(net, response.as_bytes());
    if !ok {
        let status = response.lines().next().unwrap_or("").to_string();
        return Err(format!("refused the upgrade: {status}"));
    }
    Ok(ahead)
}

/// Sends a close frame once (with `code`), under the write lock.
fn send_close(net: BorrowedFd<'_>, shared: &Shared, server: bool, code: u16) {
    let _guard = shared.write.lock().unwrap_or_else(|e| e.into_inner());
    if shared.sent_close.swap(true, Ordering::SeqCst) {
        return;
    }
    let _ = write_frame(net, server, OP_CLOSE, &code.to_be_bytes());
}

/// A whole small frame (control frames), masked when we are the client. Hold the lock.
fn write_frame(net: BorrowedFd<'_>, server: bool, opcode: u8, payload: &[u8]) -> Result<(), Errno> {
    let mask = (!server).then(mask_key);
    let mut frame = frame_header(opcode, payload.len() as u64, mask);
    let at = frame.len();
    frame.extend_from_slice(payload);
    if let Some(key) = mask {
        apply_mask(&mut frame[at..], key, 0);
    }
    sys::write_all(net, &frame).map_err(|(_, e)| e)
}

fn mask_key() -> [u8; 4] {
    let mut key = [0u8; 4];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key);
    key
}

enum End {
    /// TCP ended without a close frame.
    PeerGone,
    Fault(Violation),
    Io(Errno),
}

impl From<Violation> for End {
    fn from(v: Violation) -> End {
        End::Fault(v)
    }
}

struct Reader<'a> {
    server: bool,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    pipe: Option<OwnPipe>,
    /// Splice is still worth trying (no EINVAL yet).
    splice: bool,
    /// The opcode of the data message under way (its FIN not seen yet).
    message: Option<u8>,
    utf8: Utf8Check,
    shared: &'a Shared,
}

impl Reader<'_> {
    /// Frames until the peer's close frame (Ok) or the end.
    fn run(&mut self, net: BorrowedFd<'_>, local: BorrowedFd<'_>) -> Result<(), End> {
        loop {
            let header = loop {
                if let Some(h) = parse_header(&self.buf[self.start..self.end], self.server)? {
                    break h;
                }
                self.fill(net)?;
            };
            self.start += header.size;
            match header.opcode {
                OP_CLOSE | OP_PING | OP_PONG => {
                    let payload = self.control_payload(net, &header)?;
                    match header.opcode {
                        OP_CLOSE => return check_close(&payload),
                        OP_PING => {
                            PINGS.fetch_add(1, Ordering::Relaxed);
                            let _guard =
                                self.shared.write.lock().unwrap_or_else(|e| e.into_inner());
                            if !self.shared.sent_close.load(Ordering::SeqCst) {
                                write_frame(net, self.server, OP_PONG, &payload)
                                    .map_err(End::Io)?;
                            }
                        }
                        _ => {}
                    }
                }
                opcode => {
                    let kind = match (opcode, self.message) {
                        (OP_CONTINUATION, Some(kind)) => kind,
                        (OP_CONTINUATION, None) => {
                            return Err(End::Fault(Violation {
                                code: PROTOCOL_ERROR,
                                why: "a continuation frame with no message begun",
                            }))
                        }
                        (_, Some(_)) => {
                            return Err(End::Fault(Violation {
                                code: PROTOCOL_ERROR,
                                why: "a new message before the last one ended",
                            }))
                        }
                        (kind, None) => kind,
                    };
                    self.message = (!header.fin).then_some(kind);
                    self.payload(net, local, &header, kind == OP_TEXT)?;
                    if header.fin && kind == OP_TEXT {
                        self.utf8.end()?;
                    }
                }
            }
        }
    }

    /// More bytes into the buffer (compacted first).
    fn fill(&mut self, net: BorrowedFd<'_>) -> Result<(), End> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        loop {
            match sys::read(net, &mut self.buf[self.end..]) {
                Ok(0) => return Err(End::PeerGone),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(Errno::EINTR) => {}
                Err(e) => return Err(End::Io(e)),
            }
        }
    }

    fn control_payload(&mut self, net: BorrowedFd<'_>, h: &Header) -> Result<Vec<u8>, End> {
        let len = h.len as usize;
        while self.end - self.start < len {
            self.fill(net)?;
        }
        let mut payload = self.buf[self.start..self.start + len].to_vec();
        self.start += len;
        if let Some(key) = h.mask {
            apply_mask(&mut payload, key, 0);
        }
        Ok(payload)
    }

    /// A data frame's payload into the socketpair.
    fn payload(
        &mut self,
        net: BorrowedFd<'_>,
        local: BorrowedFd<'_>,
        h: &Header,
        text: bool,
    ) -> Result<(), End> {
        let mut done = 0u64;
        while done < h.len {
            let left = h.len - done;
            if self.start == self.end && h.mask.is_none() && !text && self.splice {
                match self.splice_in(net, local, left) {
                    Ok(n) => {
                        done += n;
                        continue;
                    }
                    Err(Errno::EINVAL) => self.splice = false,
                    Err(e) => return Err(End::Io(e)),
                }
            }
            if self.start == self.end {
                self.fill(net)?;
            }
            let take = (self.end - self.start).min(usize::try_from(left).unwrap_or(usize::MAX));
            let chunk = &mut self.buf[self.start..self.start + take];
            if let Some(key) = h.mask {
                apply_mask(chunk, key, done);
            }
            if text {
                self.utf8.feed(chunk)?;
            }
            sys::write_all(local, chunk).map_err(|(_, e)| End::Io(e))?;
            COPIED.fetch_add(take as u64, Ordering::Relaxed);
            self.start += take;
            done += take as u64;
        }
        Ok(())
    }

    /// Splices up to `left` payload bytes from the socket through our pipe into the
    /// socketpair: what was moved.
    fn splice_in(
        &mut self,
        net: BorrowedFd<'_>,
        local: BorrowedFd<'_>,
        left: u64,
    ) -> Result<u64, Errno> {
        if self.pipe.is_none() {
            self.pipe = Some(OwnPipe::new()?);
        }
        let pipe = self.pipe.as_ref().expect("just made");
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(pipe.size);
        let n = loop {
            match sys::splice(net, pipe.write.as_fd(), want) {
                Ok(0) => return Err(Errno::ECONNRESET),
                Ok(n) => break n,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        };
        drain_pipe(pipe, local, n)?;
        SPLICED.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n as u64)
    }
}

/// Splices exactly `n` bytes out of `pipe` into `dst`.
fn drain_pipe(pipe: &OwnPipe, dst: BorrowedFd<'_>, mut n: usize) -> Result<(), Errno> {
    while n > 0 {
        match sys::splice(pipe.read.as_fd(), dst, n) {
            Ok(k) => n -= k,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => sys::wait(dst, PollFlags::POLLOUT)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The peer's close frame: a valid one ends the direction (Ok).
fn check_close(payload: &[u8]) -> Result<(), End> {
    let bad = |why| {
        Err(End::Fault(Violation {
            code: PROTOCOL_ERROR,
            why,
        }))
    };
    match payload.len() {
        0 => Ok(()),
        1 => bad("a close frame of one byte"),
        _ => {
            let code = u16::from_be_bytes([payload[0], payload[1]]);
            if !(1000..5000).contains(&code) || matches!(code, 1004..=1006 | 1015..=2999) {
                return bad("a close code that may not be sent");
            }
            if std::str::from_utf8(&payload[2..]).is_err() {
                return Err(End::Fault(Violation {
                    code: INVALID_DATA,
                    why: "a close reason that is not UTF-8",
                }));
            }
            Ok(())
        }
    }
}

struct Writer<'a> {
    server: bool,
    shared: &'a Shared,
}

impl<'a> Writer<'a> {
    fn new(server: bool, shared: &'a Shared) -> Writer<'a> {
        Writer { server, shared }
    }

    /// The socketpair's bytes out as binary frames until its EOF, then a close frame.
    fn run(&self, net: BorrowedFd<'_>, local: BorrowedFd<'_>) {
        let code = match self.frames(net, local) {
            Ok(()) => NORMAL,
            Err(_) => INTERNAL_ERROR,
        };
        send_close(net, self.shared, self.server, code);
        if self.shared.got_close.load(Ordering::SeqCst) {
            let _ = socket::shutdown(net.as_raw_fd(), Shutdown::Both);
        }
    }

    fn frames(&self, net: BorrowedFd<'_>, local: BorrowedFd<'_>) -> Result<(), Errno> {
        let mut buf = vec![0u8; CHUNK];
        // A server's frames are unmasked: splice their payloads where the fds take it.
        let mut pipe = if self.server {
            OwnPipe::new().ok()
        } else {
            None
        };
        loop {
            if let Some(p) = &pipe {
                sys::wait(local, PollFlags::POLLIN)?;
                let queued = sys::queued(local)?;
                if queued > 0 {
                    let n = queued.min(p.size);
                    match self.spliced_frame(net, local, p, n) {
                        Ok(()) => continue,
                        Err(Errno::EINVAL) => pipe = None, // before any byte of it moved
                        Err(e) => return Err(e),
                    }
                    continue;
                }
            }
            let n = match sys::read(local, &mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e),
            };
            let mask = (!self.server).then(mask_key);
            if let Some(key) = mask {
                apply_mask(&mut buf[..n], key, 0);
            }
            let header = frame_header(OP_BINARY, n as u64, mask);
            let _guard = self.shared.write.lock().unwrap_or_else(|e| e.into_inner());
            if self.shared.sent_close.load(Ordering::SeqCst) {
                return Err(Errno::EPIPE);
            }
            sys::write_all(net, &header).map_err(|(_, e)| e)?;
            sys::write_all(net, &buf[..n]).map_err(|(_, e)| e)?;
            COPIED.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// One unmasked frame of `n` bytes queued in the socketpair: the header written, the
    /// payload spliced behind it. EINVAL only before anything was written.
    fn spliced_frame(
        &self,
        net: BorrowedFd<'_>,
        local: BorrowedFd<'_>,
        pipe: &OwnPipe,
        n: usize,
    ) -> Result<(), Errno> {
        // Into the pipe first: a refusal (EINVAL) then costs no header.
        let mut filled = 0;
        while filled < n {
            match sys::splice(local, pipe.write.as_fd(), n - filled) {
                Ok(0) => break,
                Ok(k) => filled += k,
                Err(Errno::EINTR) => {}
                Err(e) if filled == 0 => return Err(e),
                Err(e) => return Err(e),
            }
        }
        let _guard = self.shared.write.lock().unwrap_or_else(|e| e.into_inner());
        if self.shared.sent_close.load(Ordering::SeqCst) {
            return Err(Errno::EPIPE);
        }
        sys::write_all(net, &frame_header(OP_BINARY, filled as u64, None)).map_err(|(_, e)| e)?;
        drain_pipe(pipe, net, filled)?;
        SPLICED.fetch_add(filled as u64, Ordering::Relaxed);
        Ok(())
    }
}

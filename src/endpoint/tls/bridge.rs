//! The TLS record layer in userspace, where the kernel has none (no `tls` ULP, or a suite
//! it lacks): a thread per connection moves the stream between the TCP socket (records,
//! through rustls) and one end of a socketpair (plaintext), whose other end is the
//! endpoint's fd for the engine, which then treats it as any unix socket.
//!
//! Bytes: plaintext rustls decrypted is written to the socketpair before more records are
//! read (one socketpair buffer of backpressure each way, so a slow reader slows the
//! peer); what the engine writes is encrypted and sent before more is read from it. EOF
//! each way is TLS's: the peer's close_notify shuts the socketpair for writing (the
//! engine reads EOF), the engine's EOF sends close_notify and then shuts the TCP socket
//! for writing. A TCP EOF without close_notify, a bad record or an alert is an error,
//! recorded *before* the socketpair is shut, so whoever reads EOF from it finds the reason
//! already set ([`Bridge::error`]).

use std::io::{self, BufRead, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, AddressFamily, Shutdown, SockFlag, SockType};
use rustls::Connection;

use super::FdIo;
use crate::sys;

/// Plaintext read from the engine's end at once: four full records.
const CHUNK: usize = 64 * 1024;
/// The thread needs little stack: rustls keeps its buffers on the heap.
const STACK: usize = 256 * 1024;
/// How long, once the engine's end is gone and our close_notify is out, the peer's own
/// close_notify or FIN is waited for (Apache's lingering close waits 2 s too).
const LINGER: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Shared {
    error: Mutex<Option<String>>,
    /// The engine cut the stream (an error, a signal's cut): no close_notify, a reset.
    cut: AtomicBool,
    /// The engine only writes this stream (a sink of pipe or tee): see [`Bridge::writes_only`].
    writes_only: AtomicBool,
    /// The error is the peer's FIN without close_notify.
    truncated: AtomicBool,
    /// The protocol inside ended the stream itself: see [`InnerEnd`].
    inner_end: AtomicBool,
}

/// Told by the protocol inside the stream (a WebSocket) that the peer ended it in that
/// protocol (its close frame came whole): a FIN without close_notify after that truncates
/// nothing, so it is no error. Servers that drop TCP after their close frame without a
/// close_notify (websocat's `wss-l:`) then end as cleanly as they meant to.
pub struct InnerEnd(Arc<Shared>);

impl InnerEnd {
    pub fn ended(&self) {
        self.0.inner_end.store(true, Ordering::SeqCst);
    }
}

/// Record layers whose [`Bridge`] was dropped unjoined (the relay's sides), joined at the
/// end of the run ([`finish_all`]): the process's exit must not cut short a close_notify
/// or the lingering close (the peer would get a reset, and lose what it had not read).
static LIVE: sys::process::Finishing = sys::process::Finishing::new();

/// Waits (at most `limit` in all) for the record layers of connections that are over.
pub fn finish_all(limit: Duration) {
    LIVE.finish(limit);
}

/// The record layer's thread, and what it reports.
pub struct Bridge {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Bridge {
    pub fn error(&self) -> Option<String> {
        if self.shared.truncated.load(Ordering::SeqCst)
            && self.shared.inner_end.load(Ordering::SeqCst)
        {
            return None;
        }
        self.shared
            .error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The engine is about to close its end because the stream was cut, not ended: the
    /// peer gets a reset, never a close_notify that would make the cut look complete.
    pub fn cut(&self) {
        self.shared.cut.store(true, Ordering::SeqCst);
    }

    /// The engine only writes to this stream and never reads it (a sink of `pipe` or
    /// `tee`): nothing the peer sends is a stream, so once zerocat's close_notify is out,
    /// the peer's TCP FIN ends the connection even without a close_notify of its own (RFC
    /// 5246 §7.2.1: a party may close its side without waiting for the other's
    /// close_notify). Servers that close that way (Python's ssl, many HTTP servers) then
    /// read as the clean end they are; a FIN without close_notify on a stream the engine
    /// reads is still a cut.
    pub fn writes_only(&self) {
        self.shared.writes_only.store(true, Ordering::SeqCst);
    }

    /// The handle the protocol inside marks its peer's end with ([`InnerEnd`]).
    pub fn inner_end(&self) -> InnerEnd {
        InnerEnd(Arc::clone(&self.shared))
    }

    /// Waits (at most `limit`) for the thread to end: it ends once the engine's end is
    /// closed and close_notify is sent. Then the error, if any.
    pub fn join(mut self, limit: Duration) -> Option<String> {
        if let Some(thread) = self.thread.take() {
            sys::process::join_until(thread, Instant::now() + limit);
        }
        self.error()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            LIVE.keep(thread);
        }
    }
}

/// Starts the record layer for an established connection on `net` (the TCP socket); the
/// fd returned is the engine's end of the socketpair (CLOEXEC; O_NONBLOCK if `nonblocking`).
pub fn start(conn: Connection, net: OwnedFd, nonblocking: bool) -> io::Result<(OwnedFd, Bridge)> {
    let (engine, local) = socket::socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    sys::socket::set_nonblocking(local.as_raw_fd())?;
    if nonblocking {
        sys::socket::set_nonblocking(engine.as_raw_fd())?;
    }
    sys::socket::set_nonblocking(net.as_raw_fd())?;
    let shared = Arc::new(Shared::default());
    let mut pump = Pump {
        conn,
        net,
        local,
        shared: shared.clone(),
        ahead: vec![0u8; CHUNK].into_boxed_slice(),
        ahead_at: 0,
        ahead_end: 0,
        peer_closed: false,
        peer_fin: false,
        peer_done: false,
        local_eof: false,
        local_gone: false,
        net_shut: false,
        lingering: None,
    };
    let thread = std::thread::Builder::new()
        .name("zerocat-tls".into())
        .stack_size(STACK)
        .spawn(move || pump.run())?;
    Ok((
        engine,
        Bridge {
            shared,
            thread: Some(thread),
        },
    ))
}

struct Pump {
    conn: Connection,
    net: OwnedFd,
    local: OwnedFd,
    shared: Arc<Shared>,
    /// Records read from the socket ahead of rustls, `ahead_at..ahead_end` not yet taken:
    /// one read of up to 64 KiB instead of rustls' reads of 4-16 KiB.
    ahead: Box<[u8]>,
    ahead_at: usize,
    ahead_end: usize,
    /// The peer's close_notify arrived (or, see `peer_fin`, its FIN).
    peer_closed: bool,
    /// The peer's FIN, without close_notify, ended a direction that carries no stream
    /// ([`Bridge::writes_only`]).
    peer_fin: bool,
    /// ... and every byte before it reached the socketpair, which is shut for writing.
    peer_done: bool,
    /// The engine's end said EOF: close_notify is queued.
    local_eof: bool,
    /// The engine's end is closed: nothing more can be delivered to it.
    local_gone: bool,
    /// close_notify sent and the TCP socket shut for writing.
    net_shut: bool,
    /// Since when the peer's end has been waited for with nothing left to deliver
    /// (see [`LINGER`]).
    lingering: Option<Instant>,
}

impl Pump {
    fn run(&mut self) {
        if let Err(reason) = self.serve() {
            if self.lingering.is_some() {
                // Everything was delivered both ways: how the peer's side ends (a reset,
                // a record we cannot read) no longer concerns the stream.
                return;
            }
            if self.shared.cut.load(Ordering::SeqCst) {
                // Cut by the engine: the peer gets a reset (SO_LINGER 0 at close).
                let _ = socket::setsockopt(
                    &self.net,
                    socket::sockopt::Linger,
                    &nix::libc::linger {
                        l_onoff: 1,
                        l_linger: 0,
                    },
                );
                return;
            }
            *self.shared.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
            // After the reason is set: the engine's next read is an EOF, its next write
            // EPIPE. The alert (if rustls queued one) goes out as far as it can.
            let _ = socket::shutdown(self.local.as_raw_fd(), Shutdown::Both);
            let _ = self.conn.write_tls(&mut FdIo(self.net.as_fd()));
        }
    }

    fn serve(&mut self) -> Result<(), String> {
        let mut buf = vec![0u8; CHUNK];
        // The handshake's last read may have brought the stream's first records.
        self.decrypt()?;
        loop {
            // Records read ahead go into rustls as its plaintext reaches the engine.
            loop {
                self.deliver()?;
                let before = self.ahead_at;
                self.feed()?;
                if self.ahead_at == before {
                    break;
                }
            }
            self.send()?;
            if self.local_eof && !self.conn.wants_write() && !self.net_shut {
                let _ = socket::shutdown(self.net.as_raw_fd(), Shutdown::Write);
                self.net_shut = true;
            }
            // A stream the engine only writes is delivered when the peer answers our
            // close_notify (its own, or its FIN): under TLS 1.3 a listener's refusal of our
            // certificate comes after our handshake ended, and only that answer carries it.
            // A stream the engine reads ends once the engine's end is gone.
            let writes_only = self.shared.writes_only.load(Ordering::SeqCst);
            if self.net_shut && self.peer_done {
                return Ok(());
            }
            // The engine's end is gone, so nothing the peer still sends has a reader; but
            // closing with its bytes unread (a close_notify that follows a WebSocket close
            // frame, records in flight) resets the connection, and a reset throws away what
            // the peer has not read of ours yet (HAZARDS: RST vs FIN). Read and drop until
            // its close_notify or FIN, for at most LINGER.
            let mut wait = PollTimeout::NONE;
            if self.net_shut && self.local_gone && !writes_only {
                let since = *self.lingering.get_or_insert_with(Instant::now);
                let left = LINGER.saturating_sub(since.elapsed());
                if left.is_zero() || self.peer_closed {
                    return Ok(());
                }
                wait = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
            }
            let pending = self.pending();
            let mut net_events = PollFlags::empty();
            if !self.peer_closed && pending == 0 && self.ahead_at == self.ahead_end {
                net_events |= PollFlags::POLLIN;
            }
            if self.conn.wants_write() {
                net_events |= PollFlags::POLLOUT;
            }
            let mut local_events = PollFlags::empty();
            if !self.local_eof && !self.conn.wants_write() {
                local_events |= PollFlags::POLLIN;
            }
            if pending > 0 && !self.local_gone {
                local_events |= PollFlags::POLLOUT;
            }
            // An fd with nothing to wait for stays out: its HUP would wake poll forever.
            // The engine's end is watched for HUP once it said EOF, until it is gone.
            let watch_local = !local_events.is_empty() || (self.local_eof && !self.local_gone);
            let mut fds = Vec::with_capacity(2);
            if !net_events.is_empty() {
                fds.push(PollFd::new(self.net.as_fd(), net_events));
            }
            if watch_local {
                fds.push(PollFd::new(self.local.as_fd(), local_events));
            }
            match poll(&mut fds, wait) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(format!("TLS: poll: {}", io::Error::from(e))),
            }
            let revents = |i: usize| fds[i].revents().unwrap_or(PollFlags::empty());
            let net_ready = if net_events.is_empty() {
                PollFlags::empty()
            } else {
                revents(0)
            };
            let local_ready = if watch_local {
                revents(fds.len() - 1)
            } else {
                PollFlags::empty()
            };
            drop(fds);
            let hup = local_ready.contains(PollFlags::POLLHUP);
            if hup && self.local_eof {
                self.local_gone = true;
            }
            // A HUP before EOF: what the engine wrote before closing is still to be read.
            if (local_events.contains(PollFlags::POLLIN) && !local_ready.is_empty())
                || (hup && !self.local_eof)
            {
                self.take_plaintext(&mut buf)?;
            }
            let readable = PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR;
            if net_events.contains(PollFlags::POLLIN) && net_ready.intersects(readable) {
                self.receive()?;
            }
        }
    }

    /// Plaintext rustls holds for the engine.
    fn pending(&mut self) -> usize {
        match self.conn.reader().fill_buf() {
            Ok(bytes) => bytes.len(),
            Err(_) => 0,
        }
    }

    /// What was read ahead, into rustls while it holds no plaintext for the engine (it
    /// holds at most 16 KiB of it).
    fn feed(&mut self) -> Result<(), String> {
        while self.ahead_at < self.ahead_end && !self.peer_closed && self.pending() == 0 {
            let mut records = &self.ahead[self.ahead_at..self.ahead_end];
            match self.conn.read_tls(&mut records) {
                Ok(0) => break,
                Ok(n) => self.ahead_at += n,
                Err(e) => return Err(format!("TLS: {e}")),
            }
            self.decrypt()?;
        }
        Ok(())
    }

    /// Records from the peer, as far as the socket has them (one read ahead), into rustls.
    fn receive(&mut self) -> Result<(), String> {
        let read = sys::read(self.net.as_fd(), &mut self.ahead).map_err(io::Error::from);
        match read {
            Ok(n) if n > 0 => {
                (self.ahead_at, self.ahead_end) = (0, n);
                self.feed()
            }
            Ok(_) => {
                // TCP EOF: clean only after close_notify (decrypt says which).
                self.decrypt()?;
                if !self.peer_closed {
                    return self.fin_without_close_notify();
                }
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(format!("TLS: receiving: {e}")),
        }
    }

    /// The peer's TCP FIN came without its close_notify: a cut of the stream the engine
    /// reads, unless the engine reads none (or its end is gone) and zerocat's close_notify
    /// is queued (it went out before any FIN that answers it): then the FIN is the peer's end.
    fn fin_without_close_notify(&mut self) -> Result<(), String> {
        let unread = self.local_gone || self.shared.writes_only.load(Ordering::SeqCst);
        if self.local_eof && unread {
            self.peer_fin = true;
            self.peer_closed = true;
            return Ok(());
        }
        self.shared.truncated.store(true, Ordering::SeqCst);
        Err(format!("TLS: {}", super::TRUNCATED))
    }

    /// Processes the records rustls holds: an error is the stream's end (its alert goes
    /// out in `run`); a close_notify marks the peer's side closed.
    fn decrypt(&mut self) -> Result<(), String> {
        let state = self
            .conn
            .process_new_packets()
            .map_err(|e| super::failure(&self.conn, &e))?;
        if state.peer_has_closed() {
            self.peer_closed = true;
        }
        Ok(())
    }

    /// Decrypted plaintext into the socketpair, as far as it takes it; after the peer's
    /// close_notify and its last byte, the socketpair is shut for writing (the engine's EOF).
    fn deliver(&mut self) -> Result<(), String> {
        let mut reader = self.conn.reader();
        loop {
            let bytes = match reader.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The FIN of a direction that carries no stream: nothing more to deliver.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && self.peer_fin => break,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return self.fin_without_close_notify()
                }
                Err(e) => return Err(format!("TLS: {e}")),
            };
            if bytes.is_empty() {
                break; // close_notify: the peer sends no more
            }
            if self.local_gone {
                let n = bytes.len();
                reader.consume(n);
                continue;
            }
            match sys::write(self.local.as_fd(), bytes) {
                Ok(n) => {
                    reader.consume(n);
                }
                Err(Errno::EAGAIN) => return Ok(()),
                // The engine closed its end: what the peer sends has no reader now.
                Err(Errno::EPIPE | Errno::ECONNRESET) => self.local_gone = true,
                Err(e) => return Err(format!("TLS: delivering: {}", io::Error::from(e))),
            }
        }
        if self.peer_closed && !self.peer_done {
            self.peer_done = true;
            let _ = socket::shutdown(self.local.as_raw_fd(), Shutdown::Write);
        }
        Ok(())
    }

    /// What the engine wrote, read once into rustls (encrypted as it goes in); its EOF
    /// queues close_notify.
    fn take_plaintext(&mut self, buf: &mut [u8]) -> Result<(), String> {
        match sys::read(self.local.as_fd(), buf) {
            Ok(0) if self.shared.cut.load(Ordering::SeqCst) => {
                return Err("TLS: the stream was cut".to_string());
            }
            Ok(0) => {
                self.local_eof = true;
                self.conn.send_close_notify();
            }
            Ok(n) => {
                self.conn
                    .writer()
                    .write_all(&buf[..n])
                    .map_err(|e| format!("TLS: {e}"))?;
            }
            Err(Errno::EAGAIN) => {}
            Err(Errno::ECONNRESET) => {
                self.local_eof = true;
                self.local_gone = true;
                self.conn.send_close_notify();
            }
            Err(e) => return Err(format!("TLS: reading the stream: {}", io::Error::from(e))),
        }
        Ok(())
    }

    /// Records rustls holds, into the TCP socket as far as it takes them.
    fn send(&mut self) -> Result<(), String> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut FdIo(self.net.as_fd())) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => {
                    // A peer that refused us says why in an alert it sent before closing:
                    // that reason beats the reset.
                    self.feed()?;
                    if self.ahead_at == self.ahead_end {
                        self.receive()?;
                    }
                    return Err(format!("TLS: sending: {e}"));
                }
            }
        }
        Ok(())
    }
}

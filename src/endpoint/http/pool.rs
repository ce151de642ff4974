//! Keep-alive: connections whose last answer was read to the end of its framing, kept idle
//! for the next request to the same server (HTTP/1.1's persistent connections, RFC 9112
//! §9.3). Where it pays: `copy -r` of many small objects, multipart parts, list pages,
//! `copy -j`'s ranges — each a request that used to be a TCP (or TLS) connection of its own.
//!
//! A connection goes back only whole: its answer's body read exactly to its framing's end
//! (Content-Length or the last chunk, never "until the close"), the server not saying
//! `Connection: close`, no error on it. Anything else is closed, as before. One taken from
//! here may have been closed by the server meanwhile (an idle timeout): a request on it
//! that fails before any byte of an answer is sent again once, on a new connection, by the
//! caller that can send its body again ([`is_unanswered`]).

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::PollFlags;

use super::body::finish_connection;
use super::target::Route;
#[cfg(doc)]
use super::ResponseHead;
use super::{ConnectOpts, Connection};

/// The most idle connections kept, for all servers together (the oldest closed first).
const MAX_IDLE: usize = 64;
/// An idle connection older than this is closed rather than used: servers close theirs
/// after 5 s (Apache) to 60 s (nginx 75 s), and a request on one just closed needs a
/// second connection anyway.
const MAX_IDLE_AGE: Duration = Duration::from_secs(4);

/// What makes two requests' connections interchangeable: the server (scheme, host, port)
/// and the way to it (proxy, tunnel, TLS settings, connector options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
    pub route: Route,
    pub connect: ConnectOpts,
}

struct Idle {
    origin: Arc<Origin>,
    conn: Connection,
    since: Instant,
}

static IDLE: Mutex<Vec<Idle>> = Mutex::new(Vec::new());

/// An idle connection to `origin`, the most recently used first; one the server has closed
/// or sent something on meanwhile (readable while idle) is closed instead.
pub fn take(origin: &Origin) -> Option<Connection> {
    loop {
        let found = {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            let at = idle.iter().rposition(|i| *i.origin == *origin)?;
            idle.remove(at)
        };
        let fresh = found.since.elapsed() < MAX_IDLE_AGE;
        // Idle means silent: readable is the server's FIN, RST, or bytes no request asked.
        let quiet =
            !crate::sys::wait_within(found.conn.fd.as_fd(), PollFlags::POLLIN, Duration::ZERO)
                .unwrap_or(true);
        if fresh && quiet {
            let mut conn = found.conn;
            conn.reused = true;
            return Some(conn);
        }
        finish_connection(found.conn);
    }
}

/// Puts `conn` back after an answer was read exactly to its end, if the connection may
/// carry another request (made for keep-alive, and `keeps_alive`: the answer's
/// [`ResponseHead::keeps_alive`]); else closes it.
pub fn release(conn: Connection, keeps_alive: bool) {
    let Some(origin) = conn.origin.clone() else {
        return finish_connection(conn);
    };
    if !keeps_alive {
        return finish_connection(conn);
    }
    let oldest = {
        let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
        idle.push(Idle {
            origin,
            conn,
            since: Instant::now(),
        });
        (idle.len() > MAX_IDLE).then(|| idle.remove(0))
    };
    if let Some(old) = oldest {
        finish_connection(old.conn);
    }
}

/// Whether `error`, of a request on a connection taken from the pool, came before any byte
/// of an answer (the request could not be written, or the connection ended or was reset
/// at the status line): the server had closed it while idle, and the request may go again
/// on a new connection.
pub fn is_unanswered(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|e| e.downcast_ref::<Unanswered>().is_some())
}

/// An error before any byte of the answer, which [`is_unanswered`] finds.
pub fn unanswered(message: String) -> anyhow::Error {
    anyhow::Error::new(Unanswered(message))
}

/// An error before any byte of an answer, in words: what [`is_unanswered`] finds.
#[derive(Debug)]
pub struct Unanswered(pub String);

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unanswered {}

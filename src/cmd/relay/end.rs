//! How a connection, or one direction of it, ended: a typed value, with the errno kept.
//! Decisions (the exit code, "reset" or "error") read the type; the text is only rendered.

use nix::errno::Errno;

/// A side of the relay: A (the first endpoint given) or B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    /// Side 0 is A, side 1 is B (the index of a connection's sides and specs).
    pub fn of(index: usize) -> Side {
        if index == 0 {
            Side::A
        } else {
            Side::B
        }
    }

    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Side::A => "A",
            Side::B => "B",
        }
    }
}

/// How a connection (or one direction of it) ended. Every end but `Eof` resets the
/// sockets still open (SO_LINGER 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnEnd {
    Eof,
    /// Reading `side` (at `uri`) failed.
    Read {
        side: Side,
        uri: String,
        errno: Errno,
    },
    /// Writing `side` (at `uri`) failed.
    Write {
        side: Side,
        uri: String,
        errno: Errno,
    },
    /// No pipe to be had for the direction from `from` under `--via splice`: the relay's
    /// own resources, no side's fault (ENOBUFS: the pipe budget of `budget` bytes is spent).
    NoPipe {
        from: Side,
        errno: Errno,
        budget: u64,
    },
    /// Connecting to `uri` failed, after every address and retry.
    ConnectFailed {
        uri: String,
        errno: Errno,
    },
    /// The proxy of `socks5=`/`connect=` refused, failed or stalled; its words, as text.
    ProxyFailed(String),
    /// An inherited side (`-`, `fd:N`) could not be used; the reason, as text.
    Unusable(String),
    /// The command of `side` (`exec:`/`sh:`) could not be started; why, as text.
    CannotRun {
        side: Side,
        text: String,
    },
    /// The command of `side` exited non-zero or died by a signal (`words`: how), though
    /// the bytes ended cleanly.
    CommandFailed {
        side: Side,
        uri: String,
        words: String,
    },
    /// The TLS of `side` failed after its handshake: a bad record, an alert, a stream its
    /// peer ended without close_notify (the bytes before it were delivered, but may not
    /// be all there was).
    Tls {
        side: Side,
        uri: String,
        text: String,
    },
    /// Accepted, but still greeting (its PROXY header or TLS handshake not complete) when
    /// the relay stopped accepting (a signal, `--once`): closed, never served. Listed so
    /// no accepted connection goes unreported; not a failure (nothing of its stream was
    /// taken), as a client left in the backlog is not.
    NotServed(String),
    /// Several upstreams, and none to be had: every one down (`--down-for`) or failed
    /// this connection before a byte moved; the last failure's words, if any.
    NoUpstream(String),
    /// Refused by the listener's `allow=`/`deny=`/`allow-file=` (after its PROXY header,
    /// before its TLS handshake): closed before any byte of its stream was read. The
    /// listener's policy, not a failure.
    Refused(String),
    IdleTimeout,
    /// `--linger`: one direction ended, and the other was given that long (nc -q): a clean
    /// end, the sockets closed with FIN.
    Linger,
    /// A datagram session heard nothing either way for `--idle-timeout`: how a UDP
    /// session ends (datagrams have no EOF), so a clean end. Also a stream's idle timeout
    /// where the relay was told that is how it ends (`idle_ends_cleanly`, nc -w).
    Quiet,
    Signal,
}

impl ConnEnd {
    /// The `ended` word of the report: a failed read or write is a "reset" when the peer
    /// reset or closed (ECONNRESET, EPIPE), else an "error".
    pub fn word(&self) -> &'static str {
        match self {
            ConnEnd::Eof => "eof",
            ConnEnd::Read { errno, .. } | ConnEnd::Write { errno, .. } if is_reset(*errno) => {
                "reset"
            }
            ConnEnd::Read { .. }
            | ConnEnd::Write { .. }
            | ConnEnd::NoPipe { .. }
            | ConnEnd::Unusable(_)
            | ConnEnd::CannotRun { .. } => "error",
            ConnEnd::Tls { .. } => "tls-error",
            ConnEnd::NotServed(_) => "not-served",
            ConnEnd::NoUpstream(_) => "no-upstream",
            ConnEnd::Refused(_) => "refused",
            ConnEnd::CommandFailed { .. } => "command-failed",
            ConnEnd::IdleTimeout => "idle-timeout",
            ConnEnd::Linger => "linger",
            ConnEnd::Quiet => "quiet",
            ConnEnd::ConnectFailed { .. } | ConnEnd::ProxyFailed(_) => "connect-failed",
            ConnEnd::Signal => "signal",
        }
    }

    /// The error text of the report, for an end that has one.
    pub fn text(&self) -> Option<String> {
        let err = |errno: &Errno| std::io::Error::from(*errno);
        Some(match self {
            ConnEnd::Read { side, uri, errno } => {
                format!("reading {} ({uri}): {}", side.name(), err(errno))
            }
            ConnEnd::Write { side, uri, errno } => {
                format!("writing {} ({uri}): {}", side.name(), err(errno))
            }
            ConnEnd::NoPipe {
                from,
                errno,
                budget,
            } => {
                let (from, to) = (from.name(), from.other().name());
                if *errno == Errno::ENOBUFS {
                    format!(
                        "no pipe for {from} -> {to}: the relay's pipe budget ({} in all) is spent",
                        crate::units::human_bytes(*budget)
                    )
                } else {
                    format!("no pipe for {from} -> {to}: {}", err(errno))
                }
            }
            ConnEnd::ConnectFailed { uri, errno } => {
                format!("cannot connect to {uri}: {}", err(errno))
            }
            ConnEnd::Unusable(text) => text.clone(),
            ConnEnd::CannotRun { side, text } => format!("{}: {text}", side.name()),
            ConnEnd::CommandFailed { side, uri, words } => {
                format!("{} ({uri}): the command {words}", side.name())
            }
            ConnEnd::ProxyFailed(text) => text.clone(),
            ConnEnd::Tls { side, uri, text } => format!("{} ({uri}): {text}", side.name()),
            ConnEnd::NotServed(text) | ConnEnd::Refused(text) => text.clone(),
            ConnEnd::NoUpstream(last) if last.is_empty() => "every upstream is down".into(),
            ConnEnd::NoUpstream(last) => {
                format!("every upstream is down or failed this connection; the last: {last}")
            }
            ConnEnd::Eof
            | ConnEnd::IdleTimeout
            | ConnEnd::Linger
            | ConnEnd::Quiet
            | ConnEnd::Signal => return None,
        })
    }

    /// It ended as it should: every byte (or datagram) delivered, nothing cut.
    pub fn is_clean(&self) -> bool {
        matches!(
            self,
            ConnEnd::Eof
                | ConnEnd::Linger
                | ConnEnd::Quiet
                | ConnEnd::NotServed(_)
                | ConnEnd::Refused(_)
        )
    }

    /// Writing `side` failed because its reader went away (EPIPE): for stdout, the relay
    /// exits like a pipeline's writer (141) instead of reporting an error.
    pub fn broke_pipe_writing(&self, side: Side) -> bool {
        matches!(self, ConnEnd::Write { side: s, errno: Errno::EPIPE, .. } if *s == side)
    }
}

/// The peer reset the connection, or closed it under our writes.
fn is_reset(errno: Errno) -> bool {
    matches!(errno, Errno::ECONNRESET | Errno::EPIPE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_on_the_side_written_decides_141_and_reads_as_before() {
        let end = ConnEnd::Write {
            side: Side::B,
            uri: "-".into(),
            errno: Errno::EPIPE,
        };
        assert!(end.broke_pipe_writing(Side::B));
        assert!(!end.broke_pipe_writing(Side::A));
        assert_eq!(end.word(), "reset");
        assert_eq!(
            end.text().unwrap(),
            "writing B (-): Broken pipe (os error 32)"
        );
    }

    #[test]
    fn a_reset_while_reading_is_no_broken_pipe() {
        let end = ConnEnd::Read {
            side: Side::B,
            uri: "-".into(),
            errno: Errno::EPIPE,
        };
        assert!(!end.broke_pipe_writing(Side::B));
        let end = ConnEnd::Write {
            side: Side::A,
            uri: "tcp:127.0.0.1:1".into(),
            errno: Errno::ENOSPC,
        };
        assert_eq!(end.word(), "error");
        assert!(!end.broke_pipe_writing(Side::A));
    }

    #[test]
    fn no_pipe_names_the_direction_and_the_budget() {
        let end = ConnEnd::NoPipe {
            from: Side::B,
            errno: Errno::ENOBUFS,
            budget: 32 << 20,
        };
        assert_eq!(end.word(), "error");
        assert_eq!(
            end.text().unwrap(),
            "no pipe for B -> A: the relay's pipe budget (32.0 MiB in all) is spent"
        );
    }
}

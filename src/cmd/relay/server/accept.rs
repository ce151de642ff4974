//! The listener: accepting within `--max-conns`, backing off when out of fds, closing it.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

use nix::errno::Errno;

use super::{
    out_of_fds, Server, ACCEPT_BACKOFF_FIRST, ACCEPT_BACKOFF_MAX, ACCEPT_RESUME, LISTENER,
};
use crate::cmd::relay::end::ConnEnd;
use crate::cmd::relay::report::{ConnReport, FlowReport};
use crate::endpoint::Rejected;
use crate::engine::Record;

impl Server<'_> {
    pub(super) fn poll_listener(&mut self, on: bool) {
        let Some((_, listener)) = self.listener() else {
            return;
        };
        let fd = listener.as_fd().as_raw_fd();
        // epoll refuses EPOLLEXCLUSIVE on an epoll fd (a multiplexed listener's): every
        // loop is woken then, and those that find nothing get EAGAIN.
        let exclusive = self.listener_shared && !listener.is_multiplexed();
        if on && !self.listener_polled {
            if self.poller.add_listener(fd, LISTENER, exclusive).is_ok() {
                self.listener_polled = true;
            }
        } else if !on && self.listener_polled {
            self.poller.delete(fd);
            self.listener_polled = false;
        }
    }

    pub(super) fn stop_accepting(&mut self) {
        self.poll_listener(false);
        self.accepting = false;
        self.close_listener();
        // Connections accepted but still greeting are closed now, and counted.
        let abandoned = match self.listener() {
            Some((_, listener)) => listener.abandon_greetings(),
            None => Vec::new(),
        };
        for rejected in &abandoned {
            self.rejected(rejected, ConnEnd::NotServed(rejected.reason.clone()));
        }
    }

    pub(super) fn at_capacity(&self) -> bool {
        self.cfg.max_conns.is_some_and(|max| self.live() >= max)
    }

    pub(super) fn accept_all(&mut self) {
        loop {
            if !self.accepting || self.accept_paused_until.is_some() {
                return;
            }
            if !self.reserve() {
                // Beyond --max-conns, clients wait in the backlog.
                self.poll_listener(false);
                return;
            }
            let Some((_, listener)) = self.listener() else {
                self.unreserve();
                return;
            };
            let accepted = listener.accept_nonblocking();
            if accepted.is_err() {
                self.unreserve();
            }
            match accepted {
                Ok(accepted) => {
                    self.accept_backoff = ACCEPT_BACKOFF_FIRST;
                    self.start_conn(Some(accepted));
                    if self.cfg.once {
                        self.stop_accepting();
                        return;
                    }
                }
                Err(e) if Rejected::of(&e).is_some() => {
                    let rejected = Rejected::of(&e).expect("checked");
                    // The reason names its stage: the PROXY header, or the TLS handshake;
                    // or the listener's allow/deny list refused the client.
                    let end = if rejected.refused {
                        ConnEnd::Refused(rejected.reason.clone())
                    } else {
                        ConnEnd::Unusable(rejected.reason.clone())
                    };
                    self.rejected(rejected, end);
                }
                Err(e) => match e.raw_os_error().map(Errno::from_raw) {
                    Some(Errno::EAGAIN) => return,
                    Some(errno) if out_of_fds(errno) => {
                        // Out of fds: the client stays in the backlog. Stop asking until
                        // a connection ends or the backoff passes (HAZARDS §2: never spin).
                        eprintln!(
                            "zerocat: cannot accept on {}: {e}; {} connections open, \
                             retrying in {} ms or when one ends",
                            listener.local_addr(),
                            self.active,
                            self.accept_backoff.as_millis()
                        );
                        let until = Instant::now() + self.accept_backoff;
                        self.accept_paused_until = Some(until);
                        self.accept_backoff = (self.accept_backoff * 2).min(ACCEPT_BACKOFF_MAX);
                        self.poll_listener(false);
                        self.poller.timer(until, ACCEPT_RESUME);
                        return;
                    }
                    // Shut down (another worker stopped accepting): not listening now.
                    Some(Errno::EINVAL) => {
                        self.stop_accepting();
                        return;
                    }
                    // accept(2): errors of the pending connection; treat like EAGAIN, retry.
                    _ => continue,
                },
            }
        }
    }
}

impl Server<'_> {
    /// A connection closed for its PROXY header (missing, malformed, late) or its TLS
    /// handshake (failed, stalled), or refused by the listener's allow/deny list: never
    /// relayed, but said (unless -q) and counted (a refusal as `refused`, the others as
    /// connections that did not end cleanly).
    fn rejected(&mut self, rejected: &Rejected, end: ConnEnd) {
        // Rate-limited as a failed connection's line: a flood of junk is a few lines.
        if self.opts.verbose {
            eprintln!(
                "zerocat: {}",
                crate::report::printable(&rejected.to_string())
            );
        } else if !self.opts.quiet {
            if let Ok(mut lines) = self.shared.failed_lines.lock() {
                for line in lines.admit(rejected.to_string(), Instant::now()) {
                    eprintln!("zerocat: {}", crate::report::printable(&line));
                }
            }
        }
        let flow = || FlowReport {
            record: Record::default(),
            bytes: 0,
            switches: 0,
            ended: end.clone(),
            undelivered: 0,
        };
        let report = ConnReport {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            seq: self.shared.ended.fetch_add(1, Ordering::Relaxed),
            peer: rejected.peer.clone(),
            upstream: String::new(),
            upstream_uri: None,
            seconds: 0.0,
            flows: [flow(), flow()],
            end: end.clone(),
            mptcp: [None, None],
            children: [None, None],
            datagrams: None,
            tls: [None, None],
        };
        self.ended(report);
    }
}

//! `--log PATH` (or `-` for stderr): one JSON line per connection, queued as the connection
//! ends and written by a thread of its own (one write a line, no buffer of ours). The field
//! names are the man page's (`--log`).
//!
//! The first line (`"event":"start"`) is written before the relay starts, so a log that
//! cannot be written (`/dev/full`, a full disk) is an error before anything is served,
//! not a line lost later. A write that fails later stops the log: said once on stderr
//! at once, and again in the final report (`log_error`).
//!
//! The event loops never wait for the log: a FIFO whose reader stalls (or a slow disk)
//! fills the queue ([`QUEUED_MAX`] lines), and the lines that find it full are dropped and
//! counted, said once on stderr and in the final report. At the end the writer gets
//! [`FLUSH_WAIT`] to write what is queued; what it could not is counted as dropped.

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::report::ConnReport;
use crate::report::JsonObject;

/// Lines waiting for the writer at most (a line is ~600 bytes: ~10 MB).
const QUEUED_MAX: usize = 16_384;
/// How long the end of the run waits for the writer to empty the queue.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

enum Out {
    Stderr,
    File(File),
}

impl Out {
    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        match self {
            Out::Stderr => {
                let mut err = std::io::stderr().lock();
                err.write_all(&bytes)?;
                err.flush()
            }
            Out::File(f) => {
                // Whole or not at all: a write cut short (a full disk takes what fits, then
                // says ENOSPC) would leave a torn line that is not JSON, so a regular file
                // is cut back to where the line began.
                let before = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
                let written = f.write_all(&bytes).and_then(|()| f.flush());
                if let (Err(_), Some(len)) = (&written, before) {
                    let _ = f.set_len(len);
                }
                written
            }
        }
    }
}

/// What the writer and the loops share.
#[derive(Default)]
struct State {
    /// The first write error; nothing more is written after it.
    error: Mutex<Option<String>>,
    /// Lines queued and not yet written.
    queued: AtomicU64,
    /// Lines dropped: the queue was full.
    dropped: AtomicU64,
}

pub struct ConnLog {
    /// As given (`-` or the path), for messages.
    name: String,
    queue: Option<SyncSender<String>>,
    writer: Option<JoinHandle<()>>,
    state: Arc<State>,
}

/// The log's file, opened for appending (created 0644 if missing); `-` is stderr. As pipe
/// opens a sink: a FIFO waits for its reader, and SIGINT/SIGTERM end that wait (std's open
/// would retry the EINTR for ever).
fn open_out(path: &str) -> anyhow::Result<Out> {
    if path == "-" {
        return Ok(Out::Stderr);
    }
    let flags = OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT | OFlag::O_CLOEXEC;
    let opened = crate::sys::open_interruptible(
        None,
        std::path::Path::new(path),
        flags,
        Mode::from_bits_truncate(0o644),
    );
    match opened {
        Ok(fd) => Ok(Out::File(std::fs::File::from(fd))),
        Err(Errno::EINTR) => Err(crate::exit::Interrupted(format!(
            "--log {path}: interrupted while waiting for the log's reader"
        ))
        .into()),
        Err(e) => {
            Err(std::io::Error::from(e)).with_context(|| format!("--log {path}: cannot open"))
        }
    }
}

impl ConnLog {
    /// Opens `path` for appending (created 0644 if missing; a FIFO waits for its reader),
    /// writes the start line, and starts the writer. A file log is reopened at SIGHUP
    /// (logrotate's postrotate): the next line goes to the file now at `path`.
    pub fn open(path: &str, a: &str, b: &str) -> anyhow::Result<ConnLog> {
        let mut out = open_out(path)?;
        if path != "-" {
            crate::sys::process::reopen_on_hangup();
        }
        let mut o = JsonObject::new();
        o.str("time", &now_rfc3339())
            .str("event", "start")
            .str("a", a)
            .str("b", b)
            .num("pid", u64::from(std::process::id()));
        out.write_line(&o.finish())
            .with_context(|| format!("--log {path}: cannot write"))?;
        let (queue, lines) = mpsc::sync_channel::<String>(QUEUED_MAX);
        let state = Arc::new(State::default());
        let (name, shared) = (path.to_string(), Arc::clone(&state));
        let writer = std::thread::Builder::new()
            .name("zerocat-log".into())
            .spawn(move || {
                for line in lines {
                    if crate::sys::process::take_hangup() {
                        match open_out(&name) {
                            Ok(reopened) => out = reopened,
                            Err(e) => eprintln!(
                                "zerocat: {}",
                                crate::report::errno_names(&format!(
                                    "{e:#}; SIGHUP: the log stays where it was"
                                ))
                            ),
                        }
                    }
                    let written = out.write_line(&line);
                    shared.queued.fetch_sub(1, Ordering::Relaxed);
                    if let Err(e) = written {
                        let text = format!("--log {name}: {e}; no more lines are written");
                        eprintln!("zerocat: {}", crate::report::errno_names(&text));
                        *shared.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
                        return;
                    }
                }
            })
            .context("--log: cannot start its writer thread")?;
        Ok(ConnLog {
            name: path.to_string(),
            queue: Some(queue),
            writer: Some(writer),
            state,
        })
    }

    /// Queues the line of a connection that ended, without waiting: a full queue drops it
    /// (said on stderr the first time).
    pub fn connection(&mut self, report: &ConnReport, worker: usize) {
        let Some(queue) = &self.queue else {
            return;
        };
        let line = crate::report::errno_names(&report.log_line(&now_rfc3339(), worker));
        self.state.queued.fetch_add(1, Ordering::Relaxed);
        match queue.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.state.queued.fetch_sub(1, Ordering::Relaxed);
                if self.state.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!(
                        "zerocat: --log {}: the log is not keeping up; lines are dropped \
                         (counted in the report)",
                        self.name
                    );
                }
            }
            // The writer stopped on an error, already said.
            Err(TrySendError::Disconnected(_)) => {
                self.state.queued.fetch_sub(1, Ordering::Relaxed);
                self.queue = None;
            }
        }
    }

    /// The end of the run: the writer gets [`FLUSH_WAIT`] to write what is queued. Returns
    /// what went wrong, for the report: the write error, and the lines not written.
    pub fn finish(mut self) -> Option<String> {
        drop(self.queue.take());
        let deadline = Instant::now() + FLUSH_WAIT;
        if let Some(writer) = self.writer.take() {
            // One blocked on a stalled reader ends with the process.
            crate::sys::process::join_until(writer, deadline);
        }
        let error = self
            .state
            .error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let lost = self.state.dropped.load(Ordering::Relaxed)
            + if error.is_some() {
                0
            } else {
                self.state.queued.load(Ordering::Relaxed)
            };
        let dropped = (lost > 0).then(|| {
            format!(
                "--log {}: {lost} line{} not written (the log did not keep up)",
                self.name,
                if lost == 1 { "" } else { "s" }
            )
        });
        match (error, dropped) {
            (Some(e), Some(d)) => Some(format!("{e}; {d}")),
            (e, d) => e.or(d),
        }
    }
}

/// Now, UTC, to the millisecond: `2026-11-23T16:34:40.123Z`.
fn now_rfc3339() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(since.as_secs(), since.subsec_millis())
}

fn rfc3339(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = crate::units::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_rfc3339_to_the_millisecond() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_451_680, 123), "2026-11-23T16:34:40.123Z");
        assert_eq!(rfc3339(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }
}

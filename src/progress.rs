//! Progress: the hot loops only bump an atomic counter of bytes delivered ([`Meter`]);
//! a thread of its own reads it a few times a second and draws a bar ([`Progress`]), and
//! prints one line on SIGUSR1 (dd's habit) whether a bar is shown or not.
//!
//! A command calls [`meter`] for its counter (it carries the `--limit` pacer), hands the
//! counter to the engine, and brackets the transfer with [`start`] (or [`Watch`] for more:
//! a pipe sink whose queue is not delivered yet, a status text) and
//! [`ProgressGuard::finish`] before printing its report:
//!
//! ```ignore
//! let meter = progress::meter(opts);
//! let progress = progress::start(opts, Some(total), &meter);
//! let (record, failure) = engine::transfer(&ends, &chain, middle.as_ref(), &meter);
//! progress.finish();
//! opts.print_report(...);
//! ```

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::limit::Pacer;
use crate::report::{amount, human_bytes};
use crate::Options;

/// How often the bar is redrawn (and SIGUSR1 looked for).
const TICK: Duration = Duration::from_millis(200);

/// Bytes delivered to the sink so far, and the `--limit` pacer if any.
#[derive(Debug, Default)]
pub struct Meter {
    delivered: AtomicU64,
    pacer: Option<Pacer>,
}

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    /// A meter that holds the transfer to `rate` bytes per second (none: unlimited).
    pub fn limited(rate: Option<u64>) -> Meter {
        Meter {
            delivered: AtomicU64::new(0),
            pacer: rate.map(Pacer::new),
        }
    }

    pub fn add(&self, n: u64) {
        self.delivered.fetch_add(n, Ordering::Relaxed);
    }

    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// The length the next syscall may ask for: `len` when unlimited; under `--limit`,
    /// a slice of the rate, after sleeping while the transfer is ahead of it. Every path
    /// calls this before its syscall (and before its interruption check, since it may
    /// sleep), so pacing keeps the path that was chosen.
    pub fn chunk(&self, len: usize) -> usize {
        match &self.pacer {
            None => len,
            Some(pacer) => pacer.next_chunk(self.delivered(), len),
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.pacer.as_ref().map(Pacer::rate)
    }
}

/// The counter for one transfer (one direction of a relay), paced by `--limit`.
pub fn meter(opts: &Options) -> Arc<Meter> {
    Arc::new(Meter::limited(opts.limit))
}

/// One look at a transfer, taken by the drawing thread.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Bytes delivered (minus what still sits in a pipe sink).
    pub bytes: u64,
    pub total: Option<u64>,
    pub elapsed: Duration,
    /// A command's own words: "3 connections open", "12/40 files".
    pub status: Option<String>,
}

impl Snapshot {
    /// "zerocat: 512 MiB in 1.20 s (426 MiB/s), 50% of 1.00 GiB": the SIGUSR1 line.
    pub fn line(&self) -> String {
        let mut s = format!(
            "zerocat: {}",
            amount(self.bytes, self.elapsed.as_secs_f64())
        );
        if let Some(total) = self.total.filter(|&t| t > 0) {
            let percent = self.bytes as f64 * 100.0 / total as f64;
            s.push_str(&format!(", {percent:.0}% of {}", human_bytes(total)));
        }
        if let Some(status) = &self.status {
            s.push_str(", ");
            s.push_str(status);
        }
        s
    }
}

/// What draws progress. Called from the drawing thread only.
pub trait Progress: Send {
    fn update(&mut self, now: &Snapshot);
    /// Prints one line without garbling what is drawn.
    fn println(&mut self, line: &str);
    /// Takes the bar off the screen, so the report line comes next, alone.
    fn finish(&mut self);
}

/// No bar: `-q`, `--no-progress`, or stderr is not a terminal. SIGUSR1 still prints.
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&mut self, _: &Snapshot) {}
    fn println(&mut self, line: &str) {
        eprintln!("{line}");
    }
    fn finish(&mut self) {}
}

/// An indicatif bar on stderr: bytes, rate, elapsed, and size and ETA when the total is
/// known; a counter otherwise.
pub struct Bar {
    bar: ProgressBar,
}

impl Bar {
    pub fn new(total: Option<u64>) -> Bar {
        // A TermLike target draws also when stderr is not a terminal (`--progress`
        // forces it); indicatif's plain stderr target would hide itself there.
        let target = ProgressDrawTarget::term_like_with_hz(Box::new(console::Term::stderr()), 10);
        let (bar, template) = match total {
            Some(total) => (
                ProgressBar::with_draw_target(Some(total), target),
                "zerocat: {bytes} / {total_bytes} [{bar:30}] {binary_bytes_per_sec} {elapsed} ETA {eta} {msg}",
            ),
            None => (
                ProgressBar::with_draw_target(None, target),
                "zerocat: {spinner} {bytes} {binary_bytes_per_sec} {elapsed} {msg}",
            ),
        };
        let style = ProgressStyle::with_template(template)
            .expect("the template is valid")
            .progress_chars("=> ");
        bar.set_style(style);
        Bar { bar }
    }
}

impl Progress for Bar {
    fn update(&mut self, now: &Snapshot) {
        if let Some(status) = &now.status {
            self.bar.set_message(status.clone());
        }
        self.bar.set_position(now.bytes);
        if now.total.is_none() {
            self.bar.tick();
        }
    }
    fn println(&mut self, line: &str) {
        self.bar.suspend(|| eprintln!("{line}"));
    }
    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

type StatusFn = Box<dyn Fn() -> String + Send>;

/// What the drawing thread watches; `start` launches it.
pub struct Watch {
    meter: Arc<Meter>,
    total: Option<u64>,
    sink_pipe: Option<OwnedFd>,
    status: Option<StatusFn>,
}

impl Watch {
    pub fn new(meter: &Arc<Meter>) -> Watch {
        Watch {
            meter: Arc::clone(meter),
            total: None,
            sink_pipe: None,
            status: None,
        }
    }

    /// The bytes the transfer will move, when known: ETA and percentage.
    pub fn total(mut self, total: Option<u64>) -> Watch {
        self.total = total;
        self
    }

    /// The sink is a pipe: what still sits in it (FIONREAD) is not delivered yet, and
    /// is subtracted. The fd is duplicated for the drawing thread and closed by
    /// `finish`, so finish before expecting the reader to see EOF.
    pub fn sink_pipe(mut self, fd: BorrowedFd<'_>) -> Watch {
        self.sink_pipe = fd.try_clone_to_owned().ok();
        self
    }

    /// A command's own status text, asked for at each tick (relay: connections open).
    pub fn status(mut self, status: impl Fn() -> String + Send + 'static) -> Watch {
        self.status = Some(Box::new(status));
        self
    }

    /// Starts the drawing thread: a bar when `opts.progress`, otherwise only the SIGUSR1
    /// watcher.
    pub fn start(self, opts: &Options) -> ProgressGuard {
        let display: Box<dyn Progress> = if opts.progress {
            Box::new(Bar::new(self.total))
        } else {
            Box::new(NoProgress)
        };
        self.start_with(display)
    }

    /// Starts the drawing thread with any display.
    pub fn start_with(self, mut display: Box<dyn Progress>) -> ProgressGuard {
        let (stop, stopped) = mpsc::channel::<()>();
        let started = Instant::now();
        crate::process::take_progress_request(); // a request from before we started is stale
        let thread = std::thread::Builder::new()
            .name("zerocat-progress".into())
            .spawn(move || loop {
                let done = !matches!(stopped.recv_timeout(TICK), Err(RecvTimeoutError::Timeout));
                if done {
                    display.finish();
                    return;
                }
                let now = self.snapshot(started);
                if crate::process::take_progress_request() {
                    display.println(&now.line());
                }
                display.update(&now);
            })
            .ok();
        ProgressGuard {
            stop: Some(stop),
            thread,
        }
    }

    fn snapshot(&self, started: Instant) -> Snapshot {
        let mut bytes = self.meter.delivered();
        if let Some(fd) = &self.sink_pipe {
            // SAFETY: the fd is ours (a dup) and open for as long as self lives.
            let fd = unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) };
            let queued = crate::engine::sys::queued(fd).unwrap_or(0) as u64;
            bytes = bytes.saturating_sub(queued);
        }
        Snapshot {
            bytes,
            total: self.total,
            elapsed: started.elapsed(),
            status: self.status.as_ref().map(|f| f()),
        }
    }
}

/// The running drawing thread. `finish` (or drop) stops it and clears the bar.
pub struct ProgressGuard {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressGuard {
    /// Stops drawing and clears the bar: call before printing the report.
    pub fn finish(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        drop(self.stop.take()); // wakes the thread at once
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Progress for one transfer of `total` bytes (if known) counted by `meter`.
pub fn start(opts: &Options, total: Option<u64>, meter: &Arc<Meter>) -> ProgressGuard {
    Watch::new(meter).total(total).start(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sigusr1_line_says_bytes_rate_and_share() {
        let snap = Snapshot {
            bytes: 512 << 20,
            total: Some(1 << 30),
            elapsed: Duration::from_secs(2),
            status: Some("1 connection open".into()),
        };
        assert_eq!(
            snap.line(),
            "zerocat: 512 MiB in 2.00 s (256 MiB/s), 50% of 1.00 GiB, 1 connection open"
        );
    }

    #[test]
    fn a_pipe_sink_counts_only_what_left_the_pipe() {
        let (r, w) = nix::unistd::pipe().unwrap();
        nix::unistd::write(&w, &[0u8; 100]).unwrap();
        let meter = Arc::new(Meter::new());
        meter.add(300);
        let watch = Watch::new(&meter).sink_pipe(std::os::fd::AsFd::as_fd(&w));
        assert_eq!(watch.snapshot(Instant::now()).bytes, 200);
        drop(r);
    }
}

//! Progress: the hot loops only bump an atomic counter of bytes delivered ([`Meter`]);
//! a thread of its own reads it a few times a second and draws a bar ([`Progress`]), and
//! prints one line on SIGUSR1 (dd's habit) whether a bar is shown or not.
//!
//! A command calls [`meter`] for its counter (it carries the `--limit` pacer), hands the
//! counter to the engine, and brackets the transfer with [`Watch::start`] (the watch also
//! takes a total, a pipe sink whose queue is not delivered yet, a status text) and
//! [`ProgressGuard::finish`] before printing its report:
//!
//! ```ignore
//! let meter = progress::meter(opts);
//! let progress = Watch::new(&meter).total(Some(total)).start(opts);
//! let (record, failure) = engine::transfer(&ends, &chain, middle.as_ref(), &meter);
//! progress.finish();
//! opts.print_report(...);
//! ```

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::meter::Meter;
use crate::options::{Options, PvStyle};
use crate::units::{amount, human_bytes};

/// How often the bar is redrawn (and SIGUSR1 looked for).
const TICK: Duration = Duration::from_millis(200);

/// The counter for one transfer (one direction of a relay), paced by `--limit`.
pub fn meter(opts: &Options) -> Arc<Meter> {
    Arc::new(Meter::limited(opts.limit))
}

/// One look at a transfer, taken by the drawing thread.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Bytes delivered (minus what still sits in a pipe sink).
    pub bytes: u64,
    /// Bytes written, what still sits in a pipe sink included (pv counts these).
    pub written: u64,
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
    /// The transfer's last look, just before `finish` (a display that ends with the
    /// final figures draws them).
    fn last(&mut self, _now: &Snapshot) {}
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

/// Whether to draw the bar when neither `--progress` nor `--no-progress` says: stderr is
/// a terminal, the data does not go to that same terminal (`writes_stdout` and stdout is
/// it: zerocat as cat or nc, the bar would be drawn between the data's lines), and
/// zerocat is in the terminal's foreground process group (pv's rule: a job sent to the
/// background does not draw over the shell).
pub fn draw_by_default(writes_stdout: bool) -> bool {
    use nix::sys::stat::fstat;
    use nix::unistd::{getpgrp, isatty, tcgetpgrp};
    if !isatty(2).unwrap_or(false) {
        return false;
    }
    let same_terminal = writes_stdout
        && isatty(1).unwrap_or(false)
        && matches!((fstat(1), fstat(2)), (Ok(out), Ok(err)) if out.st_rdev == err.st_rdev);
    if same_terminal {
        return false;
    }
    // SAFETY: fd 2 is open for the whole run (reserved at start-up); only borrowed.
    let stderr = unsafe { BorrowedFd::borrow_raw(2) };
    tcgetpgrp(stderr).map_or(true, |pgrp| pgrp == getpgrp())
}

/// How often `--progress` prints its line when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_millis(500);

/// `--progress` with stderr not a terminal (a log file, a pipe): the SIGUSR1 line every
/// [`PLAIN_EVERY`], each whole and on its own line (pv's `-n`/`-f` into a file do the
/// same), never a bar's carriage returns and escapes.
#[derive(Default)]
pub struct PlainLines {
    /// Lines printed so far: the next is due at (printed + 1) × [`PLAIN_EVERY`] of the run.
    printed: u32,
}

impl Progress for PlainLines {
    fn update(&mut self, now: &Snapshot) {
        if now.elapsed >= PLAIN_EVERY * (self.printed + 1) {
            self.printed = (now.elapsed.as_millis() / PLAIN_EVERY.as_millis()) as u32;
            eprintln!("{}", now.line());
        }
    }
    fn println(&mut self, line: &str) {
        eprintln!("{line}");
    }
    fn finish(&mut self) {}
}

/// pv's display, for zerocat answering as `pv`: pv 1.6's fields and their formats on one
/// line redrawn with `\r` every interval and ended with a newline (`-n`: a number a line),
/// so what scripts and eyes know from pv reads the same.
pub struct PvDisplay {
    style: PvStyle,
    columns: usize,
    /// Elapsed time at which the next line is due.
    next: Duration,
    /// Elapsed time and bytes at the last line drawn: the current rate's interval.
    last: (Duration, u64),
    /// Where the `<=>` of a transfer of unknown size is, and which way it moves.
    bounce: (usize, bool),
    /// A line was drawn (the end then adds the newline).
    drawn: bool,
    /// The last snapshot, drawn once more at the end.
    latest: Option<Snapshot>,
    /// Lines drawn so far.
    lines: u64,
}

impl PvDisplay {
    pub fn new(style: PvStyle) -> PvDisplay {
        let columns = style
            .width
            .or_else(|| console::Term::stderr().size_checked().map(|(_, c)| c))
            .unwrap_or(80) as usize;
        let mut style = style;
        // -n shows its number only; otherwise no field asked for means pv's default set.
        let asked = [
            style.progress,
            style.timer,
            style.eta,
            style.rate,
            style.average_rate,
            style.bytes,
        ];
        if !style.numeric && !asked.contains(&true) {
            (
                style.progress,
                style.timer,
                style.eta,
                style.rate,
                style.bytes,
            ) = (true, true, true, true, true);
        }
        PvDisplay {
            next: style.interval,
            style,
            columns,
            last: (Duration::ZERO, 0),
            bounce: (0, true),
            drawn: false,
            latest: None,
            lines: 0,
        }
    }

    /// pv's `-n` line: elapsed seconds (`-t`), then bytes (`-b`) or the percentage.
    fn numeric_line(&self, now: &Snapshot) -> String {
        let mut line = String::new();
        if self.style.timer {
            line.push_str(&format!("{:.4} ", now.elapsed.as_secs_f64()));
        }
        match now.total.filter(|&t| t > 0) {
            _ if self.style.bytes => line.push_str(&format!("{}", now.bytes)),
            Some(total) => line.push_str(&format!("{}", now.bytes * 100 / total)),
            // pv with no size: a count that climbs by 2 a line and comes back (its bar's
            // bounce), never a share of anything.
            None => {
                let step = (self.lines * 2 + 2) % 200;
                let shown = if step > 100 { 200 - step } else { step };
                line.push_str(&format!("{shown}"));
            }
        }
        line
    }

    /// pv's one-line display; `done` blanks the ETA as pv does at the end.
    fn line(&mut self, now: &Snapshot, done: bool) -> String {
        let secs = now.elapsed.as_secs_f64();
        let interval = (now.elapsed.saturating_sub(self.last.0)).as_secs_f64();
        let current = if interval > 0.0 {
            now.bytes.saturating_sub(self.last.1) as f64 / interval
        } else if secs > 0.0 {
            now.bytes as f64 / secs
        } else {
            0.0
        };
        let average = if secs > 0.0 {
            now.bytes as f64 / secs
        } else {
            0.0
        };
        let mut head = Vec::new();
        if let Some(name) = &self.style.name {
            head.push(format!("{name:>9}:"));
        }
        let lines = self.style.lines.is_some();
        if self.style.bytes {
            head.push(pv_amount(now.bytes as f64, "", lines));
        }
        if self.style.timer {
            head.push(pv_clock(secs));
        }
        if self.style.rate {
            head.push(format!("[{}]", pv_amount(current, "/s", lines)));
        }
        if self.style.average_rate {
            head.push(format!("[{}]", pv_amount(average, "/s", lines)));
        }
        let total = now.total.filter(|&t| t > 0);
        let mut tail = Vec::new();
        if self.style.eta && total.is_some() {
            let eta = match total {
                Some(total) if !done && average > 0.0 => {
                    format!(
                        "ETA {}",
                        pv_clock(total.saturating_sub(now.bytes) as f64 / average)
                    )
                }
                _ if done => String::new(),
                _ => "ETA ?:??:??".to_string(),
            };
            tail.push(format!("{eta:11}"));
        }
        let mut parts = head;
        if self.style.progress {
            let used: usize = parts
                .iter()
                .chain(&tail)
                .map(|p| p.chars().count() + 1)
                .sum();
            let percent = total.map(|t| format!(" {:>3}%", (now.bytes * 100 / t).min(100)));
            let room = self
                .columns
                .saturating_sub(used + 2 + percent.as_ref().map_or(0, String::len))
                .max(3);
            let bar = match total {
                Some(t) => {
                    let filled =
                        ((now.bytes.min(t) as f64 / t as f64) * (room - 1) as f64) as usize;
                    format!("{}>{}", "=".repeat(filled), " ".repeat(room - 1 - filled))
                }
                None => {
                    let (at, forward) = self.bounce;
                    let max = room.saturating_sub(3);
                    if !done {
                        self.bounce = match (forward, at) {
                            (true, a) if a >= max => (a.saturating_sub(1), false),
                            (true, a) => (a + 1, true),
                            (false, 0) => (1.min(max), true),
                            (false, a) => (a - 1, false),
                        };
                    }
                    format!("{}<=>{}", " ".repeat(at), " ".repeat(max - at.min(max)))
                }
            };
            parts.push(format!("[{bar}]{}", percent.unwrap_or_default()));
        }
        parts.extend(tail);
        self.last = (now.elapsed, now.bytes);
        parts.join(" ")
    }

    fn draw(&mut self, now: &Snapshot, done: bool) {
        use std::io::Write as _;
        let text = if self.style.numeric {
            format!("{}\n", self.numeric_line(now))
        } else {
            format!("{}\r", self.line(now, done))
        };
        let _ = std::io::stderr().write_all(text.as_bytes());
        self.drawn = true;
        self.lines += 1;
    }
}

/// pv's amounts: three significant figures in four columns, binary prefixes
/// (`3.00 B`, `1022 B/s`, ` 117KiB/s`, `34.9MiB`); lines (`-l`) in powers of 1000 and
/// without a unit (`3.00 `, `1.50k`, `[23.8k/s]`).
fn pv_amount(value: f64, per: &str, lines: bool) -> String {
    const PREFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    const DECIMAL: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    let step = if lines { 1000.0 } else { 1024.0 };
    let (mut value, mut i) = (value, 0);
    while value >= step && i + 1 < PREFIXES.len() {
        value /= step;
        i += 1;
    }
    let number = if value < 9.995 {
        format!("{value:4.2}")
    } else if value < 99.95 {
        format!("{value:4.1}")
    } else {
        format!("{value:4.0}")
    };
    match (i, lines) {
        (0, false) => format!("{number} B{per}"),
        (_, false) => format!("{number}{}B{per}", PREFIXES[i]),
        (0, true) => format!("{number} {per}"),
        (_, true) => format!("{number}{}{per}", DECIMAL[i]),
    }
}

/// A snapshot as pv counts: bytes written, those still in a pipe sink included; lines
/// passed, under `-l`.
fn pv_view(now: &Snapshot, style: &PvStyle) -> Snapshot {
    let counted = style
        .lines
        .as_ref()
        .map(|lines| lines.load(std::sync::atomic::Ordering::Relaxed));
    Snapshot {
        bytes: counted.unwrap_or(now.written),
        ..now.clone()
    }
}

/// pv's clock: `H:MM:SS`.
fn pv_clock(seconds: f64) -> String {
    let s = seconds.max(0.0) as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

impl Progress for PvDisplay {
    fn update(&mut self, now: &Snapshot) {
        let now = &pv_view(now, &self.style);
        self.latest = Some(now.clone());
        if self.style.wait && now.bytes == 0 {
            self.next = now.elapsed + self.style.interval;
            return;
        }
        if now.elapsed >= self.next {
            self.next = now.elapsed + self.style.interval;
            self.draw(now, false);
        }
    }
    fn last(&mut self, now: &Snapshot) {
        self.latest = Some(pv_view(now, &self.style));
    }
    fn println(&mut self, line: &str) {
        let clear = if self.drawn && !self.style.numeric {
            "\n"
        } else {
            ""
        };
        eprintln!("{clear}{line}");
    }
    fn finish(&mut self) {
        let Some(now) = self.latest.take() else {
            return;
        };
        if self.style.wait && now.bytes == 0 {
            return;
        }
        self.draw(&now, true);
        if !self.style.numeric {
            eprintln!();
        }
    }
}

/// Columns the bar leaves free at the end of the line: the terminal echoes a Ctrl-C as
/// `^C` after it, and a line that wrapped there could no longer be cleared (the bar
/// stayed above the report).
const ECHO_ROOM: u16 = 3;

/// The narrowest `{wide_bar}` worth drawing; below it the bar is dropped.
const MIN_BAR: usize = 10;

/// The widest a field that changes as it runs is drawn: a rate ("1023.99 MiB/s"), an
/// amount ("1023.99 KiB"), a compact duration ("59s", "12m").
const RATE_WIDTH: usize = 13;
const BYTES_WIDTH: usize = 11;
const TIME_WIDTH: usize = 4;

/// A field of the bar's line: its template text, and its width when drawn at its widest
/// (with its separating space).
struct Field {
    template: &'static str,
    width: usize,
}

/// The fields of a bar with a total, in the order drawn, each with its rank: when the
/// terminal is too narrow for all of them, the lowest ranked go first (pv drops fields
/// too): the elapsed time, then the total, the bar, the ETA, the rate; the percentage
/// and the bytes stay.
fn fields_with_total(total: u64) -> [(Field, u8); 7] {
    let total = indicatif::HumanBytes(total).to_string().len();
    [
        (field("{percent:>3}%", 4), u8::MAX),
        (field("{bytes}", BYTES_WIDTH), u8::MAX),
        (field("/ {total_bytes}", 2 + total), 2),
        (field("[{wide_bar}]", 2 + MIN_BAR), 3),
        (field("{binary_bytes_per_sec}", RATE_WIDTH), 5),
        (field("{elapsed}", TIME_WIDTH), 1),
        (field("ETA {eta}", 4 + TIME_WIDTH), 4),
    ]
}

/// The fields of a counter (no total yet): elapsed time dropped first, then the rate.
fn fields_without_total() -> [(Field, u8); 4] {
    [
        (field("{spinner}", 1), u8::MAX),
        (field("{bytes}", BYTES_WIDTH), u8::MAX),
        (field("{binary_bytes_per_sec}", RATE_WIDTH), 2),
        (field("{elapsed}", TIME_WIDTH), 1),
    ]
}

fn field(template: &'static str, width: usize) -> Field {
    Field {
        template,
        width: width + 1,
    }
}

/// The template that fits `columns`: "zerocat: " and the fields, the ones ranked lowest
/// dropped until the rest fits; with what is left for the message.
fn fit(fields: &[(Field, u8)], columns: usize) -> (String, usize) {
    const PREFIX: &str = "zerocat:";
    let mut dropped = 0u8;
    loop {
        let kept: Vec<&Field> = fields
            .iter()
            .filter(|(_, rank)| *rank > dropped)
            .map(|(f, _)| f)
            .collect();
        let width = PREFIX.len() + kept.iter().map(|f| f.width).sum::<usize>();
        let droppable = fields
            .iter()
            .any(|(_, rank)| *rank > dropped && *rank < u8::MAX);
        if width <= columns || !droppable {
            let mut template = PREFIX.to_string();
            for f in &kept {
                template.push(' ');
                template.push_str(f.template);
            }
            template.push_str(" {msg}");
            return (template, columns.saturating_sub(width + 1));
        }
        dropped += 1;
    }
}

/// stderr as indicatif sees it, [`ECHO_ROOM`] columns narrower than the terminal: every
/// line drawn, `{wide_bar}` included, stops short of the last columns.
#[derive(Debug)]
struct Narrowed(console::Term);

impl Narrowed {
    fn columns(&self) -> u16 {
        self.0.size().1.saturating_sub(ECHO_ROOM).max(1)
    }
}

impl indicatif::TermLike for Narrowed {
    fn width(&self) -> u16 {
        self.columns()
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_up(n)
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_down(n)
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_right(n)
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        self.0.move_cursor_left(n)
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.0.write_line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.0.write_str(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.0.clear_line()
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// An indicatif bar on stderr: bytes, rate, elapsed, and size and ETA when the total is
/// known; a counter otherwise (until the total becomes known). Fields are dropped to fit
/// the terminal's width, which is looked at on every redraw (a resized window).
pub struct Bar {
    bar: ProgressBar,
    /// The template drawn now, and the columns left for the message.
    template: (String, usize),
    term: Narrowed,
}

impl Bar {
    pub fn new(total: Option<u64>) -> Bar {
        // A TermLike target draws also when stderr is not a terminal (`--progress`
        // forces it); indicatif's plain stderr target would hide itself there. Each
        // setter below may draw: a rate limit well above TICK's lets the last one (the
        // whole new state) through.
        let target =
            ProgressDrawTarget::term_like_with_hz(Box::new(Narrowed(console::Term::stderr())), 20);
        let mut bar = Bar {
            bar: ProgressBar::with_draw_target(total, target),
            template: (String::new(), 0),
            term: Narrowed(console::Term::stderr()),
        };
        bar.restyle(total);
        bar
    }

    /// The template for what is known (with a total: the bar and ETA) and what fits.
    fn restyle(&mut self, total: Option<u64>) {
        let columns = usize::from(self.term.columns());
        let fitted = match total {
            Some(total) => fit(&fields_with_total(total), columns),
            None => fit(&fields_without_total(), columns),
        };
        if fitted == self.template {
            return;
        }
        let style = ProgressStyle::with_template(&fitted.0)
            .expect("the template is valid")
            .progress_chars("=> ");
        self.bar.set_style(style);
        self.template = fitted;
    }
}

impl Progress for Bar {
    fn update(&mut self, now: &Snapshot) {
        if let Some(total) = now.total.filter(|&t| self.bar.length() != Some(t)) {
            // Known late (copy's walk of the tree) or changed.
            self.bar.set_length(total);
        }
        self.restyle(now.total);
        self.bar.set_position(now.bytes);
        if now.total.is_none() {
            self.bar.tick();
        }
        if let Some(status) = &now.status {
            let room = self.template.1;
            self.bar
                .set_message(status.chars().take(room).collect::<String>());
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
type TotalFn = Box<dyn Fn() -> Option<u64> + Send>;

/// What the drawing thread watches; `start` launches it.
pub struct Watch {
    meter: Arc<Meter>,
    total: Option<TotalFn>,
    sink_pipes: Vec<OwnedFd>,
    status: Option<StatusFn>,
}

impl Watch {
    pub fn new(meter: &Arc<Meter>) -> Watch {
        Watch {
            meter: Arc::clone(meter),
            total: None,
            sink_pipes: Vec::new(),
            status: None,
        }
    }

    /// The bytes the transfer will move, when known: ETA and percentage.
    pub fn total(self, total: Option<u64>) -> Watch {
        self.total_from(move || total)
    }

    /// A total that may become known during the run (copy walks the tree meanwhile),
    /// asked for at each tick.
    pub fn total_from(mut self, total: impl Fn() -> Option<u64> + Send + 'static) -> Watch {
        self.total = Some(Box::new(total));
        self
    }

    /// The sink is a pipe: what still sits in it (FIONREAD) is not delivered yet, and
    /// is subtracted. The fd is duplicated for the drawing thread and closed by
    /// `finish`, so finish before expecting the reader to see EOF.
    ///
    /// Called for several pipe sinks (tee, whose meter counts what the slowest sink got),
    /// the fullest pipe is subtracted: never more than was delivered to every sink, and
    /// short of it by at most one pipe's worth.
    pub fn sink_pipe(mut self, fd: BorrowedFd<'_>) -> Watch {
        self.sink_pipes.extend(fd.try_clone_to_owned().ok());
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
        // Asked only with --progress: no syscall otherwise (the fault tests count them).
        let display: Box<dyn Progress> = if !opts.progress {
            Box::new(NoProgress)
        } else if let Some(style) = &opts.pv {
            Box::new(PvDisplay::new(style.clone()))
        } else if nix::unistd::isatty(2).unwrap_or(false) {
            Box::new(Bar::new(self.total.as_ref().and_then(|f| f())))
        } else {
            // --progress into a log or a pipe: plain lines, no cursor control.
            Box::new(PlainLines::default())
        };
        self.start_with(display)
    }

    /// Starts the drawing thread with any display.
    pub fn start_with(self, mut display: Box<dyn Progress>) -> ProgressGuard {
        let (stop, stopped) = mpsc::channel::<String>();
        let started = Instant::now();
        crate::sys::process::take_progress_request(); // a request from before we started is stale
        let thread = std::thread::Builder::new()
            .name("zerocat-progress".into())
            .spawn(move || {
                let mut tick = started + TICK;
                loop {
                    // Lines in between do not delay the tick.
                    match stopped.recv_timeout(tick.saturating_duration_since(Instant::now())) {
                        Ok(line) => {
                            display.println(&line);
                            continue;
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => {
                            display.last(&self.snapshot(started));
                            display.finish();
                            return;
                        }
                    }
                    tick = Instant::now() + TICK;
                    let now = self.snapshot(started);
                    if crate::sys::process::take_progress_request() {
                        display.println(&now.line());
                    }
                    display.update(&now);
                }
            })
            .ok();
        ProgressGuard {
            stop: Some(stop),
            thread,
        }
    }

    fn snapshot(&self, started: Instant) -> Snapshot {
        let queued = self
            .sink_pipes
            .iter()
            .map(|fd| crate::sys::queued(fd.as_fd()).unwrap_or(0) as u64)
            .max()
            .unwrap_or(0);
        let written = self.meter.delivered();
        Snapshot {
            bytes: written.saturating_sub(queued),
            written,
            total: self.total.as_ref().and_then(|f| f()),
            elapsed: started.elapsed(),
            status: self.status.as_ref().map(|f| f()),
        }
    }
}

/// The running drawing thread. `finish` (or drop) stops it and clears the bar.
pub struct ProgressGuard {
    /// Lines to print; dropping it stops the thread.
    stop: Option<Sender<String>>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressGuard {
    /// Prints a line on stderr (a `-v` line, an error that does not stop the run) above
    /// the bar instead of through it; in order with the lines before it, and before the
    /// report, since `finish` prints what is queued before it returns.
    pub fn println(&self, line: String) {
        let unsent = match (&self.stop, &self.thread) {
            (Some(sender), Some(_)) => sender.send(line).err().map(|e| e.0),
            _ => Some(line),
        };
        if let Some(line) = unsent {
            eprintln!("{line}");
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sigusr1_line_says_bytes_rate_and_share() {
        let snap = Snapshot {
            bytes: 512 << 20,
            written: 512 << 20,
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
    fn narrow_terminals_drop_fields_before_the_line_wraps() {
        let total = 2u64 << 30;
        let (wide, _) = fit(&fields_with_total(total), 117);
        assert!(
            wide.contains("{elapsed}") && wide.contains("{wide_bar}"),
            "{wide}"
        );
        let (sixty, _) = fit(&fields_with_total(total), 57);
        assert!(!sixty.contains("{elapsed}"), "{sixty}");
        assert!(
            sixty.contains("{percent") && sixty.contains("ETA"),
            "{sixty}"
        );
        let (narrow, room) = fit(&fields_with_total(total), 20);
        assert_eq!(narrow, "zerocat: {percent:>3}% {bytes} {msg}");
        assert_eq!(room, 0);
        // Whatever the width, the widest line drawn fits, unless only the fields that
        // always stay are left.
        for columns in 20..200 {
            for fields in [&fields_with_total(total)[..], &fields_without_total()[..]] {
                let (template, room) = fit(fields, columns);
                let kept: Vec<&(Field, u8)> = fields
                    .iter()
                    .filter(|(f, _)| template.contains(f.template))
                    .collect();
                let widest = "zerocat:".len() + kept.iter().map(|(f, _)| f.width).sum::<usize>();
                let only_the_fixed = kept.iter().all(|(_, rank)| *rank == u8::MAX);
                assert!(widest <= columns || only_the_fixed, "{columns}: {template}");
                assert_eq!(room, columns.saturating_sub(widest + 1), "{columns}");
            }
        }
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

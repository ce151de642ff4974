//! Process-wide state: signal dispositions, the stop flags every loop checks
//! ([`interrupted`], [`must_stop`] and its grace) and the standard fds.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{fcntl, open, FcntlArg, OFlag};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::stat::Mode;

/// SIGINT/SIGTERM received so far.
static STOP_SIGNALS: AtomicU32 = AtomicU32::new(0);
/// Set once a timeout of the run's own (`--idle-timeout`) stopped it: the run stops as
/// at a signal ([`interrupted`] is true, the grace is the same), but no signal came.
static TIMED_OUT: AtomicBool = AtomicBool::new(false);
/// SIGALRM ticks since the first of them (see [`must_stop`]).
static TICKS: AtomicU32 = AtomicU32::new(0);
static PROGRESS_REQUESTED: AtomicBool = AtomicBool::new(false);
static HANGUP: AtomicBool = AtomicBool::new(false);
/// The signals (bit N-1 for signal N) that were ignored when zerocat started, before std's
/// start-up ignored SIGPIPE: [`reset_signals_for_child`] leaves these ignored, as a shell
/// leaves a command the signals it was itself started with ignored (nohup's SIGHUP).
static IGNORED_AT_START: AtomicU64 = AtomicU64::new(0);
/// The classic signals, 1 to 31 (the real-time ones above are glibc's or nobody's here).
const LAST_CLASSIC_SIGNAL: nix::libc::c_int = 31;

/// After a stop signal, bytes already taken from the source are still delivered for at
/// most this long (in ticks of [`TICK`]); a second signal cuts it short.
const GRACE_TICKS: u32 = 10;
/// The tick that wakes every blocked syscall once a stop signal came.
const TICK: nix::libc::suseconds_t = 100_000;

extern "C" fn on_signal(_: nix::libc::c_int) {
    if STOP_SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
        // A signal wakes one blocked syscall once. A loop still delivering bytes after it
        // must not sleep for good in the next write to a sink that never drains, so from
        // now on SIGALRM (no SA_RESTART) interrupts whatever blocks, every TICK.
        let tick = nix::libc::timeval {
            tv_sec: 0,
            tv_usec: TICK,
        };
        let timer = nix::libc::itimerval {
            it_interval: tick,
            it_value: tick,
        };
        // SAFETY: setitimer is async-signal-safe; the struct is valid.
        unsafe { nix::libc::setitimer(nix::libc::ITIMER_REAL, &timer, std::ptr::null_mut()) };
    }
}

extern "C" fn on_tick(_: nix::libc::c_int) {
    TICKS.fetch_add(1, Ordering::SeqCst);
}

extern "C" fn on_usr1(_: nix::libc::c_int) {
    PROGRESS_REQUESTED.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set a flag the copy loops check; installed without SA_RESTART, so a
/// blocked syscall returns EINTR and the loop notices (and SIGALRM, the tick of
/// [`must_stop`], likewise). SIGPIPE is ignored whoever started
/// us, so a vanished reader is an EPIPE handled per sink. SIGUSR1 asks for one progress
/// line (dd's habit; the progress thread prints it); with SA_RESTART, it interrupts nothing.
pub fn install_signal_handlers() {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    let tick = SigAction::new(
        SigHandler::Handler(on_tick),
        SaFlags::empty(),
        SigSet::empty(),
    );
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    let usr1 = SigAction::new(
        SigHandler::Handler(on_usr1),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handlers only store to an atomic.
    unsafe {
        let _ = sigaction(Signal::SIGINT, &action);
        let _ = sigaction(Signal::SIGTERM, &action);
        let _ = sigaction(Signal::SIGALRM, &tick);
        let _ = sigaction(Signal::SIGPIPE, &ignore);
        // Past RLIMIT_FSIZE a write fails with EFBIG, reported, instead of killing us.
        let _ = sigaction(Signal::SIGXFSZ, &ignore);
        let _ = sigaction(Signal::SIGUSR1, &usr1);
    }
}

/// SIGINT ignored from now on (GNU tee -i): it neither stops the run nor kills the
/// process; SIGTERM still stops it.
pub fn ignore_interrupts() {
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: SIG_IGN runs no code.
    unsafe {
        let _ = sigaction(Signal::SIGINT, &ignore);
    }
}

extern "C" fn on_hangup(_: nix::libc::c_int) {
    HANGUP.store(true, Ordering::SeqCst);
}

/// SIGHUP asks for the log to be reopened (logrotate's postrotate habit) instead of ending
/// the process; with SA_RESTART it interrupts nothing. For a long-running relay with
/// `--log FILE`.
pub fn reopen_on_hangup() {
    let hangup = SigAction::new(
        SigHandler::Handler(on_hangup),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let _ = sigaction(Signal::SIGHUP, &hangup);
    }
}

/// True once per SIGHUP (after [`reopen_on_hangup`]): reopen the log.
pub fn take_hangup() -> bool {
    HANGUP.swap(false, Ordering::Relaxed)
}

/// Waits until `until` at most for `thread` to end, and reaps it if it did. One that is
/// still blocked (on a stalled reader, a peer that reads nothing) is left to end with the
/// process. True when it ended.
pub fn join_until<T>(thread: std::thread::JoinHandle<T>, until: std::time::Instant) -> bool {
    while !thread.is_finished() && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let ended = thread.is_finished();
    if ended {
        let _ = thread.join();
    }
    ended
}

/// Threads that must not be cut short by the process's exit (a WebSocket end's last
/// close frame, a TLS end's close_notify and lingering close): each kind keeps its own,
/// and the run waits for them, bounded, once the command is done ([`Finishing::finish`]).
#[derive(Default)]
pub struct Finishing(std::sync::Mutex<Vec<std::thread::JoinHandle<()>>>);

impl Finishing {
    pub const fn new() -> Finishing {
        Finishing(std::sync::Mutex::new(Vec::new()))
    }

    /// Keeps `thread` for the end of the run (those already ended are reaped now).
    pub fn keep(&self, thread: std::thread::JoinHandle<()>) {
        let mut threads = self.0.lock().unwrap_or_else(|e| e.into_inner());
        threads.retain(|t| !t.is_finished());
        threads.push(thread);
    }

    /// Waits (at most `limit` in all) for the threads kept so far.
    pub fn finish(&self, limit: std::time::Duration) {
        let threads = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        let until = std::time::Instant::now() + limit;
        for thread in threads {
            join_until(thread, until);
        }
    }
}

/// How a thread yields to the others ([`yield_to_others`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Yielding {
    /// SCHED_IDLE: it runs only on a core no other thread wants (a waking thread takes the
    /// core from it at once, and wake-ups count its core as idle).
    IdleClass,
    /// Nice 19, which still takes a small share of a busy core, because SCHED_IDLE was
    /// refused (`Some(errno)`) or because the thread could not leave it again (`None`:
    /// neither CAP_SYS_NICE nor an RLIMIT_NICE that allows its nice — an idle-class thread
    /// that has to finish its work after the others could then wait seconds for a core).
    Nice19(Option<Errno>),
}

/// The calling thread, and only it (Linux's policy and nice are per thread), in the idle
/// scheduling class: it gets a core where one is idle and none where none is. For a
/// thread whose work may fall behind and say so (`--dump`'s writer) rather than slow the
/// ones moving the bytes (bench/NOTEBOOK.md#relay-dump-idle-class). Entering it takes no
/// privilege, leaving it for [`stop_yielding`] does: without that, and where SCHED_IDLE is
/// refused (a seccomp filter), nice 19 instead (and where that is refused too, it stays as
/// it was). Returns the thread's id, for [`stop_yielding`], and how it yields.
pub fn yield_to_others() -> (i32, Yielding) {
    // SAFETY: gettid, sched_setscheduler and setpriority take plain integers and a
    // sched_param that lives through the call.
    unsafe {
        let tid = nix::libc::gettid();
        let refused = if may_raise_priority() {
            let param = nix::libc::sched_param { sched_priority: 0 };
            if nix::libc::sched_setscheduler(0, nix::libc::SCHED_IDLE, &param) == 0 {
                return (tid, Yielding::IdleClass);
            }
            Some(Errno::last())
        } else {
            None
        };
        nix::libc::setpriority(nix::libc::PRIO_PROCESS, tid as nix::libc::id_t, 19);
        (tid, Yielding::Nice19(refused))
    }
}

/// Whether the calling thread may take its priority back up from the lowest (the kernel's
/// check for leaving SCHED_IDLE: an RLIMIT_NICE of at least 20 - its nice, or CAP_SYS_NICE,
/// bit 23 of CapEff).
fn may_raise_priority() -> bool {
    use nix::sys::resource::{getrlimit, Resource};
    let Some(nice) = own_nice() else {
        return false;
    };
    if getrlimit(Resource::RLIMIT_NICE).is_ok_and(|(soft, _)| soft >= (20 - nice) as u64) {
        return true;
    }
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|caps| u64::from_str_radix(caps.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 23) != 0)
}

/// Thread `tid` (of this process, from [`yield_to_others`]) back in the normal class at
/// the calling thread's nice, once there is nothing left to yield to (an idle-class thread
/// on a busy machine could hold the exit for seconds). Best effort: leaving SCHED_IDLE and
/// lowering a nice take CAP_SYS_NICE or an RLIMIT_NICE that allows it; where refused, it
/// stays as it was.
pub fn stop_yielding(tid: i32) {
    let Some(own) = own_nice() else {
        return;
    };
    // SAFETY: sched_setscheduler and setpriority take plain integers and a sched_param
    // that lives through the call.
    unsafe {
        let param = nix::libc::sched_param { sched_priority: 0 };
        nix::libc::sched_setscheduler(tid, nix::libc::SCHED_OTHER, &param);
        nix::libc::setpriority(nix::libc::PRIO_PROCESS, tid as nix::libc::id_t, own);
    }
}

/// The calling thread's nice; None where getpriority fails (a nice of -1 told from a
/// failure by errno).
fn own_nice() -> Option<i32> {
    // SAFETY: getpriority takes plain integers; errno is only read to tell a nice of -1
    // from a failure.
    unsafe {
        *nix::libc::__errno_location() = 0;
        let nice = nix::libc::getpriority(nix::libc::PRIO_PROCESS, 0);
        (nice != -1 || *nix::libc::__errno_location() == 0).then_some(nice)
    }
}

/// True once per SIGUSR1: the caller prints one progress line.
pub fn take_progress_request() -> bool {
    PROGRESS_REQUESTED.swap(false, Ordering::Relaxed)
}

/// True once SIGINT or SIGTERM arrived: take nothing more from any source.
pub fn interrupted() -> bool {
    STOP_SIGNALS.load(Ordering::Relaxed) > 0 || TIMED_OUT.load(Ordering::Relaxed)
}

/// Stops the run as SIGINT would (take nothing more, deliver what was taken, for the same
/// grace), for a timeout of its own, and wakes `thread` (the one moving the bytes) out of
/// the syscall it blocks in with a SIGALRM, as the stop's tick does. Call it again every
/// [`TICK`] while the thread runs: each call is one tick of the grace.
pub fn stop_for_timeout(thread: nix::libc::pthread_t) {
    TIMED_OUT.store(true, Ordering::SeqCst);
    // SAFETY: pthread_kill with a thread id the caller took from pthread_self of a thread
    // it knows is still running; SIGALRM's handler only counts.
    unsafe { nix::libc::pthread_kill(thread, nix::libc::SIGALRM) };
}

/// True once [`stop_for_timeout`] stopped the run.
pub fn timed_out() -> bool {
    TIMED_OUT.load(Ordering::Relaxed)
}

/// The tick of a stop's grace ([`stop_for_timeout`]'s callers wake the thread this often).
pub const STOP_TICK: std::time::Duration = std::time::Duration::from_micros(TICK as u64);

/// True once a second SIGINT/SIGTERM arrived: whatever grace is left ends at once.
pub fn stopped_twice() -> bool {
    STOP_SIGNALS.load(Ordering::Relaxed) > 1
}

/// True once the stop's grace is over: a second SIGINT/SIGTERM, or a second since the
/// first. Until then a loop delivering bytes it already took from the source retries
/// EINTR (the tick wakes it every 100 ms); after, it stops with those bytes undelivered,
/// so a sink that takes nothing cannot hold the run forever.
pub fn must_stop() -> bool {
    stopped_twice() || (interrupted() && TICKS.load(Ordering::Relaxed) >= GRACE_TICKS)
}

/// Started with `>&-`, the next open() would return fd 1 and "stdout" would write into
/// that file (HAZARDS). Park /dev/null on any closed standard fd, opened the wrong way
/// round, so using it fails with EBADF instead of touching anything.
///
/// Must run before std's runtime start-up: std itself opens /dev/null *read-write* on a
/// closed fd 0-2 before `main`, after which `zerocat pipe f - >&-` would report success
/// for bytes written to nowhere (`cat f >&-` says "Bad file descriptor"). The binary runs
/// this from `.init_array` (see [`RESERVE_BEFORE_STD`]); only libc calls, no allocation.
pub fn reserve_standard_fds() {
    for fd in 0..=2 {
        if fcntl(fd, FcntlArg::F_GETFD).is_ok() {
            continue;
        }
        let flags = if fd == 0 {
            OFlag::O_WRONLY
        } else {
            OFlag::O_RDONLY
        };
        // open() returns the lowest free fd, which is this one.
        let _ = open("/dev/null", flags, Mode::empty());
    }
}

/// Notes which signals zerocat's parent had ignored ([`IGNORED_AT_START`]). Runs from
/// `.init_array`, with [`reserve_standard_fds`]: only sigaction.
extern "C" fn record_ignored_signals() {
    use nix::libc;
    let mut ignored = 0u64;
    for signal in 1..=LAST_CLASSIC_SIGNAL {
        // SAFETY: a query (no new action) into a zeroed struct of ours.
        let now = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            (libc::sigaction(signal, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
        };
        if now == Some(libc::SIG_IGN) {
            ignored |= 1 << (signal - 1);
        }
    }
    IGNORED_AT_START.store(ignored, Ordering::Relaxed);
}

/// What zerocat does before std's runtime start-up: [`reserve_standard_fds`], and noting the
/// signals it was started with ignored (for its children, [`reset_signals_for_child`]).
pub extern "C" fn before_std() {
    reserve_standard_fds();
    record_ignored_signals();
}

/// The signal state an `exec:`/`sh:` child starts with, as a shell would start it: no
/// signal blocked (a relay's loops block SIGINT, SIGTERM and SIGALRM; a child inheriting
/// that would sleep through the SIGTERM that stops it, and so would what it starts), and
/// every signal at its default action (zerocat ignores SIGPIPE and SIGXFSZ, `tee -i`
/// SIGINT) except those zerocat was itself started with ignored. Runs in the child between
/// fork and exec: sigaction and sigprocmask only, both async-signal-safe.
pub fn reset_signals_for_child() -> std::io::Result<()> {
    use nix::libc;
    let ignored = IGNORED_AT_START.load(Ordering::Relaxed);
    for signal in 1..=LAST_CLASSIC_SIGNAL {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        let keep_ignored = ignored & (1 << (signal - 1)) != 0;
        // SAFETY: a zeroed action with SIG_DFL or SIG_IGN runs no code of ours.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = if keep_ignored {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    // SAFETY: an empty set of ours; sigprocmask in a single-threaded child.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The type of an `.init_array` entry: glibc runs these before `main`, and before std's
/// runtime start-up looks at fds 0-2.
pub type InitArrayFn = extern "C" fn();

/// Put this in the binary as `#[used] #[link_section = ".init_array"] static` (a static in
/// a library's object file may not be linked at all).
pub const RESERVE_BEFORE_STD: InitArrayFn = before_std;

/// Blocks until the child `pid` has exited, leaving it to be reaped (waitid with WNOWAIT).
/// A signal that interrupts the wait (a stop signal's handler has no SA_RESTART) returns
/// EINTR, so that the caller can stop the child instead of sleeping through the signal.
pub fn await_exit(pid: u32) -> std::io::Result<()> {
    use nix::libc;
    // SAFETY: waitid fills the zeroed siginfo of ours; WNOWAIT leaves the child unreaped.
    let ret = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// What became of a child process (`exec:`/`sh:`): its pid and how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildExit {
    pub pid: u32,
    /// Its exit status, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
}

impl ChildExit {
    pub fn of(pid: u32, status: std::process::ExitStatus) -> ChildExit {
        use std::os::unix::process::ExitStatusExt;
        ChildExit {
            pid,
            code: status.code(),
            signal: status.signal(),
        }
    }

    /// It exited non-zero or died by a signal.
    pub fn failed(&self) -> bool {
        self.code != Some(0)
    }

    /// The signal's name: "SIGKILL" (a number nix does not know stays a number).
    pub fn signal_name(&self) -> Option<String> {
        self.signal.map(|sig| {
            Signal::try_from(sig).map_or_else(|_| sig.to_string(), |s| s.as_str().to_string())
        })
    }

    /// "exited 0", "killed by SIGKILL": the report's words after "child".
    pub fn brief(&self) -> String {
        match (self.code, self.signal_name()) {
            (Some(code), _) => format!("exited {code}"),
            (None, Some(name)) => format!("killed by {name}"),
            (None, None) => "ended".into(),
        }
    }

    /// "exited with status 0", "exited with status 3", "was killed by SIGKILL".
    pub fn describe(&self) -> String {
        match (self.code, self.signal_name()) {
            (Some(code), _) => format!("exited with status {code}"),
            (None, Some(name)) => format!("was killed by {name}"),
            (None, None) => "ended".into(),
        }
    }
}

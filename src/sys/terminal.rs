//! Terminals: a new pseudo-terminal pair, a terminal's window size, and a terminal put in
//! raw mode that is always put back — at the normal end, on an error (the guard's drop), on
//! SIGHUP/SIGQUIT (a handler puts it back, then dies of the signal), and around SIGTSTP
//! (back while stopped, raw again on SIGCONT), as vi and less do. SIGINT/SIGTERM end the run
//! normally ([`super::process`]), so the guard puts it back.
//!
//! A terminal mode is set with SIGTTOU ignored: from a background process group (`docker
//! run -ti` starting zerocat under a shell without job control, `cmd &`) tcsetattr would
//! otherwise stop the process (socat's exit 150); ignored, the change is made.

use std::cell::UnsafeCell;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};

use nix::errno::Errno;
use nix::libc;

/// A new pseudo-terminal: the master zerocat uses and the slave a program opens.
pub struct PtyPair {
    pub master: OwnedFd,
    pub slave: OwnedFd,
    /// The slave's path, `/dev/pts/N`.
    pub path: PathBuf,
}

/// Opens a pseudo-terminal pair, both ends close-on-exec (a child gets the slave only as
/// the stdio it is given), the slave without becoming zerocat's controlling terminal.
pub fn open_pty(rows: u16, cols: u16) -> Result<PtyPair, Errno> {
    // SAFETY: plain syscalls on fds of ours; ptsname_r writes into our buffer.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if master < 0 {
            return Err(Errno::last());
        }
        let master = OwnedFd::from_raw_fd(master);
        if libc::grantpt(master.as_raw_fd()) != 0 || libc::unlockpt(master.as_raw_fd()) != 0 {
            return Err(Errno::last());
        }
        let mut name = [0 as libc::c_char; 64];
        let rc = libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len());
        if rc != 0 {
            return Err(Errno::from_raw(rc));
        }
        let cpath = std::ffi::CStr::from_ptr(name.as_ptr());
        let slave = libc::open(
            cpath.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if slave < 0 {
            return Err(Errno::last());
        }
        let path = PathBuf::from(cpath.to_string_lossy().into_owned());
        let pair = PtyPair {
            master,
            slave: OwnedFd::from_raw_fd(slave),
            path,
        };
        set_window_size(pair.master.as_raw_fd(), rows, cols)?;
        Ok(pair)
    }
}

/// TIOCSWINSZ: the rows and columns a program on the terminal sees (`stty size`).
pub fn set_window_size(fd: RawFd, rows: u16, cols: u16) -> Result<(), Errno> {
    let size = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize of ours.
    Errno::result(unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &size) }).map(drop)
}

/// Whether `fd` is a terminal.
pub fn is_terminal(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: isatty only asks.
    unsafe { libc::isatty(fd.as_raw_fd()) == 1 }
}

/// The terminal's settings.
pub fn get(fd: RawFd) -> Result<libc::termios, Errno> {
    // SAFETY: tcgetattr fills a termios of ours.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        Errno::result(libc::tcgetattr(fd, &mut t))?;
        Ok(t)
    }
}

/// tcsetattr with SIGTTOU ignored for the call (see the module's note). Async-signal-safe.
fn set_quietly(fd: RawFd, t: &libc::termios) -> libc::c_int {
    // SAFETY: sigaction on our own struct; tcsetattr on a termios of ours.
    unsafe {
        let mut ignore: libc::sigaction = std::mem::zeroed();
        ignore.sa_sigaction = libc::SIG_IGN;
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGTTOU, &ignore, &mut old);
        let rc = loop {
            let rc = libc::tcsetattr(fd, libc::TCSADRAIN, t);
            if rc == 0 || *libc::__errno_location() != libc::EINTR {
                break rc;
            }
        };
        libc::sigaction(libc::SIGTTOU, &old, std::ptr::null_mut());
        rc
    }
}

/// What a terminal is set to: raw (cfmakeraw: bytes as they are, no line editing, no
/// signals from keys, no output processing), and echo on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mode {
    pub raw: bool,
    /// None: as it is.
    pub echo: Option<bool>,
}

impl Mode {
    /// `t` changed to this mode.
    pub fn applied_to(self, mut t: libc::termios) -> libc::termios {
        if self.raw {
            // SAFETY: cfmakeraw edits our termios.
            unsafe { libc::cfmakeraw(&mut t) };
        }
        match self.echo {
            Some(true) => t.c_lflag |= libc::ECHO,
            Some(false) => t.c_lflag &= !(libc::ECHO | libc::ECHONL),
            None => {}
        }
        t
    }
}

/// Terminals whose mode zerocat changed, for the signal handlers: the fd, the settings to
/// put back, and zerocat's own (again after SIGCONT).
const SLOTS: usize = 4;

struct Slot {
    fd: AtomicI32,
    saved: UnsafeCell<libc::termios>,
    ours: UnsafeCell<libc::termios>,
}

// SAFETY: `saved` and `ours` are written only while `fd` is -1 (no handler reads them),
// before `fd` is published with SeqCst; handlers read them only after seeing that fd.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const FREE: Slot = Slot {
    fd: AtomicI32::new(-1),
    // SAFETY: all zeroes is a valid termios (plain integers).
    saved: UnsafeCell::new(unsafe { std::mem::zeroed() }),
    ours: UnsafeCell::new(unsafe { std::mem::zeroed() }),
};
static CHANGED: [Slot; SLOTS] = [FREE; SLOTS];
/// The handlers that were there before ours (called after ours: SIGHUP/SIGQUIT chain).
static PREVIOUS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Puts every changed terminal back. Async-signal-safe: for another part's handler of a
/// signal that kills (the relay's, which puts fd flags back).
pub fn put_back() {
    for slot in &CHANGED {
        let fd = slot.fd.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: published before `fd` (see Slot).
            set_quietly(fd, unsafe { &*slot.saved.get() });
        }
    }
}

/// Zerocat's modes again (after SIGCONT). Async-signal-safe.
fn put_ours() {
    for slot in &CHANGED {
        let fd = slot.fd.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: as in put_back.
            set_quietly(fd, unsafe { &*slot.ours.get() });
        }
    }
}

/// A terminal in zerocat's mode until this is dropped (then as it was).
#[derive(Debug)]
pub struct Changed {
    slot: usize,
    /// The fd the settings are made on (a dup, or a tty opened for it).
    fd: OwnedFd,
}

impl Drop for Changed {
    fn drop(&mut self) {
        let slot = &CHANGED[self.slot];
        // SAFETY: published when this guard was made.
        set_quietly(self.fd.as_raw_fd(), unsafe { &*slot.saved.get() });
        slot.fd.store(-1, Ordering::SeqCst);
    }
}

/// Sets `fd` (a terminal, owned for the change) to `mode` until the guard drops; the
/// handlers that put it back on the other ways out are installed with the first.
pub fn change(fd: OwnedFd, mode: Mode) -> Result<Changed, Errno> {
    let saved = get(fd.as_raw_fd())?;
    let ours = mode.applied_to(saved);
    let slot = CHANGED
        .iter()
        .position(|s| s.fd.load(Ordering::SeqCst) == -1)
        .ok_or(Errno::EMFILE)?;
    // SAFETY: the slot is free: no handler reads it (see Slot).
    unsafe {
        *CHANGED[slot].saved.get() = saved;
        *CHANGED[slot].ours.get() = ours;
    }
    install_handlers();
    CHANGED[slot].fd.store(fd.as_raw_fd(), Ordering::SeqCst);
    if set_quietly(fd.as_raw_fd(), &ours) != 0 {
        let e = Errno::last();
        CHANGED[slot].fd.store(-1, Ordering::SeqCst);
        return Err(e);
    }
    Ok(Changed { slot, fd })
}

extern "C" fn on_fatal(signal: libc::c_int) {
    put_back();
    let index = usize::from(signal == libc::SIGQUIT);
    let previous = PREVIOUS[index].load(Ordering::SeqCst);
    if previous > 1 {
        // Another part's handler (the relay's, which puts fd flags back, then raises).
        // SAFETY: it was installed as a handler of this signal.
        let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
        handler(signal);
    }
    // SAFETY: back to the default action, then the signal (blocked while this runs)
    // kills us as soon as the handler returns.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

extern "C" fn on_stop(_: libc::c_int) {
    put_back();
    // SAFETY: async-signal-safe calls only. With the default action and SIGTSTP unblocked,
    // raise stops us right here; it returns once we are continued, or at once where the
    // kernel discards the stop (an orphaned process group): either way, ours again.
    unsafe {
        libc::signal(libc::SIGTSTP, libc::SIG_DFL);
        let mut tstp: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut tstp);
        libc::sigaddset(&mut tstp, libc::SIGTSTP);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &tstp, std::ptr::null_mut());
        libc::raise(libc::SIGTSTP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &tstp, std::ptr::null_mut());
    }
    install(libc::SIGTSTP, on_stop, false);
    put_ours();
}

/// Continued after a stop zerocat did not see coming (SIGSTOP): ours again.
extern "C" fn on_continue(_: libc::c_int) {
    put_ours();
}

/// Our handler for `signal`; with `chain`, the one it replaces is kept to be called after.
fn install(signal: libc::c_int, handler: extern "C" fn(libc::c_int), chain: bool) {
    // SAFETY: a zeroed sigaction with a handler that is async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old);
        // An ignored signal stays ignored (nohup).
        if old.sa_sigaction == libc::SIG_IGN {
            return;
        }
        if chain {
            PREVIOUS[usize::from(signal == libc::SIGQUIT)]
                .store(old.sa_sigaction, Ordering::SeqCst);
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
    }
}

fn install_handlers() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    install(libc::SIGHUP, on_fatal, true);
    install(libc::SIGQUIT, on_fatal, true);
    install(libc::SIGTSTP, on_stop, false);
    install(libc::SIGCONT, on_continue, false);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        put_back();
        previous(info);
    }));
}

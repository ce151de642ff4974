//! Pseudo-terminals: `exec:…,pty` / `sh:…,pty` run the child on a terminal of its own, and
//! `pty:[LINK]` is a new terminal whose other side a program opens (socat's `PTY,link=`).
//!
//! A child on a pty: a session of its own (setsid) whose controlling terminal is the
//! slave, which is its stdin, stdout and stderr; the window size is `rows=`/`cols=` (24x80).
//! zerocat keeps the master, and a thread between the master and two pipes hands the rest
//! of zerocat pipes, as for any command: the child's output on one (spliced like any pipe),
//! its input on the other. The master's end (EIO once the child and everything it started
//! closed the terminal) is that pipe's EOF; the end of the input is the terminal's end of
//! file (VEOF, ^D, as a typist ends a `cat`), since a terminal cannot be half-closed.
//!
//! `pty:`: the master is the endpoint's fd; zerocat holds the slave open for the run, so
//! programs may open and close the terminal in turn (a serial line that stays up), and the
//! slave is raw with no echo: bytes pass as they are, both ways.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;

use anyhow::Context;
use nix::errno::Errno;
use nix::libc;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::sys::terminal::{self, Mode};

/// A terminal's rows and columns (`stty size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    pub rows: u16,
    pub cols: u16,
}

impl Default for WindowSize {
    /// A VT100's, as most programs assume when told nothing.
    fn default() -> WindowSize {
        WindowSize { rows: 24, cols: 80 }
    }
}

/// Bytes a direction of the bridge holds before it stops reading.
const HELD: usize = 64 * 1024;

/// Starts `command` on a new pseudo-terminal: the child and the master.
fn start(
    mut command: std::process::Command,
    size: WindowSize,
) -> anyhow::Result<(std::process::Child, OwnedFd)> {
    let pair = terminal::open_pty(size.rows, size.cols).context("cannot open a pseudo-terminal")?;
    command
        .stdin(Stdio::from(pair.slave.try_clone()?))
        .stdout(Stdio::from(pair.slave.try_clone()?))
        .stderr(Stdio::from(pair.slave.try_clone()?));
    // SAFETY: setsid and ioctl are async-signal-safe; fd 0 is the slave by now.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    // Our copies of the slave closed: the master's EIO comes with the child's end.
    drop(command);
    drop(pair.slave);
    crate::sys::socket::set_nonblocking(pair.master.as_raw_fd())?;
    Ok((child, pair.master))
}

/// A non-blocking pipe: (read end, write end).
fn pipe() -> anyhow::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// The child of a relay side, on a pty: the child, its output to read, its input to write.
pub fn spawn_duplex(
    command: std::process::Command,
    size: WindowSize,
) -> anyhow::Result<(std::process::Child, OwnedFd, OwnedFd)> {
    let (child, master) = start(command, size)?;
    let (read, output) = pipe()?;
    let (input, write) = pipe()?;
    let pid = child.id();
    std::thread::spawn(move || bridge(master, Some(input), output, pid));
    Ok((child, read, write))
}

/// The child of `pipe`/`tee`, on a pty, and the fd zerocat uses: as a `source` its output
/// is the stream and its input zerocat's stdin; as a sink the stream is its input and its
/// output goes to zerocat's stdout (as a command's other stdio is zerocat's).
pub fn spawn(
    command: std::process::Command,
    size: WindowSize,
    source: bool,
) -> anyhow::Result<(std::process::Child, OwnedFd)> {
    let (child, master) = start(command, size)?;
    let pid = child.id();
    let dup = |fd| -> anyhow::Result<OwnedFd> {
        // SAFETY: 0 and 1 are open (reserved at start-up when they were not).
        Ok(unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?)
    };
    let fd = if source {
        let (read, output) = pipe()?;
        let input = dup(0)?;
        std::thread::spawn(move || bridge(master, Some(input), output, pid));
        read
    } else {
        let (input, write) = pipe()?;
        let output = dup(1)?;
        // Its last output reaches stdout before zerocat exits ([`finish`]).
        let bridge = std::thread::spawn(move || bridge(master, Some(input), output, pid));
        BRIDGES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(bridge);
        write
    };
    Ok((child, fd))
}

/// The terminal's end-of-file key (VEOF, ^D unless stty changed it), as many as it takes to
/// end a read: two after a partial line (the first hands the line over), one after a
/// newline. None in raw mode, where it would be only a byte.
fn end_of_input(master: BorrowedFd<'_>, last: Option<u8>) -> Vec<u8> {
    let Ok(t) = terminal::get(master.as_raw_fd()) else {
        return Vec::new();
    };
    if t.c_lflag & libc::ICANON == 0 {
        return Vec::new();
    }
    let eof = t.c_cc[libc::VEOF];
    match last {
        None | Some(b'\n') => vec![eof],
        Some(_) => vec![eof, eof],
    }
}

/// Between the master and zerocat's pipes until the terminal closes (the child and what it
/// started are gone) and its output is delivered, or zerocat's reader is gone. The master
/// is closed only once the child (`pid`) exited: closed before, it would hang the terminal
/// up, and a child still closing its stdio on the way out would die of SIGHUP.
fn bridge(master: OwnedFd, input: Option<OwnedFd>, output: OwnedFd, pid: u32) {
    relay_terminal(&master, input, output);
    // Returns once the child exited (left for its reaper) or was reaped already.
    while let Err(e) = crate::sys::process::await_exit(pid) {
        if e.kind() != std::io::ErrorKind::Interrupted {
            break;
        }
    }
    drop(master);
}

fn relay_terminal(master: &OwnedFd, input: Option<OwnedFd>, output: OwnedFd) {
    // Signals are for the threads that stop on them, never this one's poll.
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&nix::sys::signal::SigSet::all()),
        None,
    );
    for fd in [
        input.as_ref().map(AsRawFd::as_raw_fd),
        Some(output.as_raw_fd()),
    ]
    .into_iter()
    .flatten()
    {
        let _ = crate::sys::socket::set_nonblocking(fd);
    }
    let mut to_child: Vec<u8> = Vec::new();
    let mut to_zerocat: Vec<u8> = Vec::new();
    let mut input = input;
    let mut last_in: Option<u8> = None;
    let mut terminal_open = true;
    let mut buf = vec![0u8; HELD];
    loop {
        if !terminal_open && to_zerocat.is_empty() {
            return;
        }
        let none = PollFlags::empty();
        let want = |on: bool, f: PollFlags| if on { f } else { none };
        let master_events = want(terminal_open && to_zerocat.len() < HELD, PollFlags::POLLIN)
            | want(terminal_open && !to_child.is_empty(), PollFlags::POLLOUT);
        let mut fds = vec![
            PollFd::new(master.as_fd(), master_events),
            PollFd::new(
                output.as_fd(),
                want(!to_zerocat.is_empty(), PollFlags::POLLOUT),
            ),
        ];
        if let Some(input) = &input {
            fds.push(PollFd::new(
                input.as_fd(),
                want(to_child.len() < HELD, PollFlags::POLLIN),
            ));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return,
        }
        let revents: Vec<PollFlags> = fds.iter().map(|f| f.revents().unwrap_or(none)).collect();
        drop(fds);
        let any = PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR;
        if terminal_open && revents[0].intersects(any) && to_zerocat.len() < HELD {
            match crate::sys::read(master.as_fd(), &mut buf[..HELD - to_zerocat.len()]) {
                Ok(0) | Err(Errno::EIO) => terminal_open = false,
                Ok(n) => to_zerocat.extend_from_slice(&buf[..n]),
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                Err(_) => terminal_open = false,
            }
        }
        if revents[1].intersects(PollFlags::POLLOUT | PollFlags::POLLERR | PollFlags::POLLHUP)
            && !to_zerocat.is_empty()
        {
            match crate::sys::write(output.as_fd(), &to_zerocat) {
                Ok(n) => {
                    to_zerocat.drain(..n);
                }
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                // zerocat's reader is gone: nothing more to deliver.
                Err(_) => return,
            }
        }
        if let Some(fd) = &input {
            if revents.get(2).is_some_and(|r| r.intersects(any)) {
                match crate::sys::read(fd.as_fd(), &mut buf[..HELD - to_child.len()]) {
                    Ok(0) => {
                        to_child.extend(end_of_input(master.as_fd(), last_in));
                        input = None;
                    }
                    Ok(n) => {
                        last_in = Some(buf[n - 1]);
                        to_child.extend_from_slice(&buf[..n]);
                    }
                    Err(Errno::EAGAIN | Errno::EINTR) => {}
                    Err(_) => input = None,
                }
            }
        }
        if terminal_open && !to_child.is_empty() {
            match crate::sys::write(master.as_fd(), &to_child) {
                Ok(n) => {
                    to_child.drain(..n);
                }
                Err(Errno::EAGAIN | Errno::EINTR) => {}
                Err(_) => to_child.clear(),
            }
        }
    }
}

/// Symlinks `pty:LINK` made, removed at the end of the run ([`finish`]).
static LINKS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Bridges writing a sink child's terminal output to zerocat's stdout, waited for at the
/// end of the run ([`finish`]).
static BRIDGES: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());
/// How long the end of a run waits for a sink child's last output (its terminal may be
/// held open by something it left running in the background).
const LAST_OUTPUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `pty:[LINK]`: a new terminal, raw and without echo (bytes pass as they are), whose slave
/// zerocat holds open for the run; its name is announced on stderr (`zerocat: pty
/// /dev/pts/N`), and LINK, when given, is a symlink to it (an existing symlink replaced,
/// anything else refused). Returns the master.
pub fn open(link: Option<&Path>) -> anyhow::Result<OwnedFd> {
    let size = WindowSize::default();
    let pair = terminal::open_pty(size.rows, size.cols).context("cannot open a pseudo-terminal")?;
    let raw = Mode {
        raw: true,
        echo: Some(false),
    };
    let t = terminal::get(pair.slave.as_raw_fd())?;
    // SAFETY: a termios of ours on our slave fd.
    Errno::result(unsafe {
        libc::tcsetattr(pair.slave.as_raw_fd(), libc::TCSANOW, &raw.applied_to(t))
    })?;
    if let Some(link) = link {
        if std::fs::symlink_metadata(link).is_ok_and(|m| m.file_type().is_symlink()) {
            std::fs::remove_file(link)
                .with_context(|| format!("cannot replace {}", link.display()))?;
        }
        std::os::unix::fs::symlink(&pair.path, link).with_context(|| {
            format!("cannot link {} to {}", link.display(), pair.path.display())
        })?;
        LINKS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(link.to_path_buf());
        eprintln!("zerocat: pty {} -> {}", link.display(), pair.path.display());
    } else {
        eprintln!("zerocat: pty {}", pair.path.display());
    }
    // Held for the run: the terminal stays up while programs open and close it.
    std::mem::forget(pair.slave);
    Ok(pair.master)
}

/// The end of the run: a sink child's last terminal output delivered to stdout (bounded
/// by [`LAST_OUTPUT`]), the symlinks of `pty:LINK` removed.
pub fn finish() {
    let until = std::time::Instant::now() + LAST_OUTPUT;
    for bridge in BRIDGES.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        crate::sys::process::join_until(bridge, until);
    }
    for link in LINKS.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        let _ = std::fs::remove_file(link);
    }
}

/// Every `Endpoint::Terminal` of a command taken apart: the endpoint it wraps takes its
/// place, and its terminal is set to its mode (unless `explain`: nothing is changed then)
/// until the guards returned drop. `-`: stdin's terminal, when stdin is one (else nothing
/// to set); `file:PATH`: PATH must be a terminal.
pub fn set_terminals(
    endpoints: Vec<&mut super::Endpoint>,
    explain: bool,
) -> anyhow::Result<Vec<terminal::Changed>> {
    let mut changed = Vec::new();
    for e in endpoints {
        let shown = e.to_string();
        let super::Endpoint::Terminal { on, mode } = e else {
            continue;
        };
        let (on, mode) = (
            std::mem::replace(on.as_mut(), super::Endpoint::Stdio),
            *mode,
        );
        *e = on;
        if explain {
            continue;
        }
        let fd = match &*e {
            super::Endpoint::Stdio => {
                // SAFETY: fd 0 is open for the run (reserved at start-up).
                let stdin = unsafe { BorrowedFd::borrow_raw(0) };
                if !terminal::is_terminal(stdin) {
                    continue;
                }
                stdin.try_clone_to_owned()?
            }
            super::Endpoint::File { path, .. } => {
                let fd = nix::fcntl::open(
                    path.as_path(),
                    nix::fcntl::OFlag::O_RDWR
                        | nix::fcntl::OFlag::O_NOCTTY
                        | nix::fcntl::OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .with_context(|| {
                    format!("cannot open {} to set its terminal mode", path.display())
                })?;
                // SAFETY: just opened, ours.
                let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
                if !terminal::is_terminal(fd.as_fd()) {
                    anyhow::bail!(
                        "'{shown}': {} is not a terminal (raw and echo= set a terminal's mode)",
                        path.display()
                    );
                }
                fd
            }
            other => anyhow::bail!("'{shown}': {other} has no terminal to set"),
        };
        changed.push(
            terminal::change(fd, mode)
                .with_context(|| format!("cannot set the terminal mode of '{shown}'"))?,
        );
    }
    Ok(changed)
}

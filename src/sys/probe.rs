//! What this kernel offers, asked at run time for `zerocat version --verbose`, so a bug
//! report says what ran. Each probe is cheap and leaves nothing behind: a socket, a memfd
//! or an unnamed temporary file, closed before it returns.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::libc;
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
use nix::sys::stat::Mode;
use nix::unistd::{lseek, Whence};

/// One probe's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    Yes,
    /// The kernel refused; why (an errno by symbol, and what to do where there is something).
    No(String),
    /// The probe itself could not be made; why.
    Unknown(String),
}

impl std::fmt::Display for Offered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Offered::Yes => f.write_str("yes"),
            Offered::No(why) => write!(f, "no ({why})"),
            Offered::Unknown(why) => write!(f, "unknown ({why})"),
        }
    }
}

/// The kernel's name, release, build and machine (uname(2)): `Linux 6.8.0-45-generic #45 SMP
/// ... x86_64`.
pub fn kernel() -> String {
    // SAFETY: utsname is plain data; uname fills it with NUL-terminated fields.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return format!("unknown ({:?})", Errno::last());
    }
    let field = |f: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates each field within its array.
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

/// copy_file_range(2) of one byte from a memfd (on the kernel's internal tmpfs mount) to an
/// unnamed file in the temp dir: always two filesystems. Kernels 5.3 to 5.18 copy across
/// filesystems; from 5.19 only a filesystem that offers it does (else EXDEV, and zerocat
/// splices instead).
pub fn copy_file_range_across_filesystems() -> Offered {
    let unknown = |what: &str, e: Errno| Offered::Unknown(format!("{what}: {e:?}"));
    let src = match memfd_create(c"zerocat-probe", MemFdCreateFlag::MFD_CLOEXEC) {
        Ok(fd) => fd,
        Err(e) => return unknown("memfd_create", e),
    };
    if let Err(e) =
        super::write(src.as_fd(), b"z").and_then(|_| lseek(src.as_raw_fd(), 0, Whence::SeekSet))
    {
        return unknown("memfd write", e);
    }
    let dir = std::env::temp_dir();
    let flags = OFlag::O_TMPFILE | OFlag::O_RDWR | OFlag::O_CLOEXEC;
    let dst = match open(&dir, flags, Mode::from_bits_truncate(0o600)) {
        // SAFETY: open just returned this fd; nothing else owns it.
        Ok(raw) => unsafe { OwnedFd::from_raw_fd(raw) },
        Err(e) => return unknown(&format!("O_TMPFILE in {}", dir.display()), e),
    };
    match super::copy_file_range(src.as_fd(), dst.as_fd(), 1) {
        Ok(1) => Offered::Yes,
        Ok(n) => Offered::Unknown(format!("copied {n} of 1 byte")),
        Err(e) => Offered::No(format!("{e:?}")),
    }
}

/// The `tls` upper-layer protocol kTLS needs (`super::ktls::ulp_offered`).
pub fn ktls() -> Offered {
    match super::ktls::ulp_offered() {
        true => Offered::Yes,
        false => Offered::No(format!(
            "tls is not in {}; modprobe tls",
            super::ktls::AVAILABLE_ULP
        )),
    }
}

/// An MPTCP socket, made as `,mptcp` makes one (`super::socket::stream_socket`).
pub fn mptcp() -> Offered {
    match super::socket::stream_socket(AddressFamily::Inet, SockFlag::SOCK_CLOEXEC, true) {
        Ok((_, None)) => Offered::Yes,
        Ok((_, Some(e))) => Offered::No(format!("{e:?}; sysctl net.mptcp.enabled")),
        Err(e) => Offered::Unknown(format!("socket: {e:?}")),
    }
}

/// UDP segmentation offload on a fresh UDP socket (`super::datagram::offer_gso`).
pub fn udp_gso() -> Offered {
    let fd = match socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    ) {
        Ok(fd) => fd,
        Err(e) => return Offered::Unknown(format!("socket: {e:?}")),
    };
    match super::datagram::offer_gso(fd.as_fd()) {
        Ok(()) => Offered::Yes,
        Err(e) => Offered::No(format!("{e:?}")),
    }
}

/// io_uring_setup(2) of a one-entry ring, closed at once (zerocat does not use io_uring;
/// a bug report says whether the kernel would). ENOSYS: a kernel without it; EPERM:
/// kernel.io_uring_disabled or a seccomp filter refuses it.
pub fn io_uring() -> Offered {
    // struct io_uring_params is 120 bytes; the kernel reads zeros and writes the ring's shape.
    let mut params = [0u32; 30];
    // SAFETY: io_uring_setup reads and writes exactly one io_uring_params at the pointer.
    let ret = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    if ret >= 0 {
        // SAFETY: the syscall just returned this fd; nothing else owns it.
        drop(unsafe { OwnedFd::from_raw_fd(ret as i32) });
        return Offered::Yes;
    }
    let errno = Errno::last();
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|v| format!(", kernel.io_uring_disabled = {}", v.trim()))
        .unwrap_or_default();
    Offered::No(format!("{errno:?}{disabled}"))
}

//! A directory's entries read with getdents64 into the caller's buffer: one call for
//! hundreds of names, from the fd the caller opened (no dup, no `DIR*`, no rewind on the
//! way out — fdopendir and readdir's three extra calls a directory).

use std::ffi::OsStr;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::libc;

/// A listing buffer's size: what glibc's readdir asks for too (32 KiB, ~1,000 short names).
pub const LISTING_BUFFER: usize = 32 * 1024;

/// d_type values (dirent.h): what the filesystem says an entry is, without a stat.
pub use libc::{DT_BLK, DT_CHR, DT_DIR, DT_FIFO, DT_LNK, DT_REG, DT_SOCK, DT_UNKNOWN};

/// Reads the next entries of the directory `dir` (opened O_RDONLY|O_DIRECTORY) into `buf`;
/// the bytes filled, 0 at the end. EINTR is retried.
pub fn getdents(dir: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: the kernel writes at most buf.len() bytes into buf.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
            )
        };
        match super::cvt(n as isize) {
            Err(Errno::EINTR) => {}
            other => return other,
        }
    }
}

/// The entries in what [`getdents`] filled: (name, d_type), `.` and `..` left out.
pub fn entries(filled: &[u8]) -> impl Iterator<Item = (&OsStr, u8)> {
    // struct linux_dirent64 { u64 d_ino; i64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
    const NAME_AT: usize = 19;
    let mut at = 0;
    std::iter::from_fn(move || loop {
        let record = filled.get(at..)?;
        if record.len() < NAME_AT {
            return None;
        }
        let reclen = u16::from_ne_bytes([record[16], record[17]]) as usize;
        if reclen < NAME_AT || reclen > record.len() {
            return None;
        }
        at += reclen;
        let d_type = record[18];
        let name = &record[NAME_AT..reclen];
        let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
        if name == b"." || name == b".." {
            continue;
        }
        return Some((OsStr::from_bytes(name), d_type));
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn every_name_of_a_directory_once_with_its_type() {
        let dir = std::env::temp_dir().join(format!("zerocat-dirent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let mut want: Vec<String> = (0..2_000).map(|i| format!("file-{i:04}")).collect();
        for name in &want {
            std::fs::write(dir.join(name), b"").unwrap();
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink("sub", dir.join("link")).unwrap();
        let fd = std::fs::File::open(&dir).unwrap();
        // A small buffer: several calls.
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        loop {
            let n = getdents(fd.as_raw_fd(), &mut buf).unwrap();
            if n == 0 {
                break;
            }
            for (name, d_type) in entries(&buf[..n]) {
                got.push((name.to_string_lossy().into_owned(), d_type));
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
        got.sort();
        let types: Vec<u8> = got.iter().map(|(_, t)| *t).collect();
        let mut names: Vec<String> = got.into_iter().map(|(n, _)| n).collect();
        assert_eq!(names.len(), 2_002);
        // d_type may be DT_UNKNOWN on some filesystems; where given, it is right.
        let at = |n: &str| names.iter().position(|x| x == n).unwrap();
        assert!([DT_DIR, DT_UNKNOWN].contains(&types[at("sub")]));
        assert!([DT_LNK, DT_UNKNOWN].contains(&types[at("link")]));
        assert!([DT_REG, DT_UNKNOWN].contains(&types[at("file-0000")]));
        names.retain(|n| n != "sub" && n != "link");
        want.sort();
        assert_eq!(names, want);
    }
}

//! The walk's paths, by bytes: `dir/name` built for each entry of a listing in one
//! buffer, and split again at the last `/` — never parsed component by component, which
//! was a fifth of a small file's user time.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `dir/name` for each name of a listing, in one buffer: no allocation per entry.
pub(super) struct Joiner {
    buf: Vec<u8>,
    /// Where the names start.
    base: usize,
}

impl Joiner {
    pub(super) fn new(dir: &Path) -> Joiner {
        let mut buf = Vec::with_capacity(dir.as_os_str().len() + 64);
        buf.extend_from_slice(dir.as_os_str().as_bytes());
        if !buf.ends_with(b"/") {
            buf.push(b'/');
        }
        let base = buf.len();
        Joiner { buf, base }
    }

    pub(super) fn with(&mut self, name: &OsStr) -> &Path {
        self.buf.truncate(self.base);
        self.buf.extend_from_slice(name.as_bytes());
        Path::new(OsStr::from_bytes(&self.buf))
    }
}

/// A path the walk made (`dir/name`) split at its last `/`, by bytes: the directory and
/// the name, without parsing every component from the back as `parent()` and
/// `file_name()` each do (a fifth of a small file's user time). None for anything the walk
/// does not make (no `/`, a trailing `/`, a last `.` or `..`): the caller goes by path.
pub(super) fn split_name(path: &Path) -> Option<(&Path, &OsStr)> {
    let bytes = path.as_os_str().as_bytes();
    let at = bytes.iter().rposition(|&b| b == b'/')?;
    let (dir, name) = (&bytes[..at], &bytes[at + 1..]);
    if name.is_empty() || name == b"." || name == b".." || dir.is_empty() {
        return None;
    }
    Some((Path::new(OsStr::from_bytes(dir)), OsStr::from_bytes(name)))
}

#[cfg(test)]
mod tests {
    use super::{split_name, Joiner};
    use std::ffi::OsStr;
    use std::path::Path;

    #[test]
    fn a_walk_path_splits_at_its_last_slash_and_anything_else_is_left_to_std() {
        let mut dir = Joiner::new(Path::new("dst/a/b"));
        let p = dir.with(OsStr::new("f.txt")).to_path_buf();
        assert_eq!(p, Path::new("dst/a/b/f.txt"));
        assert_eq!(dir.with(OsStr::new("g")), Path::new("dst/a/b/g"));
        assert_eq!(
            Joiner::new(Path::new("op/")).with(OsStr::new("x")),
            Path::new("op/x")
        );
        assert_eq!(
            split_name(&p),
            Some((Path::new("dst/a/b"), OsStr::new("f.txt")))
        );
        for odd in ["f", "/f", "dir/", "dir/.", "dir/..", "./", ""] {
            assert_eq!(split_name(Path::new(odd)), None, "{odd}");
        }
        // Bytes that are not UTF-8 are names like any other.
        use std::os::unix::ffi::OsStrExt;
        let name = OsStr::from_bytes(b"\xff\xfe");
        let p = Joiner::new(Path::new("d")).with(name).to_path_buf();
        assert_eq!(split_name(&p), Some((Path::new("d"), name)));
    }
}

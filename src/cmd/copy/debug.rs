//! `--debug`, for cp's users: after each file, cp 9.x's two lines, derived from the file's
//! [`Record`] (what ran, not what was planned):
//!
//! ```text
//! 'a' -> 'b'
//! copy offload: yes, reflink: unsupported, sparse detection: no
//! ```

use std::io::Write;

use super::entry::{Entry, SparseDetection};
use crate::engine::{DataPath, Record};

/// Did `path` run and serve (yes), refuse before moving a byte (unsupported), or not run?
fn ran(record: &Record, path: DataPath) -> Option<bool> {
    if !record.paths.iter().any(|&(p, _)| p == path) {
        return None;
    }
    let refused = record.fallbacks.iter().any(|f| f.from == path)
        && record.paths.iter().all(|&(p, n)| p != path || n == 0);
    Some(!refused)
}

/// cp's second line: `copy offload: yes|no|avoided|unsupported, reflink: yes|unsupported|no,
/// sparse detection: no|SEEK_HOLE|zeros|SEEK_HOLE + zeros`.
pub(super) fn debug_line(record: &Record, sparse: SparseDetection) -> String {
    let reflink = ran(record, DataPath::Reflink);
    let offload = match (reflink, ran(record, DataPath::CopyFileRange)) {
        (Some(true), _) => "avoided",
        (_, Some(true)) => "yes",
        (_, Some(false)) => "unsupported",
        (_, None) => "no",
    };
    let reflink = match reflink {
        Some(true) => "yes",
        Some(false) => "unsupported",
        None => "no",
    };
    format!(
        "copy offload: {offload}, reflink: {reflink}, sparse detection: {}",
        sparse.word()
    )
}

/// Prints an entry's two lines on stdout, as cp does. An error is the caller's to judge
/// (a reader gone is not one; a full disk is).
pub(super) fn print(e: &Entry) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "'{}' -> '{}'\n{}",
        e.src.display(),
        e.dst.display(),
        debug_line(&e.record, e.sparse_detection)
    )?;
    out.flush()
}

/// cp's line for a destination kept (`--update=none`, `-n`): "skipped 'b'".
pub(super) fn print_skipped(e: &Entry) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "skipped '{}'", e.dst.display())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Fallback, Reason};
    use nix::errno::Errno;

    fn record(paths: &[(DataPath, u64)], refused: &[DataPath]) -> Record {
        Record {
            paths: paths.to_vec(),
            fallbacks: refused
                .iter()
                .map(|&from| Fallback {
                    from,
                    to: Some(DataPath::Userspace),
                    reason: Reason::Errno(Errno::EOPNOTSUPP),
                })
                .collect(),
        }
    }

    #[test]
    fn the_words_follow_what_ran() {
        use DataPath::*;
        let line = |r: Record, s| debug_line(&r, s);
        assert_eq!(
            line(
                record(&[(Reflink, 0), (CopyFileRange, 9)], &[Reflink]),
                SparseDetection::No
            ),
            "copy offload: yes, reflink: unsupported, sparse detection: no"
        );
        assert_eq!(
            line(record(&[(Reflink, 9)], &[]), SparseDetection::SeekHole),
            "copy offload: avoided, reflink: yes, sparse detection: SEEK_HOLE"
        );
        assert_eq!(
            line(
                record(&[(CopyFileRange, 0), (Splice, 9)], &[CopyFileRange]),
                SparseDetection::No
            ),
            "copy offload: unsupported, reflink: no, sparse detection: no"
        );
        assert_eq!(
            line(
                record(&[(Userspace, 9)], &[]),
                SparseDetection::SeekHoleZeros
            ),
            "copy offload: no, reflink: no, sparse detection: SEEK_HOLE + zeros"
        );
        assert_eq!(
            line(record(&[(Userspace, 9)], &[]), SparseDetection::Zeros),
            "copy offload: no, reflink: no, sparse detection: zeros"
        );
    }
}

//! `-n` and `--update[=older|none|all]` (coreutils 9.5): which existing destinations a copy
//! leaves alone. A destination left alone is skipped and counted, never an error.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Copier;

/// `--update`: which existing destinations are replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Update {
    /// Every one (the default without `--update`).
    #[default]
    All,
    /// None: an existing destination is kept (`-n`'s behaviour).
    None,
    /// Only one older than its source (the default of a bare `--update`): a destination
    /// whose modification time is the source's or later is kept.
    Older,
}

/// `-i`: "zerocat: overwrite 'b'? " on stderr, and a line from stdin: yes when it starts
/// with y or Y (cp's rule); no answer (EOF) is no.
fn ask_to_overwrite(dst: &Path) -> bool {
    use std::io::{BufRead, Write};
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "zerocat: overwrite '{}'? ", dst.display());
    let _ = err.flush();
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(n) if n > 0 => answer.trim_start().starts_with(['y', 'Y']),
        _ => false,
    }
}

/// A modification time to the nanosecond, comparable.
pub(super) type Mtime = (i64, i64);

pub(super) fn mtime_of(meta: &fs::Metadata) -> Mtime {
    (meta.mtime(), meta.mtime_nsec())
}

impl Copier<'_> {
    /// Why the destination `dst`, which exists (`dst_meta`, not followed), is kept rather
    /// than replaced by a source modified at `src_mtime`; None: it is replaced. A symlink
    /// at `dst` is compared by what it points to, as cp does, or by itself when dangling.
    pub(super) fn keeps_existing(
        &self,
        dst: &Path,
        dst_meta: &fs::Metadata,
        src_mtime: Mtime,
    ) -> Option<&'static str> {
        if self.cfg.no_clobber {
            return Some("exists (-n)");
        }
        if self.cfg.interactive && !ask_to_overwrite(dst) {
            return Some("not overwritten (-i)");
        }
        match self.cfg.update {
            Update::All => None,
            Update::None => Some("exists (--update=none)"),
            Update::Older => {
                let dst_mtime = match fs::metadata(dst) {
                    Ok(m) => mtime_of(&m),
                    Err(_) => mtime_of(dst_meta),
                };
                (dst_mtime >= src_mtime).then_some("not older than the source (--update)")
            }
        }
    }
}

//! The vocabulary of one entry of the copy: what the walk found at a name (`Kind`), what
//! happened to it (`Entry`, `Status`) and how its holes were found (`SparseDetection`).
//! Every other file of the copy uses these; this one uses none of them.

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::engine::Record;

/// What the walk found at a name: from lstat, or from the directory entry's d_type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Dir,
    Symlink,
    File,
    Fifo,
    Socket,
    Device,
}

impl Kind {
    pub(super) fn of(ft: fs::FileType) -> Kind {
        if ft.is_dir() {
            Kind::Dir
        } else if ft.is_symlink() {
            Kind::Symlink
        } else if ft.is_file() {
            Kind::File
        } else if ft.is_fifo() {
            Kind::Fifo
        } else if ft.is_socket() {
            Kind::Socket
        } else {
            Kind::Device
        }
    }

    /// The word of the report and of messages.
    pub(super) fn word(self) -> &'static str {
        match self {
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::File => "file",
            Kind::Fifo => "fifo",
            Kind::Socket => "socket",
            Kind::Device => "device",
        }
    }

    /// From a directory entry's d_type; None: the filesystem did not say (DT_UNKNOWN).
    pub(super) fn of_d_type(d_type: u8) -> Option<Kind> {
        use crate::sys::dirent::*;
        Some(match d_type {
            DT_DIR => Kind::Dir,
            DT_LNK => Kind::Symlink,
            DT_REG => Kind::File,
            DT_FIFO => Kind::Fifo,
            DT_SOCK => Kind::Socket,
            DT_CHR | DT_BLK => Kind::Device,
            _ => return None,
        })
    }
}

/// What happened to one entry of the copy.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) src: PathBuf,
    pub(super) dst: PathBuf,
    /// None: the entry could not be looked at (not stat'ed, or refused before).
    pub(super) kind: Option<Kind>,
    pub(super) status: Status,
    pub(super) record: Record,
    pub(super) holes: u64,
    pub(super) resumed: u64,
    /// `--resume`: how long comparing the destination with the source took, when it ran.
    pub(super) resume_check_seconds: Option<f64>,
    /// `--verify`: the bytes read back and found equal, and how long it took, when it ran.
    pub(super) verified_bytes: u64,
    pub(super) verify_seconds: Option<f64>,
    /// How holes were found, for `--debug`.
    pub(super) sparse_detection: SparseDetection,
    /// A hard link made to this earlier copy instead of a copy (a tree under --preserve:
    /// files linked to each other in the source stay linked).
    pub(super) linked_to: Option<PathBuf>,
}

impl Entry {
    pub(super) fn new(src: &Path, dst: &Path, kind: Option<Kind>) -> Entry {
        Entry {
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            kind,
            status: Status::Copied,
            record: Record::default(),
            holes: 0,
            resumed: 0,
            resume_check_seconds: None,
            verified_bytes: 0,
            verify_seconds: None,
            sparse_detection: SparseDetection::No,
            linked_to: None,
        }
    }
}

/// How one entry ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Status {
    Copied,
    /// The destination existed and was kept (`-n`, `--update`): the words say why.
    Skipped(&'static str),
    /// Not copied, or copied without all of its metadata: the message says why.
    Failed(String),
    /// SIGINT or SIGTERM stopped its copy.
    Interrupted,
}

impl Status {
    /// The entry's `error` in the JSON report.
    pub(super) fn error(&self) -> Option<&str> {
        match self {
            Status::Copied | Status::Skipped(_) => None,
            Status::Failed(message) => Some(message),
            Status::Interrupted => Some("interrupted"),
        }
    }
}

/// A message is a failure.
impl From<String> for Status {
    fn from(message: String) -> Status {
        Status::Failed(message)
    }
}

/// How the holes of a file were found, in cp's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum SparseDetection {
    /// Copied whole, holes as zeros (or the source had none).
    #[default]
    No,
    /// Walked extent by extent with SEEK_DATA/SEEK_HOLE.
    SeekHole,
    /// `--sparse=always` on a source that is not sparse: runs of zeros found by reading.
    Zeros,
    /// `--sparse=always` on a sparse source: extents walked, and runs of zeros found in them.
    SeekHoleZeros,
}

impl SparseDetection {
    pub(super) fn word(self) -> &'static str {
        match self {
            SparseDetection::No => "no",
            SparseDetection::SeekHole => "SEEK_HOLE",
            SparseDetection::Zeros => "zeros",
            SparseDetection::SeekHoleZeros => "SEEK_HOLE + zeros",
        }
    }
}

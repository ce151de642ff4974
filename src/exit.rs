//! Exit codes (DESIGN §5) and the error that carries a usage problem.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Every byte delivered.
    Success = 0,
    /// Runtime error: I/O, refused connection, full disk.
    Failure = 1,
    /// Bad option or URI.
    Usage = 2,
    /// SIGINT or SIGTERM (the report still printed).
    Interrupted = 130,
    /// stdout's reader went away: the shell's code for SIGPIPE, without a message.
    BrokenPipe = 141,
}

impl From<ExitCode> for std::process::ExitCode {
    fn from(code: ExitCode) -> Self {
        std::process::ExitCode::from(code as u8)
    }
}

/// A usage error found after clap was done (exit 2): an option that does not fit the fds.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// SIGINT or SIGTERM ended a wait before any byte moved (a FIFO's open, an accept): exit 130.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

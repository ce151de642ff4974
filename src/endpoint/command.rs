//! Commands as endpoints: `exec:PROGRAM ARG...` (no shell; words split as a shell word list
//! would, quotes and backslash, no globbing) and `sh:COMMAND` (`/bin/sh -c COMMAND`). The
//! child's stdin (as a sink) or stdout (as a source) is a pipe, so the engine splices; the
//! other one and stderr are zerocat's, as in a shell pipeline (`,stderr` sends the child's
//! stderr into the stream as well). The child is waited for by its pid only, so zerocat never
//! reaps a child that is not its own.

use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{kill, signal, SigHandler, Signal};
use nix::unistd::Pid;

use super::Role;
use crate::exit::UsageError;

/// What runs: a program with its arguments, or a shell command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// `exec:`: argv\[0\] is looked up in PATH; at least one word.
    Exec(Vec<String>),
    /// `sh:`: handed whole to `/bin/sh -c`; never empty.
    Sh(String),
}

/// `exec:…` / `sh:…` with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    pub program: Program,
    /// `,stderr`: the child's stderr goes where its stdout goes (as socat's `stderr`).
    pub stderr: bool,
}

/// After SIGTERM, how long an interrupted child has before SIGKILL.
pub const CHILD_GRACE: Duration = Duration::from_secs(2);

/// Split `text` as a shell word list: blanks separate words; single quotes keep everything;
/// double quotes keep everything but `\"`, `\\`, `\$`, `` \` ``; a backslash outside quotes
/// keeps the next character. No expansion of any kind.
pub fn split_words(text: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if let Some(w) = word.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("unbalanced single quote".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => w.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                w.push('\\');
                                w.push(c);
                            }
                            None => return Err("unbalanced double quote".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("unbalanced double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => word.get_or_insert_with(String::new).push(c),
                None => return Err("a backslash at the end escapes nothing".into()),
            },
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// Where the first comma outside quotes is (options follow it), as [`split_words`] reads
/// quotes; None when there is none.
pub fn option_comma(text: &str) -> Option<usize> {
    let mut quote = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('"'), '\\') | (None, '\\') => escaped = true,
            (None, '\'' | '"') => quote = Some(c),
            (None, ',') => return Some(i),
            _ => {}
        }
    }
    None
}

/// A word as a shell would read it back to itself (for the canonical URI).
pub fn quote_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A running child and the pipe end zerocat uses.
#[derive(Debug)]
pub struct Spawned {
    pub fd: OwnedFd,
    pub child: Child,
}

impl CommandSpec {
    /// Start the child for `role`: its stdout is our source, or its stdin our sink. A program
    /// that cannot run (ENOENT, EACCES) fails here, before any byte moves.
    pub fn spawn(&self, role: Role) -> anyhow::Result<Spawned> {
        if self.stderr && role == Role::Sink {
            return Err(UsageError(format!(
                "option 'stderr' sends {}'s stderr into the stream it reads from; as a sink it \
                 has none (use it as the source)",
                self.name()
            ))
            .into());
        }
        let mut command = match &self.program {
            Program::Exec(argv) => {
                let mut c = std::process::Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            Program::Sh(line) => {
                let mut c = std::process::Command::new("/bin/sh");
                c.arg("-c").arg(line);
                c
            }
        };
        match role {
            Role::Source => command.stdout(Stdio::piped()),
            Role::Sink => command.stdin(Stdio::piped()),
        };
        // SAFETY: between fork and exec only async-signal-safe calls (sigaction).
        unsafe {
            command.pre_exec(|| {
                // zerocat ignores SIGPIPE; a child writing to a closed pipe should die of it.
                signal(Signal::SIGPIPE, SigHandler::SigDfl).map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        let mut pipe_for_stderr = None;
        if self.stderr && role == Role::Source {
            let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
            let write2 = write.try_clone()?;
            command.stdout(Stdio::from(write));
            command.stderr(Stdio::from(write2));
            pipe_for_stderr = Some(read);
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot run {}", self.name()))?;
        // The parent's copies of the write ends closed with `command`: EOF comes with the child.
        drop(command);
        let fd: OwnedFd = match (role, pipe_for_stderr) {
            (Role::Source, Some(read)) => read,
            (Role::Source, None) => child.stdout.take().expect("piped stdout").into(),
            (Role::Sink, _) => child.stdin.take().expect("piped stdin").into(),
        };
        Ok(Spawned { fd, child })
    }

    /// The program as messages name it: `'cat'`, `sh -c 'echo hi'`.
    pub fn name(&self) -> String {
        match &self.program {
            Program::Exec(argv) => format!("'{}'", argv[0]),
            Program::Sh(line) => format!("sh -c {}", quote_word(line)),
        }
    }
}

/// Wait for `child` (by its pid); when `interrupted`, SIGTERM first, then SIGKILL after
/// [`CHILD_GRACE`]. Never leaves a zombie.
pub fn reap(child: &mut Child, interrupted: bool) -> std::io::Result<ExitStatus> {
    if interrupted {
        let pid = Pid::from_raw(child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        let deadline = Instant::now() + CHILD_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
    }
    child.wait()
}

/// "exited with status 3", "killed by SIGKILL"; None for a clean exit.
pub fn failed_status(status: ExitStatus) -> Option<String> {
    if let Some(code) = status.code() {
        return (code != 0).then(|| format!("exited with status {code}"));
    }
    let sig = status.signal().unwrap_or(0);
    let name = Signal::try_from(sig).map_or_else(|_| sig.to_string(), |s| s.as_str().to_string());
    Some(format!("was killed by {name}"))
}

/// The address of `exec:` (split into words, at least one) or `sh:` (not blank).
pub fn parse(shell: bool, address: &str) -> Result<Program, String> {
    if shell {
        if address.trim().is_empty() {
            return Err("no command; expected sh:COMMAND".into());
        }
        return Ok(Program::Sh(address.to_string()));
    }
    let words = split_words(address)?;
    if words.is_empty() {
        return Err("no program; expected exec:PROGRAM [ARG...]".into());
    }
    Ok(Program::Exec(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_a_shell() {
        assert_eq!(split_words("cat").unwrap(), ["cat"]);
        assert_eq!(
            split_words(r#"printf '%s\n' "a b" c\ d ''"#).unwrap(),
            ["printf", r"%s\n", "a b", "c d", ""]
        );
        assert_eq!(split_words(r#""a\"b""#).unwrap(), [r#"a"b"#]);
        assert!(split_words("'open").is_err());
        assert!(split_words("\"open").is_err());
        assert!(split_words("x\\").is_err());
        assert!(split_words("  ").unwrap().is_empty());
    }

    #[test]
    fn option_comma_skips_quoted_commas() {
        assert_eq!(option_comma("cat,stderr"), Some(3));
        assert_eq!(option_comma("echo 'a,b'"), None);
        assert_eq!(option_comma(r"echo a\,b"), None);
        assert_eq!(option_comma(r#"echo "a,b",stderr"#), Some(10));
    }

    #[test]
    fn quoted_words_read_back() {
        for word in ["cat", "a b", "it's", "", "$HOME"] {
            assert_eq!(split_words(&quote_word(word)).unwrap(), [word]);
        }
    }
}

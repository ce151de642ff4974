//! Commands as endpoints: `exec:PROGRAM ARG...` (no shell; words split as a shell word list
//! would, quotes and backslash, no globbing) and `sh:COMMAND` (`/bin/sh -c COMMAND`). The
//! child's stdin (as a sink) or stdout (as a source) is a pipe, so the engine splices; the
//! other one and stderr are zerocat's, as in a shell pipeline (`,stderr` sends the child's
//! stderr into the stream as well). The child is waited for by its pid only, so zerocat never
//! reaps a child that is not its own.

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::Role;
use crate::exit::UsageError;

/// The environment variables that carry the AWS credentials an `s3://` end signs with
/// (`endpoint::s3::config` reads them): removed from the environment of the children zerocat
/// starts, as [`super::outbound::AUTH_ENV`] is. Here, not in `s3`, because `s3` sits above
/// `command` (s3 -> http -> tls -> grammar -> command).
const AWS_SECRET_ENV: [&str; 3] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

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
    /// `,pty` (`,rows=N,cols=N`): the child runs on a pseudo-terminal of its own.
    pub pty: Option<super::pty::WindowSize>,
}

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

/// A running child whose stdin and stdout are both zerocat's (a side of `relay`).
#[derive(Debug)]
pub struct Duplex {
    /// The child's stdout (with `,stderr`, its stderr too): what zerocat reads.
    pub read: OwnedFd,
    /// The child's stdin: what zerocat writes.
    pub write: OwnedFd,
    pub child: Child,
}

impl CommandSpec {
    /// Start the child for `role`: its stdout is our source, or its stdin our sink. A program
    /// that cannot run (ENOENT, EACCES) fails here, before any byte moves.
    pub fn spawn(&self, role: Role) -> anyhow::Result<Spawned> {
        self.spawn_for(role, None)
    }

    /// [`CommandSpec::spawn`], the child's environment naming the socket at the other end
    /// (`ZEROCAT_PEER_ADDR`...).
    pub fn spawn_for(
        &self,
        role: Role,
        peer: Option<&super::peer_env::PeerEnv>,
    ) -> anyhow::Result<Spawned> {
        if self.stderr && role == Role::Sink {
            return Err(UsageError(format!(
                "option 'stderr' sends {}'s stderr into the stream it reads from; as a sink it \
                 has none (use it as the source)",
                self.name()
            ))
            .into());
        }
        if let Some(size) = self.pty {
            let mut command = self.command();
            if let Some(peer) = peer {
                peer.apply(&mut command);
            }
            let (child, fd) = super::pty::spawn(command, size, role == Role::Source)
                .with_context(|| format!("cannot run {} on a pseudo-terminal", self.name()))?;
            return Ok(Spawned { fd, child });
        }
        let (reads, writes) = (role == Role::Source, role == Role::Sink);
        let (mut child, read) = self.start(reads, writes, false, peer)?;
        let fd: OwnedFd = match read {
            Some(read) => read,
            None => child.stdin.take().expect("piped stdin").into(),
        };
        Ok(Spawned { fd, child })
    }

    /// Start the child with both its stdin and stdout on pipes of ours (inetd style).
    /// `own_group`: in a process group of its own (the pgid its pid), so that stopping it
    /// ([`terminate`], [`kill_group`]) reaches what it started too (`sh:` runs commands
    /// under a shell) and a Ctrl-C in zerocat's terminal reaches zerocat alone, which ends
    /// the child in its own time. Not for a child that may read the terminal (it would be
    /// stopped by SIGTTIN): only for the children of a listener.
    pub fn spawn_duplex(&self, own_group: bool) -> anyhow::Result<Duplex> {
        self.spawn_duplex_for(own_group, None)
    }

    /// [`CommandSpec::spawn_duplex`] for a listener's connection: the child's environment
    /// names its peer (`ZEROCAT_PEER_ADDR`...).
    pub fn spawn_duplex_for(
        &self,
        own_group: bool,
        peer: Option<&super::peer_env::PeerEnv>,
    ) -> anyhow::Result<Duplex> {
        if let Some(size) = self.pty {
            // A session of its own (setsid): a process group of its own too, whatever
            // `own_group` says.
            let mut command = self.command();
            if let Some(peer) = peer {
                peer.apply(&mut command);
            }
            let (child, read, write) = super::pty::spawn_duplex(command, size)
                .with_context(|| format!("cannot run {} on a pseudo-terminal", self.name()))?;
            return Ok(Duplex { read, write, child });
        }
        let (mut child, read) = self.start(true, true, own_group, peer)?;
        Ok(Duplex {
            read: read.expect("piped stdout"),
            write: child.stdin.take().expect("piped stdin").into(),
            child,
        })
    }

    /// Fork and exec: stdout on a pipe when `reads` (its read end returned), stdin on a pipe
    /// when `writes` (in the child's `stdin`); the rest is zerocat's.
    fn start(
        &self,
        reads: bool,
        writes: bool,
        own_group: bool,
        peer: Option<&super::peer_env::PeerEnv>,
    ) -> anyhow::Result<(Child, Option<OwnedFd>)> {
        let mut command = self.command();
        if reads {
            command.stdout(Stdio::piped());
        }
        if writes {
            command.stdin(Stdio::piped());
        }
        if own_group {
            command.process_group(0);
        }
        if let Some(peer) = peer {
            peer.apply(&mut command);
        }
        let mut pipe_for_stderr = None;
        if self.stderr && reads {
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
        let read = match pipe_for_stderr {
            Some(read) => Some(read),
            None if reads => Some(child.stdout.take().expect("piped stdout").into()),
            None => None,
        };
        Ok((child, read))
    }

    /// The program as a child starts: its words, no secret of zerocat's in its
    /// environment, its signals as a shell would leave them.
    fn command(&self) -> std::process::Command {
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
        // Secrets of zerocat's own are not the child's (`exec:env` would print them): the
        // proxy password, and the AWS keys an s3:// end signs with.
        command.env_remove(super::outbound::AUTH_ENV);
        for name in AWS_SECRET_ENV {
            command.env_remove(name);
        }
        // SAFETY: between fork and exec only async-signal-safe calls (sigaction, sigprocmask).
        unsafe {
            command.pre_exec(crate::sys::process::reset_signals_for_child);
        }
        command
    }

    /// Whether the program can be run, looked up as exec would (PATH for a bare name), so a
    /// listener refuses to start for a program that is not there rather than failing each
    /// connection. `sh:` always can (its command is the shell's to judge).
    pub fn check_runnable(&self) -> anyhow::Result<()> {
        let Program::Exec(argv) = &self.program else {
            return Ok(());
        };
        let name = &argv[0];
        let runnable = |path: &std::path::Path| {
            nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok() && !path.is_dir()
        };
        let found = if name.contains('/') {
            runnable(std::path::Path::new(name))
        } else {
            let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
            std::env::split_paths(&path).any(|dir| runnable(&dir.join(name)))
        };
        if found {
            Ok(())
        } else {
            Err(anyhow::Error::from(std::io::Error::from_raw_os_error(
                nix::libc::ENOENT,
            )))
            .with_context(|| format!("cannot run {}", self.name()))
        }
    }

    /// The program as messages name it: `'cat'`, `sh -c 'echo hi'`.
    pub fn name(&self) -> String {
        match &self.program {
            Program::Exec(argv) => format!("'{}'", argv[0]),
            Program::Sh(line) => format!("sh -c {}", quote_word(line)),
        }
    }
}

/// Wait for `child` (by its pid). `stopping`, or a stop signal (SIGINT/SIGTERM) while
/// waiting: it is to be stopped, SIGTERM first, then SIGKILL after `grace` (`--grace`).
/// Never leaves a zombie.
pub fn reap(child: &mut Child, grace: Duration, stopping: bool) -> std::io::Result<ExitStatus> {
    if !stopping {
        // std's wait would retry EINTR and sleep through the signal.
        // The tick a stop signal arms interrupts the wait again if the signal came
        // between the check and the wait.
        while !crate::sys::process::interrupted() {
            match crate::sys::process::await_exit(child.id()) {
                Ok(()) => return child.wait(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    terminate(child, false);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait()
}

/// SIGTERM to the child (by its pid, which stays its own until it is reaped), and to its
/// process group when it leads one of its own ([`CommandSpec::spawn_duplex`]).
pub fn terminate(child: &Child, group: bool) {
    signal_child(child, Signal::SIGTERM, group);
}

/// SIGKILL to the child, and to its process group when it leads one of its own.
pub fn kill_group(child: &Child, group: bool) {
    signal_child(child, Signal::SIGKILL, group);
}

fn signal_child(child: &Child, signal: Signal, group: bool) {
    let pid = child.id() as i32;
    // Its pgid is its pid while it lives; until it is reaped that pid is not reused.
    let _ = kill(Pid::from_raw(if group { -pid } else { pid }), signal);
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

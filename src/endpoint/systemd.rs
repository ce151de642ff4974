//! systemd socket activation (sd_listen_fds(3)): the sockets passed as fds 3, 4, ...
//! with `LISTEN_FDS` (how many), `LISTEN_PID` (the process they are for) and
//! `LISTEN_FDNAMES` (their names, `:`-separated). The variables are read once and unset,
//! so a child never takes the sockets for its own; the fds are made close-on-exec.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

use nix::fcntl::{fcntl, FcntlArg, FdFlag};

/// The first fd systemd passes (`SD_LISTEN_FDS_START`).
const FIRST_FD: RawFd = 3;

/// One passed socket: its fd and its name (`FileDescriptorName=`, "unknown" when unnamed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Passed {
    pub fd: RawFd,
    pub name: String,
}

/// What the environment says was passed to the process `pid`: pure, for tests.
pub(super) fn passed(
    env: impl Fn(&str) -> Option<String>,
    pid: u32,
) -> Result<Vec<Passed>, String> {
    let none = "no sockets were passed by systemd (LISTEN_FDS is not set); systemd: is for a \
                service started by a .socket unit or systemd-socket-activate";
    let Some(count) = env("LISTEN_FDS") else {
        return Err(none.into());
    };
    let listen_pid = env("LISTEN_PID").unwrap_or_default();
    if listen_pid.parse::<u32>().ok() != Some(pid) {
        return Err(format!(
            "the sockets systemd passed are for process {} (LISTEN_PID), not this one ({pid})",
            if listen_pid.is_empty() {
                "(unset)"
            } else {
                &listen_pid
            }
        ));
    }
    let count: RawFd = match count.parse() {
        Ok(n) if (1..=4096).contains(&n) => n,
        Ok(0) => return Err(none.replace("is not set", "is 0")),
        _ => return Err(format!("LISTEN_FDS='{count}' is not a number of sockets")),
    };
    let names: Vec<String> = env("LISTEN_FDNAMES")
        .map(|names| names.split(':').map(str::to_string).collect())
        .unwrap_or_default();
    Ok((0..count)
        .map(|i| Passed {
            fd: FIRST_FD + i,
            name: names
                .get(i as usize)
                .filter(|n| !n.is_empty())
                .cloned()
                .unwrap_or_else(|| "unknown".into()),
        })
        .collect())
}

/// The passed sockets, read from the environment at the first call (then unset).
fn all() -> &'static Result<Vec<Passed>, String> {
    static PASSED: OnceLock<Result<Vec<Passed>, String>> = OnceLock::new();
    PASSED.get_or_init(|| {
        let result = passed(|k| std::env::var(k).ok(), std::process::id());
        // Endpoints are opened before any thread starts: the environment is ours to change.
        for key in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
            std::env::remove_var(key);
        }
        if let Ok(passed) = &result {
            for p in passed {
                let _ = fcntl(p.fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
            }
        }
        result
    })
}

/// Duplicates of the passed sockets (all, or those named `name`), each checked to be a
/// listening socket. Errors are the user's to fix (exit 2): the text says what.
pub(super) fn sockets(name: Option<&str>) -> Result<Vec<OwnedFd>, String> {
    let passed = all().as_ref().map_err(Clone::clone)?;
    let chosen: Vec<&Passed> = passed
        .iter()
        .filter(|p| name.is_none_or(|n| p.name == n))
        .collect();
    if chosen.is_empty() {
        let names: Vec<&str> = passed.iter().map(|p| p.name.as_str()).collect();
        return Err(format!(
            "no socket named '{}' was passed by systemd (LISTEN_FDNAMES: {})",
            name.unwrap_or(""),
            names.join(", ")
        ));
    }
    chosen
        .into_iter()
        .map(|p| {
            match super::listener::is_listening(p.fd) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(format!(
                        "fd {} ('{}') from systemd is a connected socket, not a listening \
                         one: zerocat takes Accept=no sockets",
                        p.fd, p.name
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "fd {} ('{}') from systemd is not a socket: {e}",
                        p.fd, p.name
                    ))
                }
            }
            let new = fcntl(p.fd, FcntlArg::F_DUPFD_CLOEXEC(FIRST_FD))
                .map_err(|e| format!("cannot use fd {} from systemd: {e}", p.fd))?;
            // SAFETY: fcntl just returned this descriptor; nothing else owns it.
            Ok(unsafe { OwnedFd::from_raw_fd(new) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn names_and_fds_from_three() {
        let vars = [
            ("LISTEN_FDS", "2"),
            ("LISTEN_PID", "42"),
            ("LISTEN_FDNAMES", "web:"),
        ];
        let got = passed(env(&vars), 42).unwrap();
        assert_eq!(
            got,
            vec![
                Passed {
                    fd: 3,
                    name: "web".into()
                },
                Passed {
                    fd: 4,
                    name: "unknown".into()
                }
            ]
        );
    }

    #[test]
    fn refuses_another_pid_none_and_nonsense() {
        let vars = [("LISTEN_FDS", "1"), ("LISTEN_PID", "41")];
        let e = passed(env(&vars), 42).unwrap_err();
        assert!(e.contains("process 41") && e.contains("(42)"), "{e}");
        assert!(passed(env(&[("LISTEN_FDS", "1")]), 42)
            .unwrap_err()
            .contains("(unset)"));
        assert!(passed(env(&[]), 42).unwrap_err().contains("not set"));
        let zero = [("LISTEN_FDS", "0"), ("LISTEN_PID", "42")];
        assert!(passed(env(&zero), 42).unwrap_err().contains("is 0"));
        let junk = [("LISTEN_FDS", "x"), ("LISTEN_PID", "42")];
        assert!(passed(env(&junk), 42).unwrap_err().contains("'x'"));
    }
}

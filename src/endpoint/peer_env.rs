//! What a listener's `exec:`/`sh:` child learns of its connection, in its environment (as
//! inetd's children, ncat's `NCAT_REMOTE_ADDR`, socat's `SOCAT_PEERADDR`):
//! `ZEROCAT_PEER_ADDR`, `ZEROCAT_PEER_PORT`, `ZEROCAT_LOCAL_ADDR`, `ZEROCAT_LOCAL_PORT`,
//! `ZEROCAT_PROTO` (`tcp`, `tls`, `unix`), and `ZEROCAT_TLS_CLIENT_SUBJECT` when the TLS
//! client presented a certificate. With a `proxy` listener the addresses are those its PROXY
//! header carried: the client's, not the proxy's.

use super::proxy::Addresses;

/// The variables a child gets, in the order they are set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerEnv {
    pub vars: Vec<(&'static str, String)>,
}

/// Every variable name this module may set: a child never inherits a stale one from
/// zerocat's own environment (a zerocat started by another zerocat's child).
pub const NAMES: [&str; 6] = [
    "ZEROCAT_PEER_ADDR",
    "ZEROCAT_PEER_PORT",
    "ZEROCAT_LOCAL_ADDR",
    "ZEROCAT_LOCAL_PORT",
    "ZEROCAT_PROTO",
    "ZEROCAT_TLS_CLIENT_SUBJECT",
];

impl PeerEnv {
    /// The environment of a connection whose addresses are `origin`, over TLS when
    /// `tls` (with the client certificate's subject when one was presented).
    pub fn of(origin: &Addresses, tls: Option<Option<&str>>) -> PeerEnv {
        let mut vars = Vec::new();
        let proto = match (origin, tls) {
            (_, Some(_)) => "tls",
            (Addresses::Unix { .. }, None) => "unix",
            (Addresses::Inet { .. }, None) => "tcp",
            (Addresses::Unknown, None) => "unknown",
        };
        if let Addresses::Inet { src, dst } = origin {
            vars.push(("ZEROCAT_PEER_ADDR", src.ip().to_canonical().to_string()));
            vars.push(("ZEROCAT_PEER_PORT", src.port().to_string()));
            vars.push(("ZEROCAT_LOCAL_ADDR", dst.ip().to_canonical().to_string()));
            vars.push(("ZEROCAT_LOCAL_PORT", dst.port().to_string()));
        }
        vars.push(("ZEROCAT_PROTO", proto.to_string()));
        if let Some(Some(subject)) = tls {
            vars.push(("ZEROCAT_TLS_CLIENT_SUBJECT", subject.to_string()));
        }
        PeerEnv { vars }
    }

    /// The environment of `pipe`'s or `tee`'s command whose other end is this opened
    /// socket: `origin` when its listener knew it (the peer as accepted, or as its PROXY
    /// header named it), else the socket's own addresses (a connector: the peer is the
    /// server). A TLS end's fd may be a bridge's socketpair: `tls` names the protocol then,
    /// and the addresses come from `origin` only.
    pub fn of_socket(
        origin: &Addresses,
        fd: std::os::fd::BorrowedFd<'_>,
        tls: Option<Option<&str>>,
    ) -> PeerEnv {
        use nix::sys::socket::{getpeername, getsockname, SockaddrLike, SockaddrStorage};
        use std::os::fd::AsRawFd;
        if !matches!(origin, Addresses::Unknown) {
            return PeerEnv::of(origin, tls);
        }
        let raw = fd.as_raw_fd();
        let (Ok(peer), Ok(local)) = (
            getpeername::<SockaddrStorage>(raw),
            getsockname::<SockaddrStorage>(raw),
        ) else {
            return PeerEnv::of(origin, tls);
        };
        let inet = |a: &SockaddrStorage| -> Option<std::net::SocketAddr> {
            if let Some(v4) = a.as_sockaddr_in() {
                return Some(std::net::SocketAddr::V4((*v4).into()));
            }
            a.as_sockaddr_in6()
                .map(|v6| std::net::SocketAddr::V6((*v6).into()))
        };
        let path = |a: &SockaddrStorage| {
            a.as_unix_addr()
                .and_then(|u| u.path())
                .map(|p| p.as_os_str().as_encoded_bytes().to_vec())
                .unwrap_or_default()
        };
        let found = match (inet(&peer), inet(&local)) {
            (Some(src), Some(dst)) => Addresses::Inet { src, dst },
            _ if peer.family() == Some(nix::sys::socket::AddressFamily::Unix) => Addresses::Unix {
                src: path(&peer),
                dst: path(&local),
            },
            _ => Addresses::Unknown,
        };
        PeerEnv::of(&found, tls)
    }

    /// Sets them on `command`, after clearing any of the names zerocat itself inherited.
    pub fn apply(&self, command: &mut std::process::Command) {
        for name in NAMES {
            command.env_remove(name);
        }
        for (name, value) in &self.vars {
            command.env(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_client_is_named_by_address_and_port() {
        let origin = Addresses::Inet {
            src: "127.0.0.2:40000".parse().unwrap(),
            dst: "[::ffff:127.0.0.1]:8080".parse().unwrap(),
        };
        let env = PeerEnv::of(&origin, None);
        assert_eq!(
            env.vars,
            [
                ("ZEROCAT_PEER_ADDR", "127.0.0.2".to_string()),
                ("ZEROCAT_PEER_PORT", "40000".to_string()),
                ("ZEROCAT_LOCAL_ADDR", "127.0.0.1".to_string()),
                ("ZEROCAT_LOCAL_PORT", "8080".to_string()),
                ("ZEROCAT_PROTO", "tcp".to_string()),
            ]
        );
        let tls = PeerEnv::of(&origin, Some(Some("CN=client")));
        assert_eq!(tls.vars[4], ("ZEROCAT_PROTO", "tls".to_string()));
        assert_eq!(
            tls.vars[5],
            ("ZEROCAT_TLS_CLIENT_SUBJECT", "CN=client".to_string())
        );
        let unix = PeerEnv::of(&Addresses::Unknown, None);
        assert_eq!(unix.vars, [("ZEROCAT_PROTO", "unknown".to_string())]);
    }
}

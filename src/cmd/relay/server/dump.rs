//! `--dump`: a connection's two directions get their taps at its first pump (both sides
//! open, so both peers' addresses can be asked for the dump's `open` line and pcap).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use nix::sys::socket::{getpeername, SockaddrStorage};

use super::Conn;
use crate::engine::dump::{Tap, Tapped};

pub(super) fn attach(tap: &Arc<Tap>, conn: &mut Conn) {
    if conn.flows[0].tap.is_some() {
        return;
    }
    let addrs = [0, 1].map(|side| {
        let fd = conn.sides[side].fd.as_ref()?;
        let addr: SockaddrStorage = getpeername(fd.as_raw_fd()).ok()?;
        inet(&addr)
    });
    tap.open(conn.id, addrs);
    for (d, flow) in conn.flows.iter_mut().enumerate() {
        flow.tap = Some(Tapped::new(tap, conn.id, d as u8));
    }
}

fn inet(addr: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    addr.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
}

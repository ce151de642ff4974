//! `--dump`: a connection's two directions get their taps at its first pump (both sides
//! open, so both peers' addresses can be asked for the dump's `open` line and pcap).

use std::os::fd::AsFd;
use std::sync::Arc;

use super::Conn;
use crate::engine::dump::{peer_of, Tap, Tapped};

pub(super) fn attach(tap: &Arc<Tap>, conn: &mut Conn) {
    if conn.flows[0].tap.is_some() {
        return;
    }
    let addrs = [0, 1].map(|side| peer_of(conn.sides[side].fd.as_ref()?.as_fd()));
    tap.open(conn.id, addrs);
    for (d, flow) in conn.flows.iter_mut().enumerate() {
        flow.tap = Some(Tapped::new(tap, conn.id, d as u8));
    }
}

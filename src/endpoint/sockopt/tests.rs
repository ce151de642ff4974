use super::*;
use crate::endpoint::{parse, Endpoint};

fn sock(arg: &str) -> SockOpts {
    parse(arg)
        .unwrap_or_else(|e| panic!("{arg}: {e}"))
        .sock_opts()
        .cloned()
        .unwrap_or_else(|| panic!("{arg} has no socket options"))
}

fn error(arg: &str) -> String {
    parse(arg).expect_err(arg).to_string()
}

#[test]
fn every_option_parses_and_displays_back() {
    let arg = "tcp:127.0.0.1:80,bind=127.0.0.2:4000,keepalive=30:5:4,nodelay,sndbuf=64k,\
               rcvbuf=131072,bindtodevice=lo,mark=0x10,tos=0x10,ttl=7";
    let s = sock(arg);
    assert_eq!(s.bind, Some("127.0.0.2:4000".parse().unwrap()));
    assert_eq!(
        s.keepalive,
        Some(Keepalive {
            idle: Some(30),
            interval: Some(5),
            count: Some(4)
        })
    );
    assert!(s.nodelay);
    assert_eq!((s.sndbuf, s.rcvbuf), (Some(65536), Some(131072)));
    assert_eq!(s.bindtodevice.as_deref(), Some("lo"));
    assert_eq!((s.mark, s.tos, s.ttl), (Some(16), Some(16), Some(7)));
    let endpoint = parse(arg).unwrap();
    let shown = endpoint.to_string();
    assert_eq!(parse(&shown).unwrap(), endpoint, "{shown}");
    assert_eq!(
        s.describe().unwrap(),
        "bind=127.0.0.2:4000, keepalive=30:5:4, nodelay, sndbuf=65536, rcvbuf=131072, \
         bindtodevice=lo, mark=16, tos=16, ttl=7"
    );
}

#[test]
fn keepalive_takes_nothing_idle_or_all_three() {
    assert_eq!(
        sock("tcp:h:1,keepalive").keepalive,
        Some(Keepalive::default())
    );
    assert_eq!(
        sock("tcp:h:1,keepalive=60").keepalive.unwrap().idle,
        Some(60)
    );
    let partial = sock("tcp:h:1,keepalive=::3").keepalive.unwrap();
    assert_eq!((partial.idle, partial.count), (None, Some(3)));
    for bad in [
        "keepalive=0",
        "keepalive=1:2",
        "keepalive=x",
        "keepalive=1:1:200",
    ] {
        let e = error(&format!("tcp:h:1,{bad}"));
        assert!(e.contains("keepalive"), "{bad}: {e}");
    }
}

#[test]
fn bind_takes_addresses_with_or_without_a_port() {
    assert_eq!(sock("tcp:h:1,bind=10.0.0.1").bind.unwrap().port(), 0);
    assert_eq!(
        sock("tcp6:h:1,bind=[::1]:99").bind,
        Some("[::1]:99".parse().unwrap())
    );
    assert_eq!(
        sock("tcp:h:1,bind=::1").bind.unwrap().to_string(),
        "[::1]:0"
    );
    for bad in ["bind=", "bind=localhost", "bind=1.2.3.4:99999", "bind=[::1"] {
        let e = error(&format!("tcp:h:1,{bad}"));
        assert!(e.contains("bind"), "{bad}: {e}");
    }
}

#[test]
fn a_bind_of_the_other_family_is_a_usage_error() {
    let e = error("tcp:[::1]:80,bind=127.0.0.2");
    assert!(e.contains("IPv4") && e.contains("IPv6"), "{e}");
    let e = error("tcp6:example.com:80,bind=127.0.0.2");
    assert!(e.contains("IPv6 only"), "{e}");
    let e = error("udp4:[::1]:53");
    assert!(e.contains("IPv4 only"), "{e}");
    // A name of either family: bind= picks which addresses are tried.
    let s = sock("tcp:localhost:80,bind=127.0.0.2");
    assert!(s.admits(&"127.0.0.1:80".parse().unwrap()));
    assert!(!s.admits(&"[::1]:80".parse().unwrap()));
}

#[test]
fn family_words_pin_the_family_and_show_in_display() {
    let e = parse("TCP6:localhost:80").unwrap();
    assert_eq!(e.sock_opts().unwrap().family, Some(Family::V6));
    assert_eq!(e.to_string(), "tcp6:localhost:80");
    assert_eq!(parse("udp4:h:53").unwrap().to_string(), "udp4:h:53");
    assert!(matches!(parse("tcp4:h:1").unwrap(), Endpoint::Tcp { .. }));
}

#[test]
fn options_only_where_they_apply() {
    let e = error("tcp-listen:0,bind=127.0.0.1");
    assert!(e.contains("'bind' does not apply to tcp-listen"), "{e}");
    let e = error("udp:h:1,nodelay");
    assert!(e.contains("'nodelay' does not apply to udp"), "{e}");
    let e = error("unix:/x,mark=1");
    assert!(e.contains("'mark' does not apply to unix"), "{e}");
    assert!(sock("tcp-listen:0,nodelay,keepalive").nodelay);
    for bad in [
        "tcp:h:1,ttl=0",
        "tcp:h:1,ttl=256",
        "tcp:h:1,tos=0x100",
        "tcp:h:1,mark=-1",
        "tcp:h:1,sndbuf=0",
        "tcp:h:1,sndbuf=2G",
        "tcp:h:1,nodelay=1",
        "tcp:h:1,bindtodevice=a/b",
        "tcp:h:1,bindtodevice=sixteen-chars-xx",
    ] {
        parse(bad).expect_err(bad);
    }
}

#[test]
fn a_refusal_names_the_option_and_the_capability() {
    let refused = Refused {
        option: "mark=1".into(),
        errno: Errno::EPERM,
    };
    assert_eq!(
        refused.to_string(),
        "option 'mark=1': the kernel refused it (SO_MARK needs CAP_NET_ADMIN): Operation not \
         permitted (os error 1)"
    );
}

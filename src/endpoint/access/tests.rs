use super::*;
use crate::endpoint::parse;

fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

#[test]
fn networks_match_their_addresses_only() {
    let net = Cidr::parse("10.1.2.3/8").unwrap();
    assert_eq!(net.to_string(), "10.0.0.0/8");
    assert!(net.contains("10.255.0.1".parse().unwrap()));
    assert!(!net.contains("11.0.0.1".parse().unwrap()));
    let one = Cidr::parse("127.0.0.1").unwrap();
    assert!(one.contains("127.0.0.1".parse().unwrap()));
    assert!(!one.contains("127.0.0.2".parse().unwrap()));
    // A dual-stack listener's IPv4 clients come as ::ffff:a.b.c.d.
    assert!(one.contains("::ffff:127.0.0.1".parse().unwrap()));
    assert!(Cidr::parse("::/0")
        .unwrap()
        .contains("::1".parse().unwrap()));
    assert!(Cidr::parse("0.0.0.0/0")
        .unwrap()
        .contains("1.2.3.4".parse().unwrap()));
    assert!(!Cidr::parse("::1")
        .unwrap()
        .contains("127.0.0.1".parse().unwrap()));
    for bad in [
        "10.0.0.0/33",
        "::/129",
        "10.0.0/8",
        "host",
        "1.2.3.4/x",
        "1.2.3.4/",
    ] {
        Cidr::parse(bad).expect_err(bad);
    }
}

#[test]
fn deny_wins_and_allow_admits_only_its_networks() {
    let mut access = Access::default();
    assert!(access.check(ip("1.2.3.4")).is_ok());
    access.set("allow", Some("127.0.0.0/8;10.0.0.1")).unwrap();
    access.set("deny", Some("127.0.0.2")).unwrap();
    assert!(access.check(ip("127.0.0.1")).is_ok());
    assert!(access.check(ip("10.0.0.1")).is_ok());
    let denied = access.check(ip("127.0.0.2")).unwrap_err();
    assert_eq!(denied, "127.0.0.2 is in deny=127.0.0.2/32");
    let outside = access.check(ip("192.168.0.1")).unwrap_err();
    assert_eq!(
        outside,
        "192.168.0.1 is in none of allow=127.0.0.0/8;10.0.0.1/32"
    );
    assert!(access.check(None).is_err());
}

#[test]
fn the_allow_file_takes_a_network_a_line_with_comments() {
    let dir = std::env::temp_dir().join(format!("zerocat-access-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("allow");
    std::fs::write(&path, "# office\n10.0.0.0/8  # lan\n\n  ::1\n").unwrap();
    let mut e = parse(&format!("tcp-listen:0,allow-file={}", path.display())).unwrap();
    e.load_access_file().unwrap();
    let access = e.access().unwrap();
    assert!(access.check(ip("10.9.9.9")).is_ok());
    assert!(access.check(ip("::1")).is_ok());
    assert!(access.check(ip("127.0.0.1")).is_err());
    std::fs::write(&path, "10.0.0.0/8\nnot-a-net\n").unwrap();
    let e2 = e.load_access_file().unwrap_err();
    assert!(e2.contains("line 2") && e2.contains("not-a-net"), "{e2}");
    std::fs::remove_file(&path).unwrap();
    let gone = e.load_access_file().unwrap_err();
    assert!(gone.contains("cannot read"), "{gone}");
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn listeners_take_the_lists_and_display_them() {
    let e = parse("tcp-listen:0,allow=127.0.0.1;10.0.0.0/8,deny=10.0.0.9").unwrap();
    assert_eq!(
        e.to_string(),
        "tcp-listen:0,allow=127.0.0.1/32;10.0.0.0/8,deny=10.0.0.9/32"
    );
    assert_eq!(parse(&e.to_string()).unwrap(), e);
    let u = parse("udp-listen:0,deny=::1").unwrap();
    assert_eq!(u.to_string(), "udp-listen:0,deny=::1/128");
    assert!(parse("tls-listen:0,cert=c,key=k,allow=::1").is_ok());
    let bad = parse("tcp-listen:0,allow=300.0.0.1")
        .unwrap_err()
        .to_string();
    assert!(bad.contains("'300.0.0.1' is not a network"), "{bad}");
    let not_here = parse("tcp:h:1,allow=127.0.0.1").unwrap_err().to_string();
    assert!(
        not_here.contains("'allow' does not apply to tcp"),
        "{not_here}"
    );
}

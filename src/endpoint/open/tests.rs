use super::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::PathBuf;
use std::time::Duration;

use crate::endpoint::parse;

fn ok(arg: &str) -> Endpoint {
    parse(arg).unwrap_or_else(|e| panic!("{arg} should parse: {e}"))
}

fn file(path: &str) -> Endpoint {
    Endpoint::File {
        path: PathBuf::from(path),
        opts: FileOpts::default(),
    }
}

#[test]
fn connect_retries_until_the_peer_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late.sock");
    let late = path.clone();
    let server = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let l = StdUnixListener::bind(&late).unwrap();
        l.accept().unwrap();
    });
    let uri = format!("unix:{},retry=50,interval=50ms", path.display());
    ok(&uri).connect().expect("connects once the server is up");
    server.join().unwrap();
    let without = format!("unix:{}", dir.path().join("never.sock").display());
    assert!(ok(&without).connect().is_err());
}

#[test]
fn tcp_listener_announces_and_accepts() {
    let listener = ok("tcp-listen:0").listen().expect("listen on 127.0.0.1:0");
    let local = listener.local_addr().to_string();
    assert!(local.starts_with("127.0.0.1:"), "{local}");
    assert!(!local.ends_with(":0"), "port 0 must be replaced: {local}");

    let mut client = TcpStream::connect(&local).expect("connect");
    let (fd, peer) = listener.accept().expect("accept");
    assert!(peer.starts_with("127.0.0.1:"), "{peer}");
    client.write_all(b"ping").unwrap();
    let mut server = std::fs::File::from(fd);
    let mut buf = [0u8; 4];
    server.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");

    // The same port through the tcp: connector.
    let connector: Endpoint = format!("tcp:{local}").parse().unwrap();
    let _conn = connector.connect().expect("tcp: connect");
    listener.accept().expect("second accept");
}

#[test]
fn tcp_connect_refused_names_the_endpoint() {
    // Bind, learn the port, close: nobody listens there now.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let e = ok(&format!("tcp:127.0.0.1:{port}"))
        .connect()
        .expect_err("nobody listens");
    let text = format!("{e:#}");
    assert!(
        text.starts_with(&format!("cannot connect to tcp:127.0.0.1:{port}: ")),
        "{text}"
    );
    assert!(text.contains("refused"), "{text}");
}

#[test]
fn unix_listener_replaces_a_stale_socket_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sock");
    // A stale socket: bound, then its listener went away without unlinking.
    drop(StdUnixListener::bind(&path).unwrap());
    assert!(path.exists());

    let endpoint = ok(&format!("unix-listen:{},mode=0600", path.display()));
    let listener = endpoint.listen().expect("stale socket is replaced");
    assert_eq!(listener.local_addr(), path.display().to_string());
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);

    let connector = ok(&format!("unix:{}", path.display()));
    let mut client = UnixStream::from(connector.connect().expect("unix: connect"));
    let (fd, peer) = listener.accept().expect("accept");
    assert_eq!(peer, "unix");
    client.write_all(b"hi").unwrap();
    let mut buf = [0u8; 2];
    std::fs::File::from(fd).read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hi");

    // A live listener is not stale: a second listen must refuse (its probe connects).
    let e = endpoint.listen().expect_err("in use");
    assert!(format!("{e:#}").contains("another process"), "{e:#}");
    assert!(path.exists(), "a live socket is left alone");

    drop(listener);
    assert!(!path.exists(), "the listener removes its socket file");
}

#[test]
fn unix_listener_never_unlinks_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("precious");
    std::fs::write(&path, b"data").unwrap();
    let e = ok(&format!("unix-listen:{}", path.display()))
        .listen()
        .expect_err("a regular file is in the way");
    let text = format!("{e:#}");
    assert!(text.contains("not a socket"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert_eq!(std::fs::read(&path).unwrap(), b"data");
}

#[test]
fn abstract_unix_listener_and_connector() {
    let name = format!("zerocat-test-{}", std::process::id());
    let listener = ok(&format!("unix-listen:@{name}"))
        .listen()
        .expect("listen");
    assert_eq!(listener.local_addr(), format!("@{name}"));
    let _client = ok(&format!("unix:@{name}")).connect().expect("connect");
    listener.accept().expect("accept");
}

#[test]
fn file_sink_defers_truncation_to_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out");
    std::fs::write(&path, b"old contents").unwrap();
    let sink = Endpoint::File {
        path: path.clone(),
        opts: FileOpts::default(),
    };
    let opened = sink.open(Role::Sink).unwrap();
    assert!(opened.truncate_pending);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"old contents",
        "not truncated yet"
    );

    let append = ok(&format!("file:{},append", path.display()));
    assert!(!append.open(Role::Sink).unwrap().truncate_pending);

    let fresh = dir.path().join("new");
    let excl = ok(&format!("file:{},excl,mode=0640", fresh.display()));
    assert!(!excl.open(Role::Sink).unwrap().truncate_pending);
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o640,
        "mode= is exact for a created file, whatever the umask"
    );
    let e = excl
        .open(Role::Sink)
        .expect_err("excl refuses an existing file");
    assert!(format!("{e:#}").contains("for writing"), "{e:#}");

    let source = file(path.to_str().unwrap()).open(Role::Source).unwrap();
    assert!(!source.truncate_pending);
}

#[test]
fn directories_and_missing_files_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let shown = dir.path().display().to_string();
    let endpoint = file(&shown);
    let e = endpoint.open(Role::Source).expect_err("directory source");
    assert_eq!(
        format!("{e:#}"),
        format!("cannot open '{shown}' for reading: is a directory")
    );
    let e = endpoint.open(Role::Sink).expect_err("directory sink");
    assert_eq!(
        format!("{e:#}"),
        format!("cannot open '{shown}' for writing: is a directory")
    );

    let missing = dir.path().join("missing.bin");
    let e = file(missing.to_str().unwrap())
        .open(Role::Source)
        .expect_err("missing source");
    let text = format!("{e:#}");
    assert!(
        text.starts_with(&format!(
            "cannot open '{}' for reading: ",
            missing.display()
        )),
        "{text}"
    );
    assert!(text.contains("No such file or directory"), "{text}");
}

#[test]
fn fifo_opens_as_source_and_sink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fifo");
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let writer_path = path.clone();
    let writer = std::thread::spawn(move || {
        let opened = file(writer_path.to_str().unwrap())
            .open(Role::Sink)
            .unwrap();
        assert!(!opened.truncate_pending, "a FIFO is not truncated");
        std::fs::File::from(opened.fd).write_all(b"x").unwrap();
    });
    let opened = file(path.to_str().unwrap()).open(Role::Source).unwrap();
    let mut buf = Vec::new();
    std::fs::File::from(opened.fd)
        .read_to_end(&mut buf)
        .unwrap();
    writer.join().unwrap();
    assert_eq!(buf, b"x");
}

#[test]
fn inherited_fds_are_duplicated_above_stderr() {
    let (read_end, _write_end) = nix::unistd::pipe().unwrap();
    let opened = Endpoint::Fd(read_end.as_raw_fd())
        .open(Role::Source)
        .unwrap();
    assert!(opened.fd.as_raw_fd() > 2);
    assert_ne!(opened.fd.as_raw_fd(), read_end.as_raw_fd());

    let e = Endpoint::Fd(i32::MAX)
        .open(Role::Sink)
        .expect_err("closed fd");
    assert!(
        format!("{e:#}").contains(&format!("fd:{}", i32::MAX)),
        "{e:#}"
    );

    let stdin = Endpoint::Stdio.open(Role::Source);
    assert!(stdin.map(|o| o.fd.as_raw_fd() > 2).unwrap_or(true));
}

#[test]
fn connect_and_listen_refuse_the_wrong_kind() {
    assert!(ok("tcp-l:0").connect().is_err());
    assert!(ok("x").connect().is_err());
    assert!(ok("tcp:h:1").listen().is_err());
}

#[test]
fn a_proxy_listener_hands_out_connections_past_their_header() {
    let listener = ok("tcp-listen:0,proxy")
        .listen_within(Some(Duration::from_millis(200)))
        .expect("listen");
    let local = listener.local_addr().to_string();
    // A silent client first: rejected at the deadline; then a good one, in two pieces.
    let _silent = TcpStream::connect(&local).unwrap();
    let mut good = TcpStream::connect(&local).unwrap();
    good.write_all(b"PROXY TCP6 2001:db8::1 ").unwrap();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        good.write_all(b"2001:db8::2 4000 80\r\npayload").unwrap();
        good
    });
    let accepted = listener.accept_from().expect("the good one");
    assert_eq!(accepted.peer, "[2001:db8::1]:4000");
    let mut server = std::fs::File::from(accepted.fd);
    let mut buf = [0u8; 7];
    server.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"payload", "the header is taken, the payload is not");
    let e = listener.accept_from().expect_err("the silent one");
    let rejected = crate::endpoint::Rejected::of(&e).expect("a rejection");
    assert!(rejected.reason.contains("within 0.200 s"), "{rejected}");
    drop(writer.join().unwrap());
}

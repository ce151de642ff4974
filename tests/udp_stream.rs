//! `relay` between UDP and a stream: `relay - udp:` and `relay udp-listen: -` as an
//! interactive `nc -u` (netcat-openbsd on the other end, both ways), datagrams framed
//! by a 2-byte length in a TCP hop (`frame=len16`, DNS over TCP's framing) byte-exact both
//! ways, a frame too long for UDP dropped and counted, and zerocat to zerocat over UDP
//! ending by itself (the empty datagram at EOF).

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::rig::Rig;
use crate::udp::{free_udp_port, nc_missing, udp_echo, udp_peer};
use crate::util::{
    assert_bytes_eq, data, final_path, json_report, listening_addr, run, stderr_text, zerocat,
    DEADLINE,
};

/// Waits until something binds UDP port `port` on 127.0.0.1 (netcat binds after it
/// starts; a datagram sent before would be refused).
fn wait_udp_bound(port: u16) {
    let local = format!("0100007F:{port:04X}");
    let started = Instant::now();
    while !std::fs::read_to_string("/proc/net/udp")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(&local))
    {
        assert!(
            started.elapsed() < DEADLINE,
            "nothing bound UDP port {port}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads `n` bytes from `from` (a child's stdout), failing after [`DEADLINE`].
fn read_exactly(from: &ChildStdout, n: usize, what: &str) -> Vec<u8> {
    let mut got = vec![0u8; n];
    let (tx, rx) = std::sync::mpsc::channel();
    let mut reader = reader_of(from);
    std::thread::spawn(move || {
        let mut buf = vec![0u8; n];
        let r = reader.read_exact(&mut buf).map(|()| buf);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(Ok(buf)) => got.copy_from_slice(&buf),
        other => panic!("{what}: {n} bytes never came ({other:?})"),
    }
    got
}

/// A second handle on a child's stdout pipe (a dup), for a reading thread.
fn reader_of(from: &ChildStdout) -> std::fs::File {
    use std::os::fd::AsFd;
    std::fs::File::from(from.as_fd().try_clone_to_owned().unwrap())
}

/// zerocat with stdin and stdout piped to the test, stderr kept for the report.
fn interactive(args: &[&str]) -> Child {
    let mut cmd = zerocat();
    cmd.args(["--stats", "json"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("spawn zerocat")
}

/// SIGINT, then the exit code and the JSON report.
fn interrupt(
    mut child: Child,
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
) -> (i32, serde_json::Value) {
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let err = match stderr {
        Some(t) => {
            let status = wait(&mut child);
            (status, t.join().unwrap())
        }
        None => {
            let mut buf = Vec::new();
            child.stderr.take().unwrap().read_to_end(&mut buf).unwrap();
            (wait(&mut child), buf)
        }
    };
    (err.0, json_report(&err.1))
}

fn wait(child: &mut Child) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().unwrap_or(-1);
        }
        assert!(started.elapsed() < DEADLINE, "zerocat never ended");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn relay_stdin_to_udp_talks_with_netcat_u_listen_both_ways() {
    if nc_missing() {
        return;
    }
    let port = free_udp_port();
    let mut nc = Command::new("nc")
        .args(["-u", "-l", "127.0.0.1", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_udp_bound(port);
    let mut z = interactive(&["relay", "-", &format!("udp:127.0.0.1:{port}")]);
    // Each line written is a read of zerocat's stdin: one datagram each.
    let lines: [&[u8]; 3] = [b"first line\n", b"second\n", b"third, the last\n"];
    let nc_out = nc.stdout.take().unwrap();
    let mut z_in = z.stdin.take().unwrap();
    let mut heard = Vec::new();
    for line in lines {
        z_in.write_all(line).unwrap();
        heard.extend(read_exactly(&nc_out, line.len(), "nc -u -l from zerocat"));
    }
    assert_bytes_eq(&heard, &lines.concat(), "zerocat's stdin to nc -u -l");
    // nc answers to the address it heard from: zerocat writes it to stdout.
    let answer = data(3000);
    nc.stdin.as_mut().unwrap().write_all(&answer).unwrap();
    let z_out = z.stdout.take().unwrap();
    let got = read_exactly(&z_out, answer.len(), "zerocat's stdout from nc");
    assert_bytes_eq(&got, &answer, "nc -u -l to zerocat's stdout");
    // zerocat's stdin ends: UDP has no EOF to pass on, so the session goes on (nc -u).
    drop(z_in);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        z.try_wait().unwrap().is_none(),
        "stdin's EOF ended the UDP session"
    );
    let (code, report) = interrupt(z, None);
    let _ = nc.kill();
    let _ = nc.wait();
    assert_eq!(code, 130, "{report}");
    assert_eq!(final_path(&report), "userspace", "{report}");
    assert_eq!(report["bytes_a_to_b"], heard.len() as u64, "{report}");
    assert_eq!(report["bytes_b_to_a"], answer.len() as u64, "{report}");
    assert_eq!(
        report["datagrams"]["a_to_b"], 3,
        "one datagram per read: {report}"
    );
    assert_eq!(report["datagrams"]["mmsg"], false, "{report}");
}

#[test]
fn relay_udp_listen_to_stdout_talks_with_netcat_u_both_ways() {
    if nc_missing() {
        return;
    }
    let mut z = interactive(&["relay", "udp-listen:0", "-"]);
    let (addr, stderr) = listening_addr(&mut z);
    let port = addr.rsplit(':').next().unwrap();
    let mut nc = Command::new("nc")
        .args(["-u", "127.0.0.1", port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let question = b"who is there?\n";
    nc.stdin.as_mut().unwrap().write_all(question).unwrap();
    let z_out = z.stdout.take().unwrap();
    let got = read_exactly(&z_out, question.len(), "zerocat's stdout from nc -u");
    assert_bytes_eq(&got, question, "nc -u to zerocat's stdout");
    // zerocat answers the peer it heard first.
    let answer = data(5000);
    z.stdin.as_mut().unwrap().write_all(&answer).unwrap();
    let nc_out = nc.stdout.take().unwrap();
    let back = read_exactly(&nc_out, answer.len(), "nc -u from zerocat's stdin");
    assert_bytes_eq(&back, &answer, "zerocat's stdin to nc -u");
    let (code, report) = interrupt(z, Some(stderr));
    let _ = nc.kill();
    let _ = nc.wait();
    assert_eq!(code, 130, "{report}");
    assert_eq!(final_path(&report), "userspace", "{report}");
    assert_eq!(report["bytes_a_to_b"], question.len() as u64, "{report}");
    assert_eq!(report["bytes_b_to_a"], answer.len() as u64, "{report}");
}

/// A len16 frame: the 2-byte big-endian length, then the datagram.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u16).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

#[test]
fn len16_frames_carry_datagrams_through_a_tcp_hop_byte_exact_both_ways() {
    // client --udp--> relay 1 --tcp, len16--> relay 2 --udp--> echo (reverses), and back.
    let (target, heard) = udp_echo();
    let far = Rig::new().relay(&["tcp-listen:0,frame=len16", &target]);
    let near = Rig::new().relay(&["udp-listen:0", &format!("tcp:{},frame=len16", far.addr())]);
    let socket = udp_peer();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    socket.connect(near.addr()).unwrap();
    let sizes = [1usize, 12, 512, 1400, 9000, 65_507, 0, 3];
    let mut buf = vec![0u8; 65_536];
    for (i, &size) in sizes.iter().enumerate() {
        let payload: Vec<u8> = data(size + i).into_iter().skip(i).collect();
        socket.send(&payload).unwrap();
        let n = socket.recv(&mut buf).expect("the answer within 30 s");
        let want: Vec<u8> = payload.iter().rev().copied().collect();
        assert_bytes_eq(
            &buf[..n],
            &want,
            &format!("datagram {i} of {size} bytes, there and back"),
        );
    }
    assert_eq!(
        heard.load(std::sync::atomic::Ordering::SeqCst),
        sizes.len() as u64
    );
    let total: u64 = sizes.iter().map(|&s| s as u64).sum();
    let near_end = near.stop();
    let far_end = far.stop();
    for (end, what) in [(&near_end, "near"), (&far_end, "far")] {
        let r = end.report();
        assert_eq!(final_path(r), "userspace", "{what}: {r}");
        assert_eq!(r["bytes_a_to_b"], total, "{what}: {r}");
        assert_eq!(r["bytes_b_to_a"], total, "{what}: {r}");
        assert_eq!(r["datagrams"]["a_to_b"], sizes.len() as u64, "{what}: {r}");
        assert_eq!(r["datagrams"]["b_to_a"], sizes.len() as u64, "{what}: {r}");
        assert_eq!(r["datagrams"]["dropped"], 0, "{what}: {r}");
    }
}

/// `relay udp-listen:…,deny= tcp:…,frame=len16`: a refused client's datagrams open no
/// connection and reach nobody, counted `refused`; an allowed client's are framed as ever.
#[test]
fn len16_relay_drops_the_datagrams_of_a_client_its_deny_list_refuses() {
    let upstream = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = Rig::new().relay(&[
        "udp-listen:0,deny=127.0.0.2",
        &format!("tcp:{},frame=len16", upstream.local_addr().unwrap()),
    ]);
    let refused = UdpSocket::bind("127.0.0.2:0").unwrap();
    for _ in 0..3 {
        refused.send_to(b"not me", relay.addr()).unwrap();
    }
    let allowed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let datagram = data(1200);
    allowed.send_to(&datagram, relay.addr()).unwrap();
    // The refused datagrams came first: the first connection is the allowed client's.
    let (mut conn, _) = upstream.accept().unwrap();
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut got = vec![0u8; 2 + datagram.len()];
    conn.read_exact(&mut got).unwrap();
    assert_bytes_eq(
        &got,
        &frame(&datagram),
        "the allowed client's datagram, framed",
    );
    let run = relay.stop();
    let report = run.report();
    assert_eq!(report["refused"], 3, "{report}");
    upstream.set_nonblocking(true).unwrap();
    assert!(
        upstream.accept().is_err(),
        "a connection for a refused client"
    );
}

#[test]
fn a_dns_style_tcp_client_gets_framed_answers_and_a_frame_too_long_for_udp_is_dropped() {
    let target = UdpSocket::bind("127.0.0.1:0").unwrap();
    target
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let relay = Rig::new().relay(&[
        "tcp-listen:0,frame=len16",
        &format!("udp:{}", target.local_addr().unwrap()),
    ]);
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // Three frames in one write, the second too long for one UDP datagram (65,507 bytes
    // at most over IPv4): it is dropped and counted, the others go on whole.
    let (q1, q2, q3) = (data(40), data(65_535), data(300));
    let mut stream = frame(&q1);
    stream.extend(frame(&q2));
    stream.extend(frame(&q3));
    // Split mid-frame: frames cross the reads of the stream.
    client.write_all(&stream[..1]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    client.write_all(&stream[1..]).unwrap();
    let mut buf = vec![0u8; 65_536];
    let (n, from) = target.recv_from(&mut buf).unwrap();
    assert_bytes_eq(&buf[..n], &q1, "first frame as a datagram");
    let (n, _) = target.recv_from(&mut buf).unwrap();
    assert_bytes_eq(&buf[..n], &q3, "third frame as a datagram");
    // Answers, one of them empty: each comes back as a frame of its own.
    let answers = [data(700), Vec::new(), data(65_507)];
    for a in &answers {
        target.send_to(a, from).unwrap();
    }
    let want: Vec<u8> = answers.iter().flat_map(|a| frame(a)).collect();
    let mut got = vec![0u8; want.len()];
    client.read_exact(&mut got).unwrap();
    assert_bytes_eq(&got, &want, "answers as len16 frames");
    drop(client);
    let end = relay.stop();
    let r = end.report();
    assert_eq!(final_path(r), "userspace", "{r}");
    assert_eq!(r["datagrams"]["a_to_b"], 2, "{r}");
    assert_eq!(r["datagrams"]["b_to_a"], 3, "{r}");
    assert_eq!(r["datagrams"]["dropped"], 1, "the 65,535-byte frame: {r}");
    assert_eq!(r["bytes_a_to_b"], (q1.len() + q3.len()) as u64, "{r}");
}

#[test]
fn zerocat_to_zerocat_over_udp_ends_by_itself_with_the_empty_datagram_at_eof() {
    let payload = data(100_000);
    // pipe into pipe: the receiver's empty-datagram end, which the sender now sends.
    let mut rig = Rig::new();
    let out = rig.path("out.bin");
    let dst = rig.file_sink(out.clone());
    let receiver = rig.args(["pipe", "udp-listen:0", &dst]).listen();
    let src = crate::util::write_file(receiver_dir(&out), "src.bin", &payload);
    // Lock-step sizes: 65,507 a datagram, the receiver's queue holds them all.
    let sent = run({
        let mut c = zerocat();
        c.args(["--stats", "json", "pipe"])
            .arg(&src)
            .arg(format!("udp:{}", receiver.addr()));
        c
    });
    assert_eq!(sent.status.code(), Some(0), "{}", stderr_text(&sent));
    let got = receiver.finish();
    got.assert_code(0, "pipe udp-listen file ended by the empty datagram");
    got.assert_final_path("userspace", "pipe udp-listen file");
    assert_bytes_eq(
        &std::fs::read(&out).unwrap(),
        &payload,
        "zerocat to zerocat over UDP",
    );

    // pipe into relay udp-listen: - (stdin empty): it ends too, exit 0.
    let mut z = zerocat();
    z.args(["--stats", "json", "relay", "udp-listen:0", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut z = z.spawn().unwrap();
    let (addr, stderr) = listening_addr(&mut z);
    let small = data(30_000);
    let src = crate::util::write_file(receiver_dir(&out), "small.bin", &small);
    let sent = run({
        let mut c = zerocat();
        c.arg("pipe").arg(&src).arg(format!("udp:{addr}"));
        c
    });
    assert_eq!(sent.status.code(), Some(0), "{}", stderr_text(&sent));
    let stdout = z.stdout.take().unwrap();
    let got = read_exactly(&stdout, small.len(), "relay's stdout");
    let code = wait(&mut z);
    let report = json_report(&stderr.join().unwrap());
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["ended"], "eof", "{report}");
    assert_eq!(final_path(&report), "userspace", "{report}");
    assert_bytes_eq(&got, &small, "pipe udp: into relay udp-listen: -");
}

fn receiver_dir(out: &std::path::Path) -> &std::path::Path {
    out.parent().unwrap()
}

#[test]
fn udp_with_a_stream_side_needs_its_framing_and_frame_is_a_stream_option() {
    for args in [
        vec!["relay", "udp-listen:0", "tcp:127.0.0.1:9"],
        vec!["relay", "tcp-listen:0", "udp:127.0.0.1:9"],
        vec!["relay", "-", "udp:127.0.0.1:9,frame=len16"],
        vec!["relay", "udp-listen:0,frame=len16", "-"],
        vec!["relay", "tcp-listen:0,frame=len16", "tcp:127.0.0.1:9"],
        vec!["relay", "tcp-listen:0,frame=len32", "udp:127.0.0.1:9"],
        vec!["relay", "udp-listen:0", "tcp-listen:0,frame=len16"],
        vec![
            "relay",
            "tcp-listen:0,frame=len16",
            "udp:127.0.0.1:9,size=100",
        ],
        vec!["pipe", "-", "tcp:127.0.0.1:9,frame=len16"],
        vec!["pipe", "tcp-listen:0,frame=len16", "-"],
    ] {
        let out = run({
            let mut c = zerocat();
            c.args(&args);
            c
        });
        let text = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(!text.contains("listening on"), "{args:?} opened: {text}");
    }
}

//! `--dump FILE`: what the dump holds, read back and compared with what was sent, in each
//! format; the relay's own path is still splice; a dump that cannot keep up misses bytes
//! (counted) instead of slowing the relay; bad `--dump` arguments are usage errors.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::thread;

use std::sync::Arc;

use crate::rig::{connections, dir_paths, Pace, Rig};
use crate::util::*;

/// A backend on 127.0.0.1 that answers each connection: echo (everything back as it
/// arrives) or, given `answer`, reads to EOF and then writes `answer` in one write.
fn backend(answer: Option<&'static [u8]>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            s.set_read_timeout(Some(DEADLINE)).unwrap();
            thread::spawn(move || {
                match answer {
                    Some(answer) => {
                        let mut got = Vec::new();
                        let _ = s.read_to_end(&mut got);
                        let _ = s.write_all(answer);
                    }
                    None => {
                        let mut buf = vec![0u8; 64 * 1024];
                        while let Ok(n) = s.read(&mut buf) {
                            if n == 0 || s.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

/// Sends `payload` (from a thread, so both directions flow at once), half-closes, and
/// returns what came back with the client's own address.
fn exchange(addr: &str, payload: &[u8]) -> (Vec<u8>, String) {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let local = s.local_addr().unwrap().to_string();
    let mut writer = s.try_clone().unwrap();
    let sent = payload.to_vec();
    let sending = thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    (&s).read_to_end(&mut got).unwrap();
    sending.join().unwrap();
    (got, local)
}

/// The dump's lines with each timestamp replaced by `T`.
fn untimed(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once(' ') {
            Some((mark @ ("#" | ">" | "<" | "!"), rest)) => {
                let rest = rest.split_once(' ').map_or("", |(_, r)| r);
                format!("{mark} T {rest}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

const REQUEST: &[u8] = b"GET / HTTP/1.0\r\n\r\n";
const ANSWER: &[u8] = b"HTTP/1.0 200 OK\r\n\r\nhi\\\x00\xff\n";

/// A relay of one known exchange with `--dump` in `format`, forced onto splice: the dump
/// as written, the client's and the backend's addresses.
fn dump_known_exchange(format: &str) -> (Vec<u8>, String, String) {
    let backend = backend(Some(ANSWER));
    let rig = Rig::new();
    let dump = rig.path("dump");
    let relay = rig
        .args(["--via", "splice", "--dump"])
        .arg(&dump)
        .args(["--dump-format", format])
        .relay(&[
            "--once",
            "tcp-listen:127.0.0.1:0",
            &format!("tcp:{backend}"),
        ]);
    let (got, client) = exchange(relay.addr(), REQUEST);
    assert_bytes_eq(&got, ANSWER, "the answer through the relay");
    let end = relay.finish();
    end.assert_code(0, "relay");
    let conn = &connections(end.report())[0];
    for key in ["a_to_b", "b_to_a"] {
        assert_eq!(dir_paths(&conn[key]).unwrap(), ["splice"], "{key}: {conn}");
    }
    assert!(
        end.stderr.contains("dump: ") && end.stderr.contains(", 0 B missed"),
        "{}",
        end.stderr
    );
    // The JSON report says it too, and that tee(2) fed it (the relay spliced).
    let len = (REQUEST.len() + ANSWER.len()) as u64;
    assert_dump_totals(end.report(), len, "teed", "relay --dump");
    (std::fs::read(&dump).unwrap(), client, backend)
}

#[test]
fn hex_dump_of_a_known_exchange_is_hexdump_c_lines_and_the_relay_still_splices() {
    let (dump, client, backend) = dump_known_exchange("hex");
    let want = format!(
        "# T conn 1 open {client} > {backend}
> T conn 1 a>b offset 0 length 18
00000000  47 45 54 20 2f 20 48 54  54 50 2f 31 2e 30 0d 0a  |GET / HTTP/1.0..|
00000010  0d 0a                                             |..|
# T conn 1 a>b end at 18
< T conn 1 b>a offset 0 length 25
00000000  48 54 54 50 2f 31 2e 30  20 32 30 30 20 4f 4b 0d  |HTTP/1.0 200 OK.|
00000010  0a 0d 0a 68 69 5c 00 ff  0a                       |...hi\\...|
# T conn 1 b>a end at 25
"
    );
    assert_eq!(untimed(&String::from_utf8(dump).unwrap()), want);
}

#[test]
fn text_dump_of_a_known_exchange_escapes_what_is_not_printable() {
    let (dump, client, backend) = dump_known_exchange("text");
    let want = format!(
        "# T conn 1 open {client} > {backend}
> T conn 1 a>b offset 0 length 18
GET / HTTP/1.0\\r\\n
\\r\\n
# T conn 1 a>b end at 18
< T conn 1 b>a offset 0 length 25
HTTP/1.0 200 OK\\r\\n
\\r\\n
hi\\\\\\x00\\xff\\n
# T conn 1 b>a end at 25
"
    );
    assert_eq!(untimed(&String::from_utf8(dump).unwrap()), want);
}

/// What a hex or text dump says each direction carried: offset -> bytes, and the bytes it
/// marked missed.
#[derive(Default)]
struct Said {
    chunks: [BTreeMap<u64, Vec<u8>>; 2],
    missed: [u64; 2],
}

fn read_back(dump: &str, hex: bool) -> Said {
    let mut said = Said::default();
    let mut current: Option<(usize, u64, usize)> = None;
    let mut body = String::new();
    let mut close = |current: &mut Option<(usize, u64, usize)>, body: &mut String| {
        if let Some((dir, offset, len)) = current.take() {
            let bytes = if hex { unhex(body) } else { unescape(body) };
            assert_eq!(bytes.len(), len, "record at {offset} of direction {dir}");
            said.chunks[dir].insert(offset, bytes);
        }
        body.clear();
    };
    for line in dump.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[0] {
            ">" | "<" => {
                close(&mut current, &mut body);
                let dir = usize::from(words[0] == "<");
                current = Some((dir, words[6].parse().unwrap(), words[8].parse().unwrap()));
            }
            "#" | "!" => {
                close(&mut current, &mut body);
                if words[0] == "!" {
                    said.missed[usize::from(words[4] == "b>a")] += words[8].parse::<u64>().unwrap();
                }
            }
            _ => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    close(&mut current, &mut body);
    said
}

/// The bytes of hexdump -C lines (offset, 16 hex columns, the ASCII column).
fn unhex(body: &str) -> Vec<u8> {
    body.lines()
        .flat_map(|line| {
            line[10..58]
                .split_whitespace()
                .map(|h| u8::from_str_radix(h, 16).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The bytes of text lines: line breaks are not bytes; `\n`, `\r`, `\t`, `\\`, `\xHH` are.
fn unescape(body: &str) -> Vec<u8> {
    let text: Vec<u8> = body.bytes().filter(|&b| b != b'\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'\\' {
            out.push(text[i]);
            i += 1;
            continue;
        }
        match text[i + 1] {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'\\' => out.push(b'\\'),
            b'x' => {
                let hex = std::str::from_utf8(&text[i + 2..i + 4]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 2;
            }
            other => panic!("unknown escape \\{}", other as char),
        }
        i += 2;
    }
    out
}

/// Every byte a direction's dump holds is the payload's byte at its offset; the records
/// do not overlap; held + missed is all of it.
#[track_caller]
fn assert_dump_matches(chunks: &BTreeMap<u64, Vec<u8>>, missed: u64, payload: &[u8], what: &str) {
    let mut next = 0u64;
    let mut held = 0u64;
    for (&offset, bytes) in chunks {
        assert!(
            offset >= next,
            "{what}: a record at {offset} overlaps the one before"
        );
        let end = offset as usize + bytes.len();
        assert!(end <= payload.len(), "{what}: a record past the end");
        assert_bytes_eq(bytes, &payload[offset as usize..end], what);
        held += bytes.len() as u64;
        next = end as u64;
    }
    assert_eq!(
        held + missed,
        payload.len() as u64,
        "{what}: held {held} + missed {missed}"
    );
}

/// A bulk echo with `--dump` under auto: the relay's directions move to splice as without
/// a dump, and the dump holds each byte once, in order, at its offset (what it missed,
/// if the loaded machine made it fall behind, marked and counted).
fn bulk_echo_dumped(format: &str) -> (Vec<u8>, Vec<u8>, String) {
    let backend = backend(None);
    let rig = Rig::new();
    let dump = rig.path("dump");
    let relay = rig
        .args(["--dump"])
        .arg(&dump)
        .args(["--dump-format", format])
        .relay(&[
            "--once",
            "tcp-listen:127.0.0.1:0",
            &format!("tcp:{backend}"),
        ]);
    let payload = data(8 << 20);
    let (got, _) = exchange(relay.addr(), &payload);
    assert_bytes_eq(&got, &payload, "8 MiB echoed through the relay");
    let end = relay.finish();
    end.assert_code(0, "relay");
    let conn = &connections(end.report())[0];
    for key in ["a_to_b", "b_to_a"] {
        assert_eq!(conn[key]["bytes"].as_u64(), Some(8 << 20), "{conn}");
        assert!(
            dir_paths(&conn[key])
                .unwrap()
                .contains(&"splice".to_string()),
            "{key} still splices: {conn}"
        );
    }
    (std::fs::read(&dump).unwrap(), payload, end.stderr)
}

#[test]
fn hex_dump_of_a_bulk_echo_holds_every_byte_once_at_its_offset() {
    let (dump, payload, _) = bulk_echo_dumped("hex");
    let said = read_back(&String::from_utf8(dump).unwrap(), true);
    for dir in 0..2 {
        assert_dump_matches(&said.chunks[dir], said.missed[dir], &payload, "hex dump");
    }
}

#[test]
fn text_dump_of_a_bulk_echo_holds_every_byte_once_at_its_offset() {
    let (dump, payload, _) = bulk_echo_dumped("text");
    let said = read_back(&String::from_utf8(dump).unwrap(), false);
    for dir in 0..2 {
        assert_dump_matches(&said.chunks[dir], said.missed[dir], &payload, "text dump");
    }
}

/// What one address sent in a pcap: sequence number -> payload, and each packet's flags.
type Sent = (BTreeMap<u32, Vec<u8>>, Vec<u8>);

/// The TCP segments of a pcap file (LINKTYPE_RAW, IPv4 or IPv6), by sender address:
/// sequence number -> payload, and the flags seen.
fn read_pcap(file: &[u8]) -> BTreeMap<String, Sent> {
    let u32le = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap());
    assert_eq!(u32le(file), 0xa1b2_c3d4, "pcap magic");
    assert_eq!(u32le(&file[20..]), 101, "LINKTYPE_RAW");
    let mut by_sender = BTreeMap::new();
    let mut p = 24;
    while p < file.len() {
        let len = u32le(&file[p + 8..]) as usize;
        let packet = &file[p + 16..p + 16 + len];
        p += 16 + len;
        let (src, tcp) = match packet[0] >> 4 {
            4 => {
                let ihl = usize::from(packet[0] & 15) * 4;
                let ip = std::net::Ipv4Addr::from(<[u8; 4]>::try_from(&packet[12..16]).unwrap());
                (ip.to_string(), &packet[ihl..])
            }
            6 => {
                let ip = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&packet[8..24]).unwrap());
                (ip.to_string(), &packet[40..])
            }
            v => panic!("IP version {v}"),
        };
        let port = u16::from_be_bytes([tcp[0], tcp[1]]);
        let seq = u32::from_be_bytes(tcp[4..8].try_into().unwrap());
        let payload = &tcp[usize::from(tcp[12] >> 4) * 4..];
        let entry: &mut Sent = by_sender.entry(format!("{src}:{port}")).or_default();
        entry.1.push(tcp[13]);
        if !payload.is_empty() {
            entry.0.insert(seq, payload.to_vec());
        }
    }
    by_sender
}

#[test]
fn pcap_dump_is_a_tcp_conversation_between_the_real_addresses() {
    let (dump, client, backend) = dump_known_exchange("pcap");
    let segments = read_pcap(&dump);
    assert_eq!(segments.len(), 2, "two senders: {:?}", segments.keys());
    let (from_client, client_flags) = &segments[&client];
    let (from_backend, backend_flags) = &segments[&backend];
    // SYN, then the handshake's ACK, the data (PSH|ACK) and FIN|ACK; the backend's
    // SYN|ACK.
    assert_eq!(client_flags, &[0x02, 0x10, 0x18, 0x11], "client's flags");
    assert_eq!(backend_flags, &[0x12, 0x18, 0x11], "backend's flags");
    assert_eq!(
        from_client.iter().collect::<Vec<_>>(),
        [(&1, &REQUEST.to_vec())]
    );
    assert_eq!(
        from_backend.iter().collect::<Vec<_>>(),
        [(&1, &ANSWER.to_vec())]
    );
}

#[test]
fn pcap_dump_of_a_bulk_echo_holds_every_byte_at_its_sequence_number() {
    let (dump, payload, stderr) = bulk_echo_dumped("pcap");
    let segments = read_pcap(&dump);
    assert_eq!(segments.len(), 2, "{:?}", segments.keys());
    let missed: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("zerocat: dump: "))
        .and_then(|l| l.split(", ").nth(1))
        .map_or(
            u64::MAX,
            |m| if m.starts_with("0 B") { 0 } else { u64::MAX },
        );
    for (sender, (chunks, _)) in &segments {
        let by_offset: BTreeMap<u64, Vec<u8>> = chunks
            .iter()
            .map(|(&seq, b)| (u64::from(seq - 1), b.clone()))
            .collect();
        let held: u64 = by_offset.values().map(|b| b.len() as u64).sum();
        let gap = payload.len() as u64 - held;
        assert!(
            gap == 0 || missed != 0,
            "{sender}: {gap} bytes not in the pcap, none said missed"
        );
        assert_dump_matches(&by_offset, gap, &payload, "pcap");
    }
}

/// The dump's file is a FIFO nobody reads until the relay is done: the dump falls behind
/// at once, and the relay goes on at its own pace; the report counts what was missed and
/// the dump marks it.
#[test]
fn a_dump_that_cannot_keep_up_misses_bytes_and_the_relay_goes_on() {
    let payload = data(16 << 20);
    let (dumped, line) = relay_into_a_stalled_dump(&payload);
    assert!(line.contains("the dump fell behind"), "{line}");
    let said = read_back(&dumped, true);
    assert!(
        said.missed[0] + said.missed[1] > 0,
        "the dump marks what it missed"
    );
    for dir in 0..2 {
        assert_dump_matches(
            &said.chunks[dir],
            said.missed[dir],
            &payload,
            "stalled dump",
        );
    }
}

/// A run of bytes the dump missed is marked once, however many copies were refused on
/// the way (one mark a refused copy woke the dump's writer each time and slowed the
/// relay: bench/NOTEBOOK.md#relay-dump-cost-found): no two marks of a direction follow each
/// other with nothing between, and a stalled dump of 16 MiB each way holds a handful of
/// marks, not one a splice.
#[test]
fn a_run_of_missed_bytes_is_marked_once() {
    let payload = data(16 << 20);
    let (dumped, _) = relay_into_a_stalled_dump(&payload);
    // Per direction, the kind of each record in order: 'd' data, 'm' missed.
    let mut kinds = [String::new(), String::new()];
    for line in dumped.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words[0] {
            ">" | "<" => kinds[usize::from(words[0] == "<")].push('d'),
            "!" => kinds[usize::from(words[4] == "b>a")].push('m'),
            _ => {}
        }
    }
    for (dir, kinds) in kinds.iter().enumerate() {
        assert!(
            kinds.contains('m'),
            "direction {dir} missed nothing: {kinds}"
        );
        assert!(
            !kinds.contains("mm"),
            "direction {dir}: a missed run marked piecemeal ({} marks): {kinds}",
            kinds.matches('m').count()
        );
    }
}

/// A relay of `payload` (echoed) whose dump's file is a FIFO nobody reads until the relay
/// is done: the hex dump as written and the report's dump line.
fn relay_into_a_stalled_dump(payload: &[u8]) -> (String, String) {
    let backend = backend(None);
    let rig = Rig::new();
    let fifo = rig.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Opened for reading first (non-blocking), so zerocat's open for writing returns.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(&fifo)
        .unwrap();
    let relay = rig.args(["--dump"]).arg(&fifo).relay(&[
        "--once",
        "tcp-listen:127.0.0.1:0",
        &format!("tcp:{backend}"),
    ]);
    let (got, _) = exchange(relay.addr(), payload);
    assert_bytes_eq(&got, payload, "echoed with the dump stalled");
    // Only now is the dump read, so the relay can end (its dump's writer flushes).
    let draining = thread::spawn(move || drain(reader));
    let end = relay.finish();
    end.assert_code(0, "relay");
    let dumped = draining.join().unwrap();
    let line = end
        .stderr
        .lines()
        .find(|l| l.starts_with("zerocat: dump: "))
        .unwrap_or_else(|| panic!("no dump line: {}", end.stderr));
    (String::from_utf8(dumped).unwrap(), line.to_string())
}

use std::os::unix::fs::OpenOptionsExt;

/// Reads a non-blocking FIFO to EOF.
fn drain(mut fifo: std::fs::File) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let start = std::time::Instant::now();
    loop {
        match fifo.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(start.elapsed() < DEADLINE, "the dump never ended");
                thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// `--dump DIR` and an unknown format: usage errors (exit 2) before anything listens; a
/// relay that had started would serve until stopped.
#[test]
fn dump_into_a_directory_or_in_an_unknown_format_is_a_usage_error() {
    let dir = tempdir();
    for args in [
        vec!["--dump", dir.path().to_str().unwrap()],
        vec!["--dump", "x.dump", "--dump-format", "json"],
    ] {
        let mut cmd = zerocat();
        cmd.current_dir(dir.path()).args(&args).args([
            "relay",
            "tcp-listen:127.0.0.1:0",
            "tcp:127.0.0.1:9",
        ]);
        let out = run(cmd);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr_text(&out)
        );
        assert!(
            !stderr_text(&out).contains("listening"),
            "{}",
            stderr_text(&out)
        );
    }
    assert!(!Path::new(&dir.path().join("x.dump")).exists());
}

// pipe and tee: the same dump of their one stream (connection 1, a>b), fed the same way.

/// The `dump` object of a pipe or tee report: the dump's bytes, what it missed, and that
/// its copies were fed by tee(2) (`teed`) or by writes (`written`), as asked.
#[track_caller]
fn assert_dump_totals(report: &serde_json::Value, len: u64, fed_by: &str, what: &str) {
    let dump = &report["dump"];
    let (bytes, missed) = (dump["bytes"].as_u64(), dump["missed"].as_u64());
    assert_eq!(
        bytes.zip(missed).map(|(b, m)| b + m),
        Some(len),
        "{what}: {report}"
    );
    let other = if fed_by == "teed" { "written" } else { "teed" };
    assert_eq!(dump[fed_by].as_u64(), bytes, "{what}: {report}");
    assert_eq!(dump[other].as_u64(), Some(0), "{what}: {report}");
    assert_eq!(dump["error"], serde_json::Value::Null, "{what}: {report}");
}

/// The hex dump of a pipe or tee: one stream, a>b, every byte once at its offset, then
/// its end.
#[track_caller]
fn assert_stream_dumped(dump: &Path, payload: &[u8], what: &str) {
    let text = std::fs::read_to_string(dump).unwrap();
    assert!(
        text.starts_with("# "),
        "{what}: {}",
        &text[..80.min(text.len())]
    );
    assert!(
        text.trim_end()
            .ends_with(&format!("conn 1 a>b end at {}", payload.len())),
        "{what}: the dump ends with the stream's end"
    );
    let said = read_back(&text, true);
    assert!(said.chunks[1].is_empty(), "{what}: one direction only");
    assert_dump_matches(&said.chunks[0], said.missed[0], payload, what);
}

/// `pipe --dump` on each way its splice runs — a file into TCP (sendfile without a dump:
/// splice through a pipe of zerocat's, teed), stdin's pipe into a file (its head teed
/// straight from the source pipe), TCP into stdout's pipe (through a pipe of zerocat's,
/// since the sink's pipe is read by another): every byte delivered, the path splice, and
/// the dump holds the stream, fed by tee(2).
#[test]
fn pipe_dump_holds_the_stream_and_the_pipe_still_splices() {
    let payload = Arc::new(data(3 << 20));
    for case in ["file -> tcp", "stdin -> file", "tcp -> stdout"] {
        let mut rig = Rig::new();
        let dump = rig.path("dump");
        let (src, dst) = match case {
            "file -> tcp" => (rig.file("src", &payload), rig.tcp_sink(Pace::Full)),
            "stdin -> file" => (
                rig.stdin(payload.clone(), Pace::Full),
                rig.file_sink(rig.path("dst")),
            ),
            _ => (
                rig.tcp_source(payload.clone(), Pace::Full),
                rig.stdout_sink(Pace::Full),
            ),
        };
        let run = rig
            .arg("--dump")
            .arg(&dump)
            .args(["pipe", &src, &dst])
            .run();
        run.assert_code(0, case);
        run.assert_held(0, &payload, case);
        run.assert_final_path("splice", case);
        assert_dump_totals(run.report(), payload.len() as u64, "teed", case);
        assert_stream_dumped(&dump, &payload, case);
    }
}

/// `--via userspace`: the dump gets the very buffers written (no tee), same content.
#[test]
fn pipe_dump_on_the_userspace_path_is_fed_by_its_writes() {
    let payload = data(1 << 20);
    let mut rig = Rig::new();
    let dump = rig.path("dump");
    let src = rig.file("src", &payload);
    let dst = rig.file_sink(rig.path("dst"));
    let run = rig
        .arg("--dump")
        .arg(&dump)
        .args(["--via", "userspace", "pipe", &src, &dst])
        .run();
    run.assert_code(0, "pipe --via userspace");
    run.assert_held(0, &payload, "pipe --via userspace");
    run.assert_final_path("userspace", "pipe --via userspace");
    assert_dump_totals(run.report(), payload.len() as u64, "written", "userspace");
    assert_stream_dumped(&dump, &payload, "pipe --via userspace");
}

/// `tee --dump`: two file sinks (one teed, one fed by splice out of the source's pipe)
/// and one from stdin's pipe into stdout's (a source pipe not zerocat's, whose head the
/// dump tees before it is consumed): every sink whole, the fan-out's paths as without a
/// dump, the dump holds the source's stream once.
#[test]
fn tee_dump_holds_the_stream_and_the_fan_out_still_tees() {
    let payload = Arc::new(data(3 << 20));
    for case in ["file -> 2 files", "stdin -> stdout"] {
        let mut rig = Rig::new();
        let dump = rig.path("dump");
        let args = match case {
            "file -> 2 files" => vec![
                rig.file("src", &payload),
                rig.file_sink(rig.path("a")),
                rig.file_sink(rig.path("b")),
            ],
            _ => vec![
                rig.stdin(payload.clone(), Pace::Full),
                rig.stdout_sink(Pace::Full),
            ],
        };
        let run = rig.arg("--dump").arg(&dump).arg("tee").args(&args).run();
        run.assert_code(0, case);
        for i in 0..args.len() - 1 {
            run.assert_held(i, &payload, case);
        }
        let want = if args.len() > 2 { "tee" } else { "splice" };
        run.assert_final_path(want, case);
        assert_dump_totals(run.report(), payload.len() as u64, "teed", case);
        assert_stream_dumped(&dump, &payload, case);
    }
}

/// A dump's text cut per connection: each connection's lines (its records and its hex or
/// text bodies), by the connection number every record's fourth word is.
fn per_connection(text: &str) -> BTreeMap<u64, String> {
    let mut conns: BTreeMap<u64, String> = BTreeMap::new();
    let mut current = None;
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        if matches!(words[0], "#" | ">" | "<" | "!") && words.get(2) == Some(&"conn") {
            current = Some(words[3].parse::<u64>().unwrap());
        }
        let conn = current.expect("a line before any record");
        let lines = conns.entry(conn).or_default();
        lines.push_str(line);
        lines.push('\n');
    }
    conns
}

/// `tee --keep-open --dump`: clients at once into two file sinks, taken one after another;
/// each is a connection of its own in the dump (numbered in the order it was taken, its
/// bytes once at their offsets, then its end), the sinks get every client whole in that
/// same order, and the fan-out still tees (the first sink's lane tee(2), the last splice).
#[test]
fn tee_keep_open_dump_holds_each_connection_as_its_own_stream_and_still_tees() {
    use crate::keep_open::{assert_whole_blocks, client_bytes, send_all_at_once};
    use nix::sys::signal::Signal;
    const CLIENTS: usize = 4;
    const LEN: usize = 300_000;
    let rig = Rig::new();
    let (dump, one, two) = (rig.path("dump"), rig.path("one"), rig.path("two"));
    let mut running = rig
        .arg("--dump")
        .arg(&dump)
        .args(["tee", "--keep-open", "tcp-listen:0"])
        .arg(&one)
        .arg(&two)
        .listen();
    send_all_at_once(running.addr(), CLIENTS, LEN);
    let total = (CLIENTS * LEN) as u64;
    for sink in [&one, &two] {
        running.wait_until("a sink", total, || {
            std::fs::metadata(sink).map_or(0, |m| m.len())
        });
    }
    running.signal(Signal::SIGINT);
    let end = running.finish();
    end.assert_code(130, "tee --keep-open ends at the signal");
    let report = end.report();
    assert_eq!(report["connections"], CLIENTS as u64, "{report}");
    for (sink, path) in [(0, "tee"), (1, "splice")] {
        assert_eq!(report["sinks"][sink]["bytes"], total, "{report}");
        assert_eq!(report["sinks"][sink]["paths"][0]["path"], path, "{report}");
    }
    assert_dump_totals(report, total, "teed", "tee --keep-open");
    let got = std::fs::read(&one).unwrap();
    assert_whole_blocks(&got, CLIENTS, LEN);
    assert_bytes_eq(&std::fs::read(&two).unwrap(), &got, "the second sink");
    // The sinks' order of clients, by each block's first byte (the client's number).
    let order: Vec<usize> = got.chunks(LEN).map(|block| usize::from(block[0])).collect();
    let conns = per_connection(&std::fs::read_to_string(&dump).unwrap());
    assert_eq!(
        conns.keys().copied().collect::<Vec<_>>(),
        (1..=CLIENTS as u64).collect::<Vec<_>>(),
        "one connection number per client"
    );
    for ((conn, text), client) in conns.iter().zip(order) {
        let what = format!("connection {conn} (client {client})");
        assert!(
            text.trim_end()
                .ends_with(&format!("conn {conn} a>b end at {LEN}")),
            "{what}: ends with its stream's end"
        );
        let said = read_back(text, true);
        assert!(said.chunks[1].is_empty(), "{what}: one direction only");
        assert_dump_matches(
            &said.chunks[0],
            said.missed[0],
            &client_bytes(client, LEN),
            &what,
        );
    }
}

/// The dump's writer thread runs in the idle scheduling class, SCHED_IDLE (so on a busy
/// machine it misses bytes rather than take a core the transfer needs), the thread moving
/// the bytes in the normal class at zerocat's own nice; and the dump still holds what a
/// quiet transfer sent. Where SCHED_IDLE is refused, the writer is at nice 19 and the
/// dump's line says so.
#[test]
fn the_dump_writer_yields_to_the_transfer() {
    use nix::sys::signal::Signal;
    let rig = Rig::new();
    let (dump, out) = (rig.path("dump"), rig.path("out"));
    let mut running = rig
        .arg("--dump")
        .arg(&dump)
        .args(["pipe", "--keep-open", "tcp-listen:0"])
        .arg(&out)
        .listen();
    // Fields 19 and 41 of /proc/PID/task/TID/stat (after the parenthesised name): the
    // nice and the scheduling policy (5 is SCHED_IDLE).
    let field = |stat: &str, n: usize| -> i64 {
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(n - 3).unwrap().parse().unwrap()
    };
    let nice_of = |stat: &str| field(stat, 19);
    let policy_of = |stat: &str| field(stat, 41);
    let tasks = format!("/proc/{}/task", running.pid());
    let threads = || {
        let mut nices = BTreeMap::new();
        for task in std::fs::read_dir(&tasks).unwrap() {
            let task = task.unwrap().path();
            let (Ok(comm), Ok(stat)) = (
                std::fs::read_to_string(task.join("comm")),
                std::fs::read_to_string(task.join("stat")),
            ) else {
                continue; // a thread that ended meanwhile
            };
            nices.insert(comm.trim().to_string(), (policy_of(&stat), nice_of(&stat)));
        }
        nices
    };
    // The writer yields as it starts, which may be just after the listening line.
    const SCHED_IDLE: i64 = 5;
    let yielded = |t: Option<&(i64, i64)>| matches!(t, Some(&(SCHED_IDLE, _) | &(_, 19)));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut nices = threads();
    while !yielded(nices.get("dump")) && std::time::Instant::now() < deadline {
        thread::sleep(std::time::Duration::from_millis(10));
        nices = threads();
    }
    let main = std::fs::read_to_string(format!("/proc/{}/stat", running.pid())).unwrap();
    let (own_policy, own) = (policy_of(&main), nice_of(&main));
    assert!(
        yielded(nices.get("dump")),
        "threads and their (policy, nice): {nices:?}"
    );
    let idle_class = nices["dump"].0 == SCHED_IDLE;
    assert!(
        own < 19 && own_policy != SCHED_IDLE,
        "zerocat's main thread at policy {own_policy}, nice {own}"
    );
    let payload = data(100_000);
    TcpStream::connect(running.addr())
        .unwrap()
        .write_all(&payload)
        .unwrap();
    running.wait_until("the sink", payload.len() as u64, || {
        std::fs::metadata(&out).map_or(0, |m| m.len())
    });
    running.signal(Signal::SIGINT);
    let end = running.finish();
    end.assert_code(130, "pipe --keep-open ends at the signal");
    assert_bytes_eq(&std::fs::read(&out).unwrap(), &payload, "the sink");
    assert_dump_totals(
        end.report(),
        payload.len() as u64,
        "teed",
        "pipe --keep-open",
    );
    assert_stream_dumped(&dump, &payload, "pipe --keep-open");
    assert_eq!(
        end.stderr.contains("its writer ran at nice 19"),
        !idle_class,
        "the dump's line says whether its writer got the idle class: {}",
        end.stderr
    );
}

/// An idle-class writer still gets a core nobody else wants: a stream of several pipes'
/// worth of the dump's buffer, sent a piece at a time, each piece only once the dump's
/// file shows the one before (so no wait here is a guess at how long the writer takes),
/// is held whole — nothing missed — and the file shows each piece before the run ends
/// (the writer flushes what it formatted whenever it has caught up, for `tail -f`).
#[test]
fn a_dump_with_a_core_to_spare_holds_every_byte() {
    const PIECE: usize = 32 << 10;
    let payload = data(96 * PIECE);
    let rig = Rig::new();
    let (dump, out) = (rig.path("dump"), rig.path("out"));
    let mut running = rig
        .arg("--dump")
        .arg(&dump)
        .args(["pipe", "tcp-listen:127.0.0.1:0"])
        .arg(&out)
        .listen();
    let mut client = TcpStream::connect(running.addr()).unwrap();
    // A whole hex line is 79 bytes for 16 of the stream; records' heads add more. So a
    // file this long holds every line of the bytes sent (less the few a head's bytes
    // stand for), and the dump's pipe is all but empty again.
    let formatted = |sent: usize| (sent / 16 * 79) as u64;
    let dump_len = || std::fs::metadata(&dump).map_or(0, |m| m.len());
    for (i, piece) in payload.chunks(PIECE).enumerate() {
        client.write_all(piece).unwrap();
        let sent = (i + 1) * PIECE;
        running.wait_until("the dump's file", formatted(sent), dump_len);
    }
    drop(client);
    let end = running.finish();
    end.assert_code(0, "pipe --dump of a paced stream");
    assert_bytes_eq(&std::fs::read(&out).unwrap(), &payload, "the sink");
    assert_eq!(
        end.report()["dump"]["missed"].as_u64(),
        Some(0),
        "{}",
        end.report()
    );
    assert_dump_totals(end.report(), payload.len() as u64, "teed", "paced pipe");
    assert_stream_dumped(&dump, &payload, "paced pipe");
}

/// The text report says the transfer's path, and the dump's line where it went and how it
/// was fed.
#[test]
fn pipe_text_report_says_the_dump_was_fed_by_tee() {
    let rig = Rig::bare();
    let dump = rig.path("dump");
    let src = rig.file("src", b"hello\n");
    let out = rig.path("out");
    let run = rig
        .arg("--dump")
        .arg(&dump)
        .args(["--dump-format", "text", "pipe", &src])
        .arg(&out)
        .run();
    run.assert_code(0, "pipe --dump");
    let line = format!(
        "zerocat: dump: 6 B into {} (text), 0 B missed, fed by tee(2) from the transfer's pipe",
        dump.display()
    );
    assert!(
        run.stderr.contains("via splice") && run.stderr.contains(&line),
        "{}",
        run.stderr
    );
    assert!(
        std::fs::read_to_string(&dump)
            .unwrap()
            .contains("hello\\n\n"),
        "the text dump holds the line"
    );
}

/// A forced path the dump cannot see (copy_file_range, sendfile: no pipe, no buffer) and
/// `copy --dump`: usage errors before the dump file is made.
#[test]
fn pipe_dump_with_a_path_it_cannot_see_or_copy_dump_is_a_usage_error() {
    let dir = tempdir();
    let src = write_file(dir.path(), "src", b"bytes");
    for args in [
        vec!["--via", "copy_file_range", "pipe"],
        vec!["--via", "sendfile", "pipe"],
        vec!["copy"],
    ] {
        let mut cmd = zerocat();
        cmd.current_dir(dir.path())
            .args(["--dump", "x.dump"])
            .args(&args)
            .arg(&src)
            .arg(dir.path().join("dst"));
        let out = run(cmd);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr_text(&out)
        );
        assert!(
            stderr_text(&out).contains("--dump"),
            "{}",
            stderr_text(&out)
        );
    }
    assert!(!dir.path().join("dst").exists());
    assert!(!dir.path().join("x.dump").exists());
}

/// A user who could not take the writer back out of the idle class at the end (no
/// CAP_SYS_NICE, RLIMIT_NICE 0: nobody, as most users) gets a writer at nice 19 instead —
/// an idle-class writer left to finish after the transfer could wait seconds for a core —
/// and the dump's line says so; the dump is whole.
#[test]
fn a_dump_of_a_user_without_cap_sys_nice_says_its_writer_ran_at_nice_19() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let Some(nobody) = AsNobody::new() else {
        return;
    };
    let dir = nobody.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let payload = data(100_000);
    let (src, dump) = (dir.join("src"), dir.join("dump"));
    std::fs::write(&src, &payload).unwrap();
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut cmd = nobody.zerocat();
    cmd.arg("--stats")
        .arg("json")
        .arg("--dump")
        .arg(&dump)
        .args(["pipe"])
        .arg(&src)
        .arg("/dev/null");
    // SAFETY: setrlimit is async-signal-safe; lowering a limit takes no privilege.
    unsafe {
        cmd.pre_exec(|| {
            use nix::sys::resource::{setrlimit, Resource};
            setrlimit(Resource::RLIMIT_NICE, 0, 0).map_err(std::io::Error::from)
        });
    }
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "(its writer ran at nice 19: without CAP_SYS_NICE it could not have left the idle \
             class to finish)"
        ),
        "{err}"
    );
    let report = json_report(&out.stderr);
    assert_dump_totals(
        &report,
        payload.len() as u64,
        "teed",
        "pipe --dump as nobody",
    );
    assert_stream_dumped(&dump, &payload, "pipe --dump as nobody");
}

//! `s3://` against two independent S3 servers started here on loopback: moto_server (pip
//! moto[server]) and s3s-fs (cargo install s3s-fs --version 0.14.1 --features binary).
//! Each test makes its own bucket; a server that is not installed is SKIPPED, said.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use zerocat::endpoint::s3::xml;

use crate::rig::{Pace, Rig};
use crate::util::{data, tempdir};
use crate::util::{free_port, linger_zero};

const ACCESS_KEY: &str = "AKIAZEROCATTEST";
const SECRET_KEY: &str = "zerocat-test-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Moto,
    S3sFs,
}

impl Server {
    fn program(self) -> &'static str {
        match self {
            Server::Moto => "moto_server",
            Server::S3sFs => "s3s-fs",
        }
    }
    fn install(self) -> &'static str {
        match self {
            Server::Moto => "pip install 'moto[server]'",
            Server::S3sFs => "cargo install s3s-fs --version 0.14.1 --features binary",
        }
    }
}

/// A server on 127.0.0.1, killed when dropped.
struct Running {
    kind: Server,
    child: Child,
    port: u16,
    /// s3s-fs's root (a bucket is a directory of it).
    root: tempfile::TempDir,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts `kind` on a port that was free a moment ago (neither takes port 0 and says
/// which it got), waiting until it accepts connections; None after `SKIPPED:` when the
/// server is not installed.
fn start(kind: Server) -> Option<Running> {
    if !installed(kind.program()) {
        eprintln!(
            "SKIPPED: {} is not installed ({}; .ci/run installs it)",
            kind.program(),
            kind.install()
        );
        return None;
    }
    let root = tempdir();
    for _ in 0..3 {
        let port = free_port();
        let mut cmd = Command::new(kind.program());
        match kind {
            Server::Moto => cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()]),
            Server::S3sFs => cmd
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
                .arg(root.path()),
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the S3 server");
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = child.try_wait() {
                break; // the port was taken after all: another one
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Running {
                    kind,
                    child,
                    port,
                    root,
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("{} did not start", kind.program());
}

impl Running {
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A new bucket: a directory of s3s-fs's root; moto's CreateBucket (moto takes
    /// unsigned requests).
    fn bucket(&self, name: &str) -> String {
        match self.kind {
            Server::S3sFs => std::fs::create_dir(self.root.path().join(name)).unwrap(),
            Server::Moto => {
                let (status, body) = self.raw("PUT", &format!("/{name}"));
                assert_eq!(status, 200, "CreateBucket {name}: {body}");
            }
        }
        name.to_string()
    }

    /// An unsigned request to moto: the status and the body.
    fn raw(&self, method: &str, path: &str) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-length: 0\r\n\
             connection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let status = answer[9..12].parse().unwrap();
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (status, body.to_string())
    }

    /// The multipart uploads in progress in `bucket` (moto: s3s-fs has no
    /// ListMultipartUploads).
    fn uploads(&self, bucket: &str) -> Vec<xml::Upload> {
        assert_eq!(self.kind, Server::Moto);
        let (status, body) = self.raw("GET", &format!("/{bucket}?uploads"));
        assert_eq!(status, 200, "ListMultipartUploads: {body}");
        xml::list_uploads(body.as_bytes()).unwrap().uploads
    }

    /// A rig whose zerocat finds this server and its keys as the AWS CLI would: in the
    /// environment (HOME has no ~/.aws).
    fn rig(&self) -> Rig {
        let home = self.root.path().join("home");
        let _ = std::fs::create_dir(&home);
        Rig::new()
            .env("HOME", &home)
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("AWS_ENDPOINT_URL", self.endpoint())
    }

    fn name(&self) -> &'static str {
        self.kind.program()
    }
}

fn servers() -> Vec<Running> {
    [Server::Moto, Server::S3sFs]
        .into_iter()
        .filter_map(start)
        .collect()
}

/// The report's count of requests of `kind` at `side` ("src"/"dst").
fn requests(report: &serde_json::Value, side: &str, kind: &str) -> u64 {
    report[side]["requests"][kind].as_u64().unwrap_or(0)
}

#[test]
fn a_file_goes_up_in_one_put_and_comes_back_to_a_pipe() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("round");
        let payload = data(3_000_001);
        let up = server.rig();
        let src = up.file("in.bin", &payload);
        let uri = format!("s3://{bucket}/dir/a b+c.bin");
        let run = up.args(["pipe", &src, &uri]).run();
        run.assert_code(0, what);
        assert_eq!(
            requests(run.report(), "dst", "put"),
            1,
            "{what}: {}",
            run.stderr
        );
        run.assert_final_path("splice", what);

        let mut down = server.rig();
        let out = down.stdout_sink(Pace::Full);
        let run = down.args(["pipe", &uri, &out]).run();
        run.assert_code(0, what);
        run.assert_held(0, &payload, what);
        run.assert_final_path("splice", what);
        assert_eq!(requests(run.report(), "src", "get"), 1, "{what}");
    }
}

#[test]
fn a_stream_goes_up_in_parts_and_comes_back_whole() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("parts");
        // Four parts of 5 MiB and a short fifth.
        let payload = Arc::new(data(22 << 20));
        let mut up = server.rig();
        let src = up.stdin(payload.clone(), Pace::Full);
        let uri = format!("s3://{bucket}/stream.bin");
        let run = up
            .args(["pipe", &src, &format!("{uri},part-size=5M")])
            .run();
        run.assert_code(0, what);
        assert_eq!(
            requests(run.report(), "dst", "parts"),
            5,
            "{what}: {}",
            run.stderr
        );
        assert_eq!(requests(run.report(), "dst", "put"), 0, "{what}");

        let mut down = server.rig();
        let dst = down.path("out.bin");
        let dst = down.file_sink(dst);
        let run = down.args(["pipe", &uri, &dst]).run();
        run.assert_code(0, what);
        run.assert_held(0, &payload, what);
        if server.kind == Server::Moto {
            assert!(server.uploads(&bucket).is_empty(), "{what}: an upload left");
        }
    }
}

/// `parts=1` (one part at a time) and copy's `-j 8` (eight at once, more senders than
/// parts): the same object either way, every part counted.
#[test]
fn parts_in_flight_one_or_eight_make_the_same_object() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("inflight");
        // Three parts of 5 MiB and a short fourth.
        let payload = Arc::new(data((15 << 20) + 4321));
        for (i, how) in [["pipe", ",parts=1"], ["copy -j 8", ""]].iter().enumerate() {
            let what = format!("{what}, {}{}", how[0], how[1]);
            let uri = format!("s3://{bucket}/s{i}.bin");
            let mut up = server.rig();
            let src = up.stdin(payload.clone(), Pace::Full);
            let run = up
                .args(how[0].split(' '))
                .args([&src, &format!("{uri},part-size=5M{}", how[1])])
                .run();
            run.assert_code(0, &what);
            assert_eq!(
                requests(run.report(), "dst", "parts"),
                4,
                "{what}: {}",
                run.stderr
            );
            run.assert_final_path("splice", &what);

            let mut down = server.rig();
            let out = down.stdout_sink(Pace::Full);
            let run = down.args(["pipe", &uri, &out]).run();
            run.assert_code(0, &what);
            run.assert_held(0, &payload, &what);
        }
    }
}

#[test]
fn an_empty_stream_makes_an_empty_object() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("empty");
        let mut up = server.rig();
        let src = up.stdin(Arc::new(Vec::new()), Pace::Full);
        let uri = format!("s3://{bucket}/nothing");
        let run = up.args(["pipe", &src, &uri]).run();
        run.assert_code(0, what);
        assert_eq!(requests(run.report(), "dst", "put"), 1, "{what}");

        let mut down = server.rig();
        let out = down.stdout_sink(Pace::Full);
        let run = down.args(["pipe", &uri, &out]).run();
        run.assert_code(0, what);
        run.assert_held(0, b"", what);
    }
}

#[test]
fn a_missing_object_is_said_in_words() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("missing");
        let run = server
            .rig()
            .args(["pipe", &format!("s3://{bucket}/no/such/key"), "-"])
            .run();
        run.assert_code(1, what);
        assert!(
            run.stderr.contains("no such object (NoSuchKey)"),
            "{what}: {}",
            run.stderr
        );
    }
}

/// s3s-fs checks signatures (moto does not by default).
#[test]
fn wrong_credentials_are_signature_does_not_match_in_words() {
    let Some(server) = start(Server::S3sFs) else {
        return;
    };
    let bucket = server.bucket("secret");
    let rig = server.rig().env("AWS_SECRET_ACCESS_KEY", "not-the-secret");
    let src = rig.file("in.bin", b"payload");
    let run = rig.args(["pipe", &src, &format!("s3://{bucket}/k")]).run();
    run.assert_code(1, "a wrong secret");
    assert!(
        run.stderr
            .contains("refused the request's signature (SignatureDoesNotMatch)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("AWS_SECRET_ACCESS_KEY"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("not-the-secret"),
        "the secret shown: {}",
        run.stderr
    );
    assert!(!server.root.path().join(&bucket).join("k").exists());
}

/// A multipart upload cut by SIGTERM is aborted: no upload in progress is left, and no
/// object made (moto lists uploads in progress).
#[test]
fn sigterm_mid_multipart_upload_leaves_no_upload_in_progress() {
    let Some(server) = start(Server::Moto) else {
        return;
    };
    let bucket = server.bucket("cut");
    // Slower than zerocat: the upload is under way long before the stream ends.
    let payload = Arc::new(data(400 << 20));
    let mut rig = server.rig();
    let src = rig.stdin(
        payload,
        Pace::Slow {
            chunk: 256 << 10,
            pause: Duration::from_millis(10),
        },
    );
    let uri = format!("s3://{bucket}/cut.bin,part-size=5M");
    let running = rig.args(["pipe", &src, &uri]).start();
    let started = Instant::now();
    while server.uploads(&bucket).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no multipart upload began"
        );
        thread::sleep(Duration::from_millis(50));
    }
    running.signal(Signal::SIGTERM);
    let run = running.finish();
    run.assert_code(130, "SIGTERM mid-upload");
    assert_eq!(server.uploads(&bucket), vec![], "{}", run.stderr);
    let (status, _) = server.raw("GET", &format!("/{bucket}/cut.bin"));
    assert_eq!(status, 404, "an object was made from a cut stream");
}

/// A source command that fails after some parts went up: the upload is aborted, not
/// completed with what the command wrote.
#[test]
fn a_failed_source_command_aborts_the_multipart_upload() {
    let Some(server) = start(Server::Moto) else {
        return;
    };
    let bucket = server.bucket("failed");
    let dir = tempdir();
    let script: PathBuf = dir.path().join("half.sh");
    std::fs::write(&script, "head -c 12000000 /dev/zero; exit 3\n").unwrap();
    let uri = format!("s3://{bucket}/half.bin,part-size=5M");
    let run = server
        .rig()
        .args(["pipe", &format!("sh:sh {}", script.display()), &uri])
        .run();
    run.assert_code(1, "a failed source command");
    assert!(run.stderr.contains("status 3"), "{}", run.stderr);
    assert!(
        requests(run.report(), "dst", "parts") >= 2,
        "{}",
        run.stderr
    );
    assert_eq!(server.uploads(&bucket), vec![]);
    let (status, _) = server.raw("GET", &format!("/{bucket}/half.bin"));
    assert_eq!(
        status, 404,
        "an object was made from a failed command's output"
    );
}

/// tee: one source into a file and an object; the object is the same bytes.
#[test]
fn tee_writes_an_object_beside_a_file() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("tee");
        let payload = Arc::new(data(9 << 20));
        let mut up = server.rig();
        let src = up.stdin(payload.clone(), Pace::Full);
        let file = up.file_sink(up.path("copy.bin"));
        let uri = format!("s3://{bucket}/tee.bin");
        let run = up.args(["tee", &src, &file, &uri]).run();
        run.assert_code(0, what);
        run.assert_held(0, &payload, what);
        let mut down = server.rig();
        let out = down.stdout_sink(Pace::Full);
        let run = down.args(["copy", &uri, &out]).run();
        run.assert_code(0, what);
        run.assert_held(0, &payload, what);
    }
}

/// A tree of 1,100 files (more than one ListObjectsV2 page of 1,000) up with copy -r, and
/// back: the same names and bytes.
#[test]
fn copy_r_moves_a_tree_of_files_both_ways() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("tree");
        let dir = tempdir();
        let tree = dir.path().join("tree");
        let want = write_tree(
            &tree,
            1100,
            |i| format!("d{:02}/e{}/f {i:04}+x.bin", i % 20, i % 3),
            |i| i * 7 % 5000,
        );
        let uri = format!("s3://{bucket}/pre/");
        let up = server
            .rig()
            .args(["copy", "-r", "-j", "4"])
            .arg(&tree)
            .arg(&uri)
            .run();
        up.assert_code(0, what);
        assert_eq!(up.report()["files"], 1100, "{what}: {}", up.stderr);
        assert_eq!(up.report()["requests"]["put"], 1100, "{what}");
        // Each file is at most a part: one PUT sent from the file itself.
        up.assert_final_path("sendfile", what);

        let out = dir.path().join("out");
        let down = server.rig().args(["copy", "-r", &uri]).arg(&out).run();
        down.assert_code(0, what);
        assert_eq!(down.report()["files"], 1100, "{what}: {}", down.stderr);
        assert_eq!(down.report()["objects_listed"], 1100, "{what}");
        assert!(
            down.report()["requests"]["lists"].as_u64().unwrap() >= 2,
            "{what}: one page only: {}",
            down.stderr
        );
        assert_tree_holds(&out, &want, what);
    }
}

/// Writes `n` files under `root`, the i-th at `rel(i)` holding `data(size(i))`; their
/// relative paths and bytes, for `assert_tree_holds`.
fn write_tree(
    root: &std::path::Path,
    n: usize,
    rel: impl Fn(usize) -> String,
    size: impl Fn(usize) -> usize,
) -> Vec<(String, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let (rel, bytes) = (rel(i), data(size(i)));
            let path = root.join(&rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
            (rel, bytes)
        })
        .collect()
}

/// `out` holds exactly the files `want` lists, each with its bytes, and nothing else.
fn assert_tree_holds(out: &std::path::Path, want: &[(String, Vec<u8>)], what: &str) {
    for (rel, bytes) in want {
        let got = std::fs::read(out.join(rel)).unwrap_or_else(|e| panic!("{what}: {rel}: {e}"));
        assert!(got == *bytes, "{what}: {rel} differs");
    }
    assert_eq!(
        files_under(out),
        want.len(),
        "{what}: files beyond the tree"
    );
}

fn files_under(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                files_under(&e.path())
            } else {
                1
            }
        })
        .sum()
}

/// A key that cannot be a path under the directory (`a//b`, `../x`) is not copied: said,
/// counted, exit 1; the other objects still are.
#[test]
fn copy_r_refuses_keys_that_cannot_be_paths_and_copies_the_rest() {
    let Some(server) = start(Server::Moto) else {
        return;
    };
    let bucket = server.bucket("odd");
    for key in ["p/ok.txt", "p/a//b", "p/../escape"] {
        let rig = server.rig();
        let src = rig.file("in", key.as_bytes());
        rig.args(["pipe", &src, &format!("s3://{bucket}/{key}")])
            .run()
            .assert_code(0, key);
    }
    let dir = tempdir();
    let out = dir.path().join("out");
    let run = server
        .rig()
        .args(["copy", "-r", &format!("s3://{bucket}/p/")])
        .arg(&out)
        .run();
    run.assert_code(1, "keys that cannot be paths");
    assert_eq!(std::fs::read(out.join("ok.txt")).unwrap(), b"p/ok.txt");
    assert_eq!(run.report()["files"], 1);
    assert_eq!(
        run.report()["failures"].as_array().unwrap().len(),
        2,
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("'..' segment"), "{}", run.stderr);
    assert!(!dir.path().join("escape").exists());
}

/// How the fault proxy cuts an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Fin,
    Rst,
}

/// A TCP proxy of the tests' own between zerocat and an S3 server: every connection goes
/// through, but the first `times` answers whose body passes `after` bytes are cut there (a
/// FIN or an RST), once `before_cut` ran (it may replace the object: the resume then meets
/// another version).
struct FaultProxy {
    port: u16,
    left: Arc<AtomicUsize>,
}

type Hook = Arc<dyn Fn() + Send + Sync>;

impl FaultProxy {
    fn start(upstream: u16, after: u64, times: usize, how: Cut, before_cut: Hook) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let left = Arc::new(AtomicUsize::new(times));
        let shared = left.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let (left, hook) = (shared.clone(), before_cut.clone());
                thread::spawn(move || relay_cutting(client, upstream, after, how, &left, &hook));
            }
        });
        FaultProxy { port, left }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The cuts made so far.
    fn cuts(&self, times: usize) -> usize {
        times - self.left.load(Ordering::SeqCst)
    }
}

/// One connection through the proxy: requests passed on as they come; each answer's head
/// whole, its body up to `after` bytes and cut there if a cut is left. Answers are told
/// apart by their Content-Length (a kept-alive connection carries one after another).
fn relay_cutting(
    client: TcpStream,
    upstream: u16,
    after: u64,
    how: Cut,
    left: &AtomicUsize,
    before_cut: &Hook,
) {
    let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let (mut from_client, mut to_up) = (client.try_clone().unwrap(), up.try_clone().unwrap());
    thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_up);
        let _ = to_up.shutdown(Shutdown::Write);
    });
    let mut client = client;
    let mut buf = vec![0u8; 64 << 10];
    let mut head: Vec<u8> = Vec::new();
    // Of the answer whose body is passing: its bytes sent, and those still to come.
    let mut sent = 0u64;
    let mut body_left = 0u64;
    loop {
        let n = match up.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
            Ok(n) => n,
        };
        let mut rest: Vec<u8> = buf[..n].to_vec();
        while !rest.is_empty() {
            if body_left == 0 {
                head.append(&mut rest);
                let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                    break;
                };
                rest = head.split_off(end + 4);
                if client.write_all(&head).is_err() {
                    return;
                }
                body_left = body_length(&head);
                sent = 0;
                head.clear();
                continue;
            }
            let take = body_left.min(rest.len() as u64) as usize;
            let body: Vec<u8> = rest.drain(..take).collect();
            let passes = sent + body.len() as u64 > after;
            let cut = passes
                && left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
            if cut {
                let _ = client.write_all(&body[..(after - sent) as usize]);
                before_cut();
                if how == Cut::Rst {
                    linger_zero(&client);
                } else {
                    let _ = client.shutdown(Shutdown::Write);
                }
                // Wakes the request's copier, whose close of its duplicate is the last one.
                let _ = client.shutdown(Shutdown::Read);
                return;
            }
            if client.write_all(&body).is_err() {
                return;
            }
            sent += body.len() as u64;
            body_left -= body.len() as u64;
        }
    }
}

/// A TCP proxy of the tests' own between zerocat and an S3 server that counts the
/// connections it accepts — the server's side of keep-alive — and, with
/// `answers_per_connection`, plays a server that closes each connection once it has
/// carried that many answers: the next request on it meets the close unanswered, as one
/// on a keep-alive connection the server timed out while idle.
struct CountingProxy {
    port: u16,
    accepted: Arc<AtomicUsize>,
    /// Requests that met a closed connection.
    closed_on: Arc<AtomicUsize>,
}

impl CountingProxy {
    fn start(upstream: u16, answers_per_connection: Option<usize>) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed_on = Arc::new(AtomicUsize::new(0));
        let (count, closes) = (accepted.clone(), closed_on.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let closes = closes.clone();
                thread::spawn(move || {
                    relay_counting(client, upstream, answers_per_connection, &closes)
                });
            }
        });
        CountingProxy {
            port,
            accepted,
            closed_on,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// One connection through [`CountingProxy`]: requests passed on as they come, answers
/// (Content-Length framed, as both servers send them) counted as each ends — before its
/// last bytes go, so a request that follows is always seen after the count.
fn relay_counting(
    client: TcpStream,
    upstream: u16,
    answers_per_connection: Option<usize>,
    closed_on: &Arc<AtomicUsize>,
) {
    let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    let answered = Arc::new(AtomicUsize::new(0));
    let (mut from_client, mut to_up) = (client.try_clone().unwrap(), up.try_clone().unwrap());
    let (seen, closes, closer) = (
        answered.clone(),
        closed_on.clone(),
        client.try_clone().unwrap(),
    );
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if answers_per_connection.is_some_and(|most| seen.load(Ordering::SeqCst) >= most) {
                // A request after the last answer this connection carries: closed unanswered.
                closes.fetch_add(1, Ordering::SeqCst);
                let _ = closer.shutdown(Shutdown::Both);
                let _ = to_up.shutdown(Shutdown::Both);
                return;
            }
            if to_up.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to_up.shutdown(Shutdown::Write);
    });
    let mut client = client;
    let mut buf = vec![0u8; 64 << 10];
    let mut head: Vec<u8> = Vec::new();
    let mut body_left = 0u64;
    loop {
        let n = match up.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
            Ok(n) => n,
        };
        let mut ended = 0;
        let mut at = 0;
        while at < n {
            if body_left > 0 {
                let take = body_left.min((n - at) as u64);
                at += take as usize;
                body_left -= take;
                ended += usize::from(body_left == 0);
                continue;
            }
            head.push(buf[at]);
            at += 1;
            if head.ends_with(b"\r\n\r\n") {
                body_left = body_length(&head);
                ended += usize::from(body_left == 0);
                head.clear();
            }
        }
        answered.fetch_add(ended, Ordering::SeqCst);
        if client.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// The body length an answer's head announces (none: 204, 304, no Content-Length).
fn body_length(head: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    if text.starts_with("http/1.1 204") || text.starts_with("http/1.1 304") {
        return 0;
    }
    text.lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// `copy -r` of 300 small files up and down through a proxy that counts connections: a
/// server that keeps connections open (s3s-fs) gets a handful — each request used to be a
/// connection of its own (seen: 300+ each way on the old code) — one that closes each
/// (moto, `Connection: close`) one a request; the trees byte-exact either way.
#[test]
fn copy_r_reuses_connections_the_server_keeps_open() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("alive");
        let dir = tempdir();
        let tree = dir.path().join("tree");
        let want = write_tree(
            &tree,
            300,
            |i| format!("d{}/f{i:03}.bin", i % 7),
            |i| 1 + i * 37 % 9000,
        );
        let uri = format!("s3://{bucket}/pre/");
        let proxy = CountingProxy::start(server.port, None);
        let up = server
            .rig()
            .env("AWS_ENDPOINT_URL", proxy.endpoint())
            .args(["copy", "-r", "-j", "4"])
            .arg(&tree)
            .arg(&uri)
            .run();
        up.assert_code(0, what);
        assert_eq!(up.report()["requests"]["put"], 300, "{what}");
        up.assert_final_path("sendfile", what);
        let up_connections = proxy.accepted();

        let out = dir.path().join("out");
        let down = server
            .rig()
            .env("AWS_ENDPOINT_URL", proxy.endpoint())
            .args(["copy", "-r", "-j", "4", &uri])
            .arg(&out)
            .run();
        down.assert_code(0, what);
        assert_eq!(down.report()["files"], 300, "{what}: {}", down.stderr);
        assert_tree_holds(&out, &want, what);
        let down_connections = proxy.accepted() - up_connections;
        match server.kind {
            // -j 4: four requests at once at most, and a connection left idle can carry
            // the next; a few more where a pooled one is taken while four are busy.
            Server::S3sFs => assert!(
                up_connections <= 16 && down_connections <= 16,
                "{what}: {up_connections} connections up, {down_connections} down for 300 \
                 objects"
            ),
            Server::Moto => assert!(
                up_connections >= 300 && down_connections >= 300,
                "{what} says Connection: close, yet {up_connections} connections up, \
                 {down_connections} down for 300 objects"
            ),
        }
    }
}

/// A server that closes each connection after one answer, seen only when the next request
/// goes on it (an idle keep-alive connection timed out): every such request is sent again
/// once on a new connection — no retry counted, no backoff — and every object arrives
/// exactly once, byte-exact, both ways.
#[test]
fn a_request_on_a_connection_the_server_closed_goes_again_on_a_new_one() {
    let Some(server) = start(Server::S3sFs) else {
        return;
    };
    let what = server.name();
    let bucket = server.bucket("stale");
    let dir = tempdir();
    let tree = dir.path().join("tree");
    let want = write_tree(&tree, 60, |i| format!("f{i:02}.bin"), |i| 100 + i * 131);
    let uri = format!("s3://{bucket}/p/");
    let proxy = CountingProxy::start(server.port, Some(1));
    let up = server
        .rig()
        .env("AWS_ENDPOINT_URL", proxy.endpoint())
        .args(["copy", "-r", "-j", "2"])
        .arg(&tree)
        .arg(&uri)
        .run();
    up.assert_code(0, what);
    assert_eq!(up.report()["requests"]["put"], 60, "{what}: {}", up.stderr);
    assert_eq!(
        up.report()["requests"]["retries"],
        serde_json::Value::Null,
        "{what}"
    );
    let closed_up = proxy.closed_on.load(Ordering::SeqCst);
    assert!(closed_up > 0, "{what}: no request met a closed connection");
    assert_eq!(
        up.report()["requests"]["stale_connections"],
        closed_up as u64,
        "{what}: {}",
        up.stderr
    );
    // The bucket is s3s-fs's directory: each object once, whole.
    for (rel, bytes) in &want {
        let got = std::fs::read(server.root.path().join(&bucket).join("p").join(rel)).unwrap();
        assert!(got == *bytes, "{what}: {rel} differs in the bucket");
    }

    let out = dir.path().join("out");
    let down = server
        .rig()
        .env("AWS_ENDPOINT_URL", proxy.endpoint())
        .args(["copy", "-r", "-j", "2", &uri])
        .arg(&out)
        .run();
    down.assert_code(0, what);
    assert_eq!(down.report()["files"], 60, "{what}: {}", down.stderr);
    assert_eq!(down.report()["objects_listed"], 60, "{what}");
    assert_tree_holds(&out, &want, what);
    assert!(
        proxy.closed_on.load(Ordering::SeqCst) > closed_up,
        "{what}: no GET met a closed connection"
    );
}

impl Running {
    /// `bytes` as `bucket/key`, put by zerocat itself.
    fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let rig = self.rig();
        let src = rig.file("up.bin", bytes);
        rig.args(["pipe", &src, &format!("s3://{bucket}/{key}")])
            .run()
            .assert_code(0, "put");
    }
}

/// The report's resumes of the source (`requests.resumes`).
fn resumes_of(report: &serde_json::Value) -> u64 {
    requests(report, "src", "resumes")
}

/// A GET cut mid-body (a FIN, an RST) continues with `Range` + `If-Match` into the same
/// sink: the bytes whole, the resume and its retry counted.
#[test]
fn a_get_cut_mid_body_is_resumed_into_the_same_sink() {
    for server in servers() {
        let bucket = server.bucket("resume");
        let payload = data(3_000_017);
        server.put(&bucket, "obj.bin", &payload);
        for how in [Cut::Fin, Cut::Rst] {
            let what = format!("{} {how:?}", server.name());
            let proxy = FaultProxy::start(server.port, 1_000_000, 2, how, Arc::new(|| {}));
            let mut rig = server.rig().env("AWS_ENDPOINT_URL", proxy.endpoint());
            let out = rig.path("out.bin");
            let sink = rig.file_sink(out);
            let run = rig
                .args(["pipe", "--retry-wait", "10ms"])
                .args([&format!("s3://{bucket}/obj.bin"), &sink])
                .run();
            run.assert_code(0, &what);
            run.assert_held(0, &payload, &what);
            run.assert_final_path("splice", &what);
            assert_eq!(proxy.cuts(2), 2, "{what}");
            assert_eq!(resumes_of(run.report()), 2, "{what}: {}", run.stderr);
            assert_eq!(requests(run.report(), "src", "get"), 3, "{what}");
            assert!(requests(run.report(), "src", "retries") >= 2, "{what}");
        }
    }
}

/// The object replaced between the cut and the resume: refused (exit 1, "the object
/// changed after N bytes"), and the sink holds only bytes of the first version.
#[test]
fn an_object_replaced_between_the_cut_and_the_resume_is_refused() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("changed");
        let first = data(2_000_003);
        server.put(&bucket, "obj.bin", &first);
        let second: Vec<u8> = first.iter().map(|b| b ^ 0x5a).collect();
        let server = Arc::new(server);
        // Weak: the proxy's threads keep the hook to the end of the process, and a strong
        // reference there left both servers running after the tests (seen: a moto_server
        // and an s3s-fs a full run, their parent gone).
        let (srv, b, again) = (Arc::downgrade(&server), bucket.clone(), second.clone());
        let hook: Hook = Arc::new(move || {
            if let Some(srv) = srv.upgrade() {
                srv.put(&b, "obj.bin", &again)
            }
        });
        let proxy = FaultProxy::start(server.port, 700_000, 1, Cut::Fin, hook);
        let rig = server.rig().env("AWS_ENDPOINT_URL", proxy.endpoint());
        let out = rig.path("out.bin");
        let run = rig
            .args(["pipe", "--retry-wait", "10ms"])
            .args([
                &format!("s3://{bucket}/obj.bin"),
                &out.display().to_string(),
            ])
            .run();
        run.assert_code(1, what);
        assert!(
            run.stderr.contains("the object changed after 700000 bytes"),
            "{what}: {}",
            run.stderr
        );
        let held = std::fs::read(&out).unwrap();
        assert_eq!(held.len(), 700_000, "{what}");
        assert!(
            held == first[..700_000],
            "{what}: not the first version's bytes"
        );
        // The resume that was refused is counted as what it was: one more GET, a failed
        // resume attempt, no resume (the old code counted only resumes that continued).
        let report = run.report();
        assert_eq!(requests(report, "src", "get"), 2, "{what}: {report}");
        assert_eq!(resumes_of(report), 0, "{what}: {report}");
        assert_eq!(
            requests(report, "src", "failed_resume_attempts"),
            1,
            "{what}: {report}"
        );
        // Named as the object it is, never the http URL that carries it.
        assert!(
            run.stderr.contains(&format!("s3://{bucket}/obj.bin: "))
                && !run.stderr.contains("http://"),
            "{what}: {}",
            run.stderr
        );
    }
}

/// `copy -j 4 s3://B/K FILE`: four ranged GETs into the temporary, each cut range resumed
/// on its own; the file is the object.
#[test]
fn copy_j_fetches_ranges_of_an_object_and_resumes_each() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("ranges");
        let payload = data((8 << 20) + 5);
        server.put(&bucket, "big.bin", &payload);
        let proxy = FaultProxy::start(server.port, 300_000, 2, Cut::Rst, Arc::new(|| {}));
        let rig = server.rig().env("AWS_ENDPOINT_URL", proxy.endpoint());
        let out = rig.path("big.bin");
        let run = rig
            .args(["copy", "-j", "4", "--retry-wait", "10ms"])
            .arg(format!("s3://{bucket}/big.bin"))
            .arg(&out)
            .run();
        run.assert_code(0, what);
        assert!(std::fs::read(&out).unwrap() == payload, "{what}: differs");
        // Reported as `pipe s3://…` reports an object: its URI and the S3 requests (a
        // probe, four ranges, each cut range's resume), no http exchange, no http URL.
        let report = run.report();
        let src = &report["src"];
        assert_eq!(
            src["uri"],
            format!("s3://{bucket}/big.bin"),
            "{what}: {report}"
        );
        assert!(src["http"].is_null(), "{what}: {report}");
        assert_eq!(requests(report, "src", "resumes"), 2, "{what}: {report}");
        assert_eq!(
            requests(report, "src", "get"),
            5 + requests(report, "src", "retries"),
            "{what}: {report}"
        );
        assert!(!run.stderr.contains("http://"), "{what}: {}", run.stderr);
        assert_eq!(proxy.cuts(2), 2, "{what}");

        let missing = server
            .rig()
            .args(["copy", "-j", "4"])
            .arg(format!("s3://{bucket}/no/such/key"))
            .arg(out.with_file_name("missing.bin"))
            .run();
        missing.assert_code(1, what);
        assert!(
            missing.stderr.contains("no such object (NoSuchKey)"),
            "{what}: {}",
            missing.stderr
        );
    }
}

/// `copy -j 4 s3://B/K FILE` whose object is replaced while a range is cut: refused, the
/// resume's error naming the object by its `s3://` URI (the old code named the http URL
/// that carries it), the failed attempt counted, no file made.
#[test]
fn copy_j_of_an_object_replaced_mid_range_names_it_by_its_s3_uri() {
    for server in servers() {
        let what = server.name();
        let bucket = server.bucket("jchanged");
        let first = data((4 << 20) + 3);
        server.put(&bucket, "obj.bin", &first);
        let server = Arc::new(server);
        let (srv, b) = (Arc::downgrade(&server), bucket.clone());
        let second: Vec<u8> = first.iter().map(|x| x ^ 0x33).collect();
        let hook: Hook = Arc::new(move || {
            if let Some(srv) = srv.upgrade() {
                srv.put(&b, "obj.bin", &second)
            }
        });
        let proxy = FaultProxy::start(server.port, 200_000, 1, Cut::Fin, hook);
        let rig = server.rig().env("AWS_ENDPOINT_URL", proxy.endpoint());
        let out = rig.path("obj.bin");
        let run = rig
            .args(["copy", "-j", "4", "--retry-wait", "10ms"])
            .arg(format!("s3://{bucket}/obj.bin"))
            .arg(&out)
            .run();
        run.assert_code(1, what);
        assert!(
            run.stderr
                .contains(&format!("s3://{bucket}/obj.bin: the object changed after")),
            "{what}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("http://"), "{what}: {}", run.stderr);
        let report = run.report();
        assert_eq!(
            report["src"]["uri"],
            format!("s3://{bucket}/obj.bin"),
            "{what}"
        );
        assert_eq!(
            requests(report, "src", "failed_resume_attempts"),
            1,
            "{what}: {report}"
        );
        assert!(!out.exists(), "{what}: a file made of two versions?");
    }
}

/// `relay tls-listen:0,cert=,key= tcp:127.0.0.1:PORT`: zerocat's own TLS listener in front
/// of an S3 server; the child is killed when dropped.
struct TlsFront {
    child: Child,
    addr: String,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsFront {
    fn start(pki: &crate::tls::Pki, upstream: u16) -> TlsFront {
        let mut child = crate::util::zerocat()
            .arg("relay")
            .arg(format!(
                "tls-listen:0,cert={},key={}",
                pki.path("server.pem"),
                pki.path("server.key")
            ))
            .arg(format!("tcp:127.0.0.1:{upstream}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (addr, _rest) = crate::util::listening_addr(&mut child);
        TlsFront { child, addr }
    }
}

/// S3 over https: a multipart upload (`UNSIGNED-PAYLOAD` parts) and a GET through
/// zerocat's TLS relay in front of s3s-fs, trusted by `cafile=`; without it, the server's
/// certificate is refused in words and nothing is written; `verify=0` goes, said.
#[test]
fn an_https_endpoint_round_trips_and_refuses_an_untrusted_certificate() {
    let Some(server) = start(Server::S3sFs) else {
        return;
    };
    let Some(pki) = crate::tls::Pki::make() else {
        eprintln!("SKIPPED: openssl is not installed (apt-get install openssl)");
        return;
    };
    let front = TlsFront::start(&pki, server.port);
    let bucket = server.bucket("tls");
    let https = format!("endpoint=https://{}", front.addr);
    let trusted = format!("{https},cafile={}", pki.path("ca.pem"));
    let payload = Arc::new(data((11 << 20) + 3));

    let mut up = server.rig();
    let src = up.stdin(payload.clone(), Pace::Full);
    let run = up
        .args([
            "pipe",
            &src,
            &format!("s3://{bucket}/obj.bin,{trusted},part-size=5M"),
        ])
        .run();
    run.assert_code(0, "a multipart upload over https");
    assert_eq!(requests(run.report(), "dst", "parts"), 3, "{}", run.stderr);

    let mut down = server.rig();
    let out = down.path("out.bin");
    let sink = down.file_sink(out);
    let run = down
        .args(["pipe", &format!("s3://{bucket}/obj.bin,{trusted}"), &sink])
        .run();
    run.assert_code(0, "a GET over https");
    run.assert_held(0, &payload, "a GET over https");
    run.assert_final_path("splice", "a GET over https");

    let rig = server.rig();
    let out = rig.path("refused.bin");
    let run = rig
        .args(["pipe", &format!("s3://{bucket}/obj.bin,{https}")])
        .arg(&out)
        .run();
    run.assert_code(1, "an untrusted certificate");
    assert!(
        run.stderr
            .contains("the server's certificate is not signed by a CA in cafile="),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0), 0);

    let mut rig = server.rig();
    let out = rig.stdout_sink(Pace::Full);
    let run = rig
        .args([
            "pipe",
            &format!("s3://{bucket}/obj.bin,{https},verify=0"),
            &out,
        ])
        .run();
    run.assert_code(0, "verify=0");
    run.assert_held(0, &payload, "verify=0");
    assert!(run.stderr.contains("verify=0"), "{}", run.stderr);

    // An upload opens a connection a request: one warning says it for all of them.
    let mut up = server.rig();
    let src = up.stdin(payload.clone(), Pace::Full);
    let run = up
        .args([
            "pipe",
            &src,
            &format!("s3://{bucket}/again.bin,{https},verify=0,part-size=5M"),
        ])
        .run();
    run.assert_code(0, "a multipart upload with verify=0");
    assert_eq!(
        run.stderr.matches("is not verified").count(),
        1,
        "{}",
        run.stderr
    );
}

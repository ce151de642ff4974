//! The soak: `cargo test -- --ignored soak` (10 GiB per row); its machinery runs on 64 MiB
//! in the default run.

use super::*;

/// One soak row. `stream_soak` drives one source to one sink (tee: that sink and /dev/null);
/// `relay::relay_soak` runs 10 GiB through 50 concurrent connections (each its own streams,
/// both ways at once). `ZEROCAT_SOAK=tee` runs only the rows of that subcommand.
pub(super) struct Soak {
    sub: Sub,
    pub(super) via: &'static str,
    bytes: u64,
}

const SOAKS: &[Soak] = &[
    Soak {
        sub: Sub::Pipe,
        via: "auto",
        bytes: 10 << 30,
    },
    Soak {
        sub: Sub::Pipe,
        via: "userspace",
        bytes: 10 << 30,
    },
    Soak {
        sub: Sub::Tee,
        via: "auto",
        bytes: 10 << 30,
    },
    Soak {
        sub: Sub::Relay,
        via: "auto",
        bytes: 10 << 30,
    },
];

const SOAK_BLOCK: usize = 1 << 20;

/// Block `i` of the soak stream: a fixed pseudo-random MiB with `i` in its first 8 bytes,
/// so a lost, repeated or reordered block cannot compare equal.
fn soak_block(base: &[u8], i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(base);
    out[..8].copy_from_slice(&i.to_le_bytes());
}

pub(super) struct SoakFigures {
    pub(super) bytes: u64,
    pub(super) seconds: f64,
    pub(super) max_rss_kib: i64,
    pub(super) report: Value,
}

/// Generator -> pipe -> zerocat -> pipe -> checker. The checker compares every byte with
/// the stream it should be and both ends hash what they saw (SipHash); the peak RSS comes
/// from the child's rusage (wait4).
#[allow(clippy::zombie_processes)] // reaped by wait4, which also gives the rusage
fn stream_soak(soak: &Soak, bytes: u64) -> SoakFigures {
    use std::hash::Hasher;
    let base = Arc::new(data(SOAK_BLOCK));
    let mut cmd = crate::util::zerocat();
    cmd.args(["--stats", "json", "--via", soak.via])
        .args(soak.sub.args("-", "-"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let blocks = bytes / SOAK_BLOCK as u64;
    let b = base.clone();
    let generator = thread::spawn(move || {
        let mut hash = std::collections::hash_map::DefaultHasher::new();
        let mut block = Vec::with_capacity(SOAK_BLOCK);
        for i in 0..blocks {
            soak_block(&b, i, &mut block);
            hash.write(&block);
            stdin.write_all(&block).expect("zerocat stopped reading");
        }
        hash.finish()
    });
    let checker = thread::spawn(move || {
        let mut hash = std::collections::hash_map::DefaultHasher::new();
        let mut expected = Vec::with_capacity(SOAK_BLOCK);
        let mut current = u64::MAX;
        let mut buf = vec![0u8; SOAK_BLOCK];
        let mut pos = 0u64;
        loop {
            let n = stdout.read(&mut buf).unwrap();
            if n == 0 {
                return (pos, hash.finish());
            }
            hash.write(&buf[..n]);
            let mut got = &buf[..n];
            while !got.is_empty() {
                let (i, off) = (pos / SOAK_BLOCK as u64, (pos % SOAK_BLOCK as u64) as usize);
                if i != current {
                    soak_block(&base, i, &mut expected);
                    current = i;
                }
                let take = got.len().min(SOAK_BLOCK - off);
                assert!(
                    i < blocks && got[..take] == expected[off..off + take],
                    "wrong bytes at offset {pos}"
                );
                got = &got[take..];
                pos += take as u64;
            }
        }
    });
    let err_thread = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let sent_hash = generator.join().unwrap();
    let (received, got_hash) = checker.join().unwrap();
    let mut status = 0;
    // SAFETY: plain wait4 on our own child; rusage is written by the kernel.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { nix::libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32, "wait4");
    let seconds = started.elapsed().as_secs_f64();
    let stderr = err_thread.join().unwrap();
    assert!(
        nix::libc::WIFEXITED(status) && nix::libc::WEXITSTATUS(status) == 0,
        "zerocat: status {status}: {}",
        String::from_utf8_lossy(&stderr)
    );
    assert_eq!(received, blocks * SOAK_BLOCK as u64, "bytes received");
    assert_eq!(got_hash, sent_hash, "hash of the bytes received");
    let report = crate::util::json_report(&stderr);
    assert_eq!(report["bytes"].as_u64(), Some(received));
    for sink in report["sinks"].as_array().into_iter().flatten() {
        assert_eq!(sink["bytes"].as_u64(), Some(received), "{sink}");
    }
    SoakFigures {
        bytes: received,
        seconds,
        max_rss_kib: usage.ru_maxrss,
        report,
    }
}

fn run_soaks(bytes: Option<u64>) {
    let only = std::env::var("ZEROCAT_SOAK").ok();
    for soak in SOAKS
        .iter()
        .filter(|s| only.as_deref().is_none_or(|o| o == s.sub.name()))
    {
        let bytes = bytes.unwrap_or(soak.bytes);
        let (figures, shape) = match soak.sub {
            Sub::Relay => (
                relay::relay_soak(soak, bytes),
                format!("{} connections", relay::SOAK_CONNS),
            ),
            _ => (stream_soak(soak, bytes), "pipe->pipe".to_string()),
        };
        eprintln!(
            "soak {} {shape} via {}: {} B in {:.1} s ({:.2} GiB/s), hash equal, \
             peak RSS {} KiB, paths {}",
            soak.sub.name(),
            soak.via,
            figures.bytes,
            figures.seconds,
            figures.bytes as f64 / figures.seconds / (1u64 << 30) as f64,
            figures.max_rss_kib,
            figures.report["paths"]
        );
        for sink in figures.report["sinks"].as_array().into_iter().flatten() {
            eprintln!(
                "  sink {}: {} B, paths {}",
                sink["uri"], sink["bytes"], sink["paths"]
            );
        }
    }
}

/// The soak's machinery on 64 MiB, so a broken harness shows in the default run.
#[test]
fn soak_harness_on_64mib() {
    run_soaks(Some(64 << 20));
}

#[test]
#[ignore = "10 GiB per row: cargo test -- --ignored soak"]
fn soak() {
    run_soaks(None);
}

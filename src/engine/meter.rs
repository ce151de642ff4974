//! The counter every path bumps ([`Meter`]: bytes delivered, read by the progress thread)
//! and `--limit RATE` ([`Pacer`]): a transfer is paced by the length each syscall is asked
//! for, so splice, sendfile and copy_file_range stay the path (pv's `-L`, without falling
//! back to read/write).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Bytes delivered to the sink so far, when they were moving, and the `--limit` pacer if
/// any.
#[derive(Debug, Default)]
pub struct Meter {
    delivered: AtomicU64,
    /// Of those, bytes that moved no data (a reflink): shown, not paced.
    unpaced: AtomicU64,
    /// Clock readings ([`clock`], 0: none yet): the latest request for a syscall while
    /// nothing was delivered, then the request before the first delivery, and the last
    /// delivery. The span between the two is when bytes were moving: the wait for a first
    /// byte and for the end after the last one are not in it (the report's rate).
    asked: AtomicU64,
    first: AtomicU64,
    last: AtomicU64,
    pacer: Option<Pacer>,
}

/// Nanoseconds since the first reading in this process, never 0.
fn clock() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX) | 1
}

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    /// A meter that holds the transfer to `rate` bytes per second (none: unlimited).
    pub fn limited(rate: Option<u64>) -> Meter {
        Meter {
            pacer: rate.map(Pacer::new),
            ..Meter::default()
        }
    }

    pub fn add(&self, n: u64) {
        self.delivered.fetch_add(n, Ordering::Relaxed);
        if n == 0 {
            return;
        }
        let now = clock();
        if self.first.load(Ordering::Relaxed) == 0 {
            let asked = match self.asked.load(Ordering::Relaxed) {
                0 => now,
                asked => asked,
            };
            let _ = self
                .first
                .compare_exchange(0, asked, Ordering::Relaxed, Ordering::Relaxed);
        }
        self.last.fetch_max(now, Ordering::Relaxed);
    }

    /// Seconds from the request that delivered the first byte to the last delivery
    /// (None: nothing delivered). Idle time before and after is not in it; a pause in the
    /// middle is.
    pub fn moving_seconds(&self) -> Option<f64> {
        let first = self.first.load(Ordering::Relaxed);
        let last = self.last.load(Ordering::Relaxed);
        (first != 0).then(|| last.saturating_sub(first) as f64 / 1e9)
    }

    /// Counts bytes that cost no transfer (a reflink shares extents): they show in the
    /// progress, and `--limit` does not make the next file wait for them.
    pub fn add_unpaced(&self, n: u64) {
        self.unpaced.fetch_add(n, Ordering::Relaxed);
        self.add(n);
    }

    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// The length the next syscall may ask for: `len` when unlimited; under `--limit`,
    /// a slice of the rate, after sleeping while the transfer is ahead of it. Every path
    /// calls this before its syscall (and before its interruption check, since it may
    /// sleep), so pacing keeps the path that was chosen.
    pub fn chunk(&self, len: usize) -> usize {
        if self.first.load(Ordering::Relaxed) == 0 {
            self.asked.store(clock(), Ordering::Relaxed);
        }
        match &self.pacer {
            None => len,
            Some(pacer) => {
                let paced = self
                    .delivered()
                    .saturating_sub(self.unpaced.load(Ordering::Relaxed));
                pacer.next_chunk(paced, len)
            }
        }
    }

    pub fn limit(&self) -> Option<u64> {
        self.pacer.as_ref().map(Pacer::rate)
    }
}

/// How many slices a second is cut into: each syscall asks for at most rate/PACE_HZ bytes.
const PACE_HZ: u64 = 8;

/// Unused credit kept after a stall: a source that paused for a minute does not earn a
/// minute of full speed.
const MAX_CREDIT: Duration = Duration::from_secs(1);

/// Longest single sleep, so SIGINT/SIGTERM are noticed quickly.
const SLEEP_SLICE: Duration = Duration::from_millis(50);

/// Holds a transfer to `rate` bytes per second.
#[derive(Debug)]
pub struct Pacer {
    rate: u64,
    /// When the bytes counted so far were "due from"; starts at the first request.
    epoch: Mutex<Option<Instant>>,
}

impl Pacer {
    pub fn new(rate: u64) -> Pacer {
        Pacer {
            rate: rate.max(1),
            epoch: Mutex::new(None),
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Called before each syscall with the bytes delivered so far: sleeps while the
    /// transfer is ahead of the rate, then returns how many bytes the next call may ask
    /// for (at most `len`, never 0). Returns early, unslept, once SIGINT/SIGTERM arrived.
    pub fn next_chunk(&self, delivered: u64, len: usize) -> usize {
        let due = Duration::from_secs_f64(delivered as f64 / self.rate as f64);
        loop {
            let now = Instant::now();
            let wait = {
                let mut epoch = self.epoch.lock().unwrap_or_else(|e| e.into_inner());
                let start = epoch.get_or_insert(now);
                let elapsed = now - *start;
                if elapsed > due + MAX_CREDIT {
                    // Stalled: forget the credit beyond MAX_CREDIT.
                    *start = now - due - MAX_CREDIT;
                }
                due.checked_sub(elapsed).unwrap_or_default()
            };
            if wait.is_zero() || crate::sys::process::interrupted() {
                break;
            }
            std::thread::sleep(wait.min(SLEEP_SLICE));
        }
        let quantum = (self.rate / PACE_HZ).max(1);
        len.min(usize::try_from(quantum).unwrap_or(usize::MAX))
            .max(1)
    }
}

/// "; limited to 2.00 MiB/s" for a `-v` plan line, or nothing.
pub fn plan_words(limit: Option<u64>) -> String {
    limit.map_or_else(String::new, |rate| {
        format!("; limited to {}/s", crate::units::human_bytes(rate))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_an_eighth_of_the_rate_and_never_zero() {
        let pacer = Pacer::new(8 << 20);
        assert_eq!(pacer.next_chunk(0, 1 << 30), 1 << 20);
        assert_eq!(pacer.next_chunk(0, 4096), 4096);
        assert_eq!(Pacer::new(3).next_chunk(0, 100), 1);
    }

    #[test]
    fn a_transfer_ahead_of_the_rate_waits() {
        let pacer = Pacer::new(1 << 20);
        let started = Instant::now();
        pacer.next_chunk(0, 1);
        pacer.next_chunk(256 << 10, 1); // a quarter second's worth already delivered
        assert!(started.elapsed() >= Duration::from_millis(240));
    }
}

//! Pacing in the relay: `-L/--limit RATE` for each direction of each connection and
//! `--limit-total RATE` for all of them together. A token bucket says how many bytes the
//! next reads (or splices) from a direction's source may ask for: the length of each call
//! shrinks, as `pipe`'s limiter does it, so splice stays splice. A direction out of tokens
//! stops reading (its source stays "ready") and a timer on the event loop wakes it when a
//! chunk's worth has come back: no thread sleeps.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many slices a second is cut into, as in `pipe` (`engine::meter`): a call asks for at
/// most rate/PACE_HZ bytes, and a bucket holds at most that much credit.
const PACE_HZ: u64 = 8;

/// A direction out of tokens wakes when this many (or a whole slice, if less) came back:
/// fewer, larger calls at high rates, a slice at a time at low ones.
const CHUNK: u64 = 64 * 1024;

#[derive(Debug)]
pub struct Bucket {
    rate: u64,
    /// Credit in bytes; below 0 after a read that had to be let through (an EOF or a
    /// reset looked for).
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(rate: u64, now: Instant) -> Bucket {
        let rate = rate.max(1);
        Bucket {
            rate,
            tokens: chunk(rate) as f64,
            last: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now.max(self.last);
        let cap = (self.rate / PACE_HZ).max(chunk(self.rate)) as f64;
        self.tokens = (self.tokens + dt * self.rate as f64).min(cap);
    }

    /// Bytes the next calls may take now (0: wait for [`Bucket::ready_at`]).
    fn allowance(&mut self, now: Instant) -> u64 {
        self.refill(now);
        if self.tokens < 1.0 {
            return 0;
        }
        (self.tokens as u64).min((self.rate / PACE_HZ).max(1))
    }

    fn charge(&mut self, n: u64) {
        self.tokens -= n as f64;
    }

    /// When a chunk's worth of tokens is there again.
    fn ready_at(&self, now: Instant) -> Instant {
        let missing = chunk(self.rate) as f64 - self.tokens;
        if missing <= 0.0 {
            return now;
        }
        now + Duration::from_secs_f64(missing / self.rate as f64)
    }
}

fn chunk(rate: u64) -> u64 {
    CHUNK.min((rate / PACE_HZ).max(1))
}

/// The buckets a direction answers to: its own (`--limit`) and the shared one
/// (`--limit-total`, over every worker).
pub struct Limits<'a> {
    pub own: Option<&'a mut Bucket>,
    pub total: Option<&'a Mutex<Bucket>>,
}

impl Limits<'_> {
    /// None: no limit. Some(n): the direction may take n bytes from its source this turn.
    pub fn allowance(&mut self, now: Instant) -> Option<u64> {
        let own = self.own.as_deref_mut().map(|b| b.allowance(now));
        let total = self
            .total
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).allowance(now));
        match (own, total) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The direction took `n` bytes from its source.
    pub fn charge(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(b) = self.own.as_deref_mut() {
            b.charge(n);
        }
        if let Some(m) = self.total {
            m.lock().unwrap_or_else(|e| e.into_inner()).charge(n);
        }
    }

    /// When a direction out of tokens is to try again.
    pub fn ready_at(&self, now: Instant) -> Instant {
        let own = self.own.as_deref().map_or(now, |b| b.ready_at(now));
        let total = self.total.map_or(now, |m| {
            m.lock().unwrap_or_else(|e| e.into_inner()).ready_at(now)
        });
        own.max(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_lets_its_rate_through_a_slice_at_a_time() {
        let t0 = Instant::now();
        let mut b = Bucket::new(8 << 20, t0);
        // A first chunk at once, then nothing until time passes.
        assert_eq!(b.allowance(t0), 64 << 10);
        b.charge(64 << 10);
        assert_eq!(b.allowance(t0), 0);
        let at = b.ready_at(t0);
        assert!(
            at > t0 && at - t0 <= Duration::from_millis(8),
            "{:?}",
            at - t0
        );
        // A second later a slice (1/8 of the rate) at most, however long it waited.
        assert_eq!(b.allowance(t0 + Duration::from_secs(5)), 1 << 20);
    }

    #[test]
    fn the_tighter_of_own_and_total_decides() {
        let t0 = Instant::now();
        let mut own = Bucket::new(1 << 20, t0);
        let total = Mutex::new(Bucket::new(64 << 10, t0));
        let mut limits = Limits {
            own: Some(&mut own),
            total: Some(&total),
        };
        assert_eq!(limits.allowance(t0), Some(8 << 10));
        limits.charge(8 << 10);
        assert_eq!(limits.allowance(t0), Some(0));
        let none = Limits {
            own: None,
            total: None,
        }
        .allowance(t0);
        assert_eq!(none, None);
    }
}

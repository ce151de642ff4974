//! Progress: the hot loops only bump an atomic counter of bytes delivered; whoever draws
//! a bar reads it from another thread.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes delivered to the sink so far.
#[derive(Debug, Default)]
pub struct Meter {
    delivered: AtomicU64,
}

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    pub fn add(&self, n: u64) {
        self.delivered.fetch_add(n, Ordering::Relaxed);
    }

    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }
}

//! tee(2) fan-out: built by the tee issue.

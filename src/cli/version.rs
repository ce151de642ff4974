//! `zerocat --version` and `zerocat version --verbose`: the version, and for a bug report
//! the commit, the kernel and what this kernel offers, each probed now.

use crate::sys::probe;

/// The commit this binary was built from (build.rs), "unknown" outside a git checkout.
pub const COMMIT: &str = env!("ZEROCAT_COMMIT");

/// `zerocat 0.4.0`, and with `verbose` a `name: value` line each for the commit, the kernel
/// and the kernel features zerocat's paths depend on.
pub fn text(verbose: bool) -> String {
    let mut out = format!("zerocat {}\n", env!("CARGO_PKG_VERSION"));
    if !verbose {
        return out;
    }
    let lines = [
        ("commit", COMMIT.to_string()),
        ("kernel", probe::kernel()),
        (
            "copy_file_range across filesystems",
            probe::copy_file_range_across_filesystems().to_string(),
        ),
        ("kTLS (tls ULP)", probe::ktls().to_string()),
        ("MPTCP", probe::mptcp().to_string()),
        ("UDP GSO", probe::udp_gso().to_string()),
        ("io_uring", probe::io_uring().to_string()),
    ];
    for (name, value) in lines {
        out.push_str(&format!("{name}: {value}\n"));
    }
    out
}

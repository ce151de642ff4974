use clap::Parser;

use zerocat::cli::Cli;
use zerocat::exit::{ExitCode, UsageError};

fn main() -> std::process::ExitCode {
    zerocat::process::reserve_standard_fds();
    zerocat::process::install_signal_handlers();
    let (options, invocation) = Cli::parse().into_invocation();
    let code = match zerocat::run(&options, &invocation) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("zerocat: {err:#}");
            if err.chain().any(|cause| cause.is::<UsageError>()) {
                ExitCode::Usage
            } else {
                ExitCode::Failure
            }
        }
    };
    code.into()
}

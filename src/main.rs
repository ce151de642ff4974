/// Closed standard fds are reserved before std's start-up replaces them with a read-write
/// /dev/null (see `process::reserve_standard_fds`), and the signals zerocat was started
/// with ignored are noted for its children (`process::reset_signals_for_child`).
#[used]
#[link_section = ".init_array"]
static RESERVE_STANDARD_FDS: zerocat::sys::process::InitArrayFn =
    zerocat::sys::process::RESERVE_BEFORE_STD;

fn main() -> std::process::ExitCode {
    zerocat::sys::process::install_signal_handlers();
    let (options, invocation) = zerocat::cli::parse_args();
    let result = zerocat::run(&options, &invocation);
    let code = zerocat::conclude(&options, &invocation, result);
    code.into()
}

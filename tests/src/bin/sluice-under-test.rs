//! The `sluice` command line, built inside the tests package so that integration tests can
//! run it as a process (`CARGO_BIN_EXE_sluice-under-test`): to kill it, and to give it its
//! own environment.

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}

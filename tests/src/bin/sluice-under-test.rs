//! The `sluice` command line, built inside the tests package so that integration tests can
//! run it as a process (`sluice_tests::fixture::sluice_binary` finds it): to kill it, and to
//! give it its own environment.

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}

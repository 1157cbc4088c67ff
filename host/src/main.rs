//! The `sluice` binary.

fn main() -> std::process::ExitCode {
    sluice::cli::main()
}

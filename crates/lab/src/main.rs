fn main() -> std::process::ExitCode {
    tandem_lab::cli::main()
}

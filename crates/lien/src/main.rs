//! `lien`: makes deletion safe in Kubernetes. See `lien --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}

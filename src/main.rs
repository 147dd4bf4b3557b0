fn main() {
    std::process::exit(locsim::cli::main());
}

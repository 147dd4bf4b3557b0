/// The simulator's host allocator: its large arrays aligned to host huge pages
/// (`locsim::hostmem::HostAlloc`).
#[global_allocator]
static HOST_ALLOC: locsim::hostmem::HostAlloc = locsim::hostmem::HostAlloc;

fn main() {
    std::process::exit(locsim::cli::main());
}

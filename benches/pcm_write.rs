//! Host speed of the PCM device model (`cargo bench --bench pcm_write`): nanoseconds per block
//! write of `Pcm::write` (with the old contents read from, and the new written to, a byte image
//! as `Machine::issue_phys` does), and the time of the end-of-run figures and of `reset_stats`.
//!
//! Two streams over a 48 MiB device (16 MiB data area, 32 MiB log area, as SPS's):
//! - `random`: every write a random block of the device, with random new contents;
//! - `sps-like`: per transaction, as SPS under H-WAL: two home writes to random data blocks
//!   changing one 8-byte word, four blocks appended to the log (two random words, the rest
//!   zero: about as many programmed cells as the log writes of a real run), and a rewrite of a
//!   fixed log-head block (a counter).
//!
//! Each stream is measured in `ROUNDS` rounds after a warm-up that has touched the device's
//! pages (its counters committed whole, as `locsim bench` does, so that no host first touch
//! falls in a round); the median round is the figure, with the fastest and slowest beside it.
//! Host timings: they vary from run to run and machine to machine; compare on one host.

use locsim::pcm::{Pcm, PcmConfig};
use locsim::rng::Rng;
use std::hint::black_box;
use std::time::Instant;

const DATA: u64 = 16 << 20;
const LOG: u64 = 32 << 20;
const BYTES: u64 = DATA + LOG;
/// Measured rounds per stream.
const ROUNDS: usize = 5;

struct Device {
    pcm: Pcm,
    image: Vec<u8>,
    writes: u64,
}

impl Device {
    fn new() -> Device {
        let regions = [("data", 0, DATA), ("log", DATA, LOG)];
        let mut pcm = Pcm::new(&PcmConfig::default(), BYTES, &regions);
        pcm.wear.commit_regions_whole();
        Device { pcm, image: locsim::hostmem::zeroed(BYTES as usize), writes: 0 }
    }

    #[inline]
    fn write(&mut self, addr: u64, new: &[u8; 64]) {
        let r = addr as usize..addr as usize + 64;
        let cost = self.pcm.write(addr, &self.image[r.clone()], new);
        black_box(cost.latency_ns);
        self.image[r].copy_from_slice(new);
        self.writes += 1;
    }
}

fn random_block(rng: &mut Rng) -> [u8; 64] {
    let mut b = [0u8; 64];
    for c in b.chunks_exact_mut(8) {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    b
}

fn random_stream(d: &mut Device, rng: &mut Rng, writes: u64) {
    for _ in 0..writes {
        let addr = rng.below(BYTES / 64) * 64;
        let new = random_block(rng);
        d.write(addr, &new);
    }
}

/// `txs` transactions of the SPS-like stream; `log_at` is the next log block (wraps).
fn sps_stream(d: &mut Device, rng: &mut Rng, txs: u64, log_at: &mut u64) {
    let head = DATA;
    for _ in 0..txs {
        for _ in 0..2 {
            let addr = rng.below(DATA / 64) * 64;
            let mut new: [u8; 64] = d.image[addr as usize..addr as usize + 64].try_into().unwrap();
            let w = rng.below(8) as usize * 8;
            new[w..w + 8].copy_from_slice(&rng.next_u64().to_le_bytes());
            d.write(addr, &new);
        }
        for _ in 0..4 {
            *log_at = if *log_at + 64 >= DATA + LOG { DATA + 64 } else { *log_at + 64 };
            let mut new = [0u8; 64];
            new[..16].copy_from_slice(&random_block(rng)[..16]);
            d.write(*log_at, &new);
        }
        let mut new: [u8; 64] = d.image[head as usize..head as usize + 64].try_into().unwrap();
        let n = u64::from_le_bytes(new[..8].try_into().unwrap()) + 1;
        new[..8].copy_from_slice(&n.to_le_bytes());
        d.write(head, &new);
    }
}

fn report(name: &str, d: &mut Device, mut round: impl FnMut(&mut Device)) {
    let mut ns = Vec::with_capacity(ROUNDS);
    let mut n = 0;
    for _ in 0..ROUNDS {
        let w0 = d.writes;
        let t = Instant::now();
        round(d);
        n = d.writes - w0;
        ns.push(t.elapsed().as_secs_f64() * 1e9 / n as f64);
    }
    ns.sort_by(f64::total_cmp);
    let median = ns[ROUNDS / 2];
    let t = Instant::now();
    let regions = d.pcm.wear.regions();
    let figures = t.elapsed().as_secs_f64();
    let max = regions.iter().map(|r| r.max_bit_updates).max().unwrap_or(0);
    let (total, host) = (d.pcm.wear.total_bit_updates, d.pcm.wear.host_bytes());
    println!(
        "{name:9} {ROUNDS} x {n:>7} writes {median:>7.1} ns/write ({:.1} - {:.1}) {:>6.2} Mwrites/s | figures {:>6.1} ms (total {} max {}) | counters {} MB",
        ns[0],
        ns[ROUNDS - 1],
        1e3 / median,
        figures * 1e3,
        total,
        max,
        host >> 20,
    );
}

fn main() {
    let mut rng = Rng::new(7);
    let mut d = Device::new();
    random_stream(&mut d, &mut rng, 200_000);
    let t = Instant::now();
    d.pcm.reset_stats();
    println!("reset_stats after warm-up: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    report("random", &mut d, |d| random_stream(d, &mut rng, 400_000));

    let mut rng = Rng::new(8);
    let mut d = Device::new();
    let mut log_at = DATA;
    sps_stream(&mut d, &mut rng, 20_000, &mut log_at);
    d.pcm.reset_stats();
    report("sps-like", &mut d, |d| sps_stream(d, &mut rng, 60_000, &mut log_at));
}

//! Typed configuration: Table I of the LOC papers as defaults, overridable by a TOML file
//! (`--config FILE`) and by `--set section.key=value`.
//!
//! Overrides are merged into the TOML tree of the defaults, key by key, so an unknown key is
//! rejected with the list of keys allowed at that place, before serde sees it. Every field has
//! its unit in its name. [`Config::validate`] checks ranges after the merge.

use serde::{Deserialize, Serialize};

use crate::types::{Cycle, Ns};

/// The whole machine and workload configuration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// How many cores share the LLC and the memory controller (docs/multicore.md).
    pub machine: MachineConfig,
    pub core: CoreConfig,
    pub l1: CacheConfig,
    pub l2: CacheConfig,
    /// The shared last-level cache; its capacity grows with the cores ([`LlcConfig`]).
    pub llc: LlcConfig,
    pub memory: MemoryConfig,
    pub log: LogConfig,
    pub pcm: crate::pcm::PcmConfig,
    pub startgap: crate::startgap::StartGapConfig,
    pub swal: SwalConfig,
    pub loc: LocConfig,
    /// Proteus's log lookup table and log pending queue (docs/protocols/proteus.md).
    pub proteus: ProteusConfig,
    /// HOOP's garbage collection (`hoop`; docs/protocols/hoop.md).
    #[serde(default)]
    pub hoop: HoopConfig,
    /// ATOM's undo log format (`atom`; docs/formats/atom-log.md).
    #[serde(default)]
    pub atom: AtomConfig,
    /// Which of the papers' strict-ordering mechanisms the machine enforces (docs/ordering.md).
    pub ordering: crate::ordering::OrderingConfig,
    pub workload: crate::workload::WorkloadConfig,
}

/// The memory device behind the controller (`memory.device`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Device {
    /// Fixed latencies (Table I).
    Ideal,
    /// The bit-accurate PCM device of `[pcm]`.
    Pcm,
}

/// How the memory device is attached to the host (`memory.attach`; docs/cxl.md).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attach {
    /// On the host's DDR channels (the papers' machine): the bank latencies are the whole path.
    #[default]
    Ddr,
    /// A CXL Type-3 memory device: every read and write also crosses the CXL link and
    /// `memory.cxl_switch_hops` switches.
    Cxl,
}

/// LOC's Speculative Persistence (`loc-wal`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LocConfig {
    /// Speculation degree: committed transactions per speculation window (the papers: 16;
    /// `--sd` sets it).
    pub speculation_degree: u32,
    /// LOC-WAL's log head in the two-slot form, so that a head write torn below 64 bytes leaves
    /// the previous head readable (docs/formats/wal-log.md, docs/faults.md). Off by default: the
    /// papers' head.
    #[serde(default)]
    pub two_slot_head: bool,
}

impl LocConfig {
    /// The speculation degrees allowed (checked once, in [`Config::validate`]).
    pub const SD_RANGE: std::ops::RangeInclusive<u32> = 1..=32;
}

/// Proteus's hardware tables (`proteus`; docs/protocols/proteus.md). The paper's sizes are not
/// used here: both are choices, checked once in [`Config::validate`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProteusConfig {
    /// Lines each core's log lookup table remembers as logged by its running transaction.
    pub llt_entries: u32,
    /// Undo entries the log pending queue at the memory controller holds (all cores share it).
    pub lpq_entries: u32,
}

impl ProteusConfig {
    pub const LLT_RANGE: std::ops::RangeInclusive<u32> = 1..=1024;
    pub const LPQ_RANGE: std::ops::RangeInclusive<u32> = 1..=4096;
}

/// HOOP's out-of-place region and mapping table (`hoop`; docs/protocols/hoop.md). The paper
/// leaves both sizes to the implementation; these are our choices.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HoopConfig {
    /// Garbage collection starts after a commit that leaves some core's OOP region at least
    /// this full (percent of its slices).
    pub gc_threshold_percent: u32,
    /// Entries of the mapping table (lines whose newest version is out of place); garbage
    /// collection starts after a commit that fills it.
    pub mapping_entries: u32,
    /// Each region's log head in the two-slot form with `home_below`, so that a head write torn
    /// below 64 bytes leaves the previous head readable (docs/formats/hoop-log.md,
    /// docs/faults.md). Off by default: the plain head.
    #[serde(default)]
    pub two_slot_head: bool,
}

impl HoopConfig {
    pub const THRESHOLD_RANGE: std::ops::RangeInclusive<u32> = 1..=90;
    pub const ENTRIES_RANGE: std::ops::RangeInclusive<u32> = 16..=(1 << 24);
}

impl Default for HoopConfig {
    fn default() -> Self {
        HoopConfig { gc_threshold_percent: 50, mapping_entries: 16384, two_slot_head: false }
    }
}

/// ATOM's undo log (`atom`; docs/formats/atom-log.md).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AtomConfig {
    /// Metadata lines carry a check in their own 8-byte unit, and a group is closed when its
    /// line is written (no rewrite in place), so that a metadata line torn below 64 bytes is
    /// no line (docs/formats/atom-log.md, docs/faults.md). Off by default: the paper's format.
    #[serde(default)]
    pub checked_meta: bool,
}

/// The machine's shape (`[machine]`): how many cores, and where the persistence domain ends.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// In-order blocking cores, each with its own L1 and L2 (`--cores`); 1 is the papers' machine.
    pub cores: u32,
    /// What a power failure drains to NVM (docs/machine.md "Persistence domains").
    pub persist_domain: PersistDomain,
    /// Entries (64-byte blocks) of each core's battery-backed persist buffer under
    /// `persist_domain = "bbb"` (unused otherwise).
    pub bbpb_entries: u32,
}

impl MachineConfig {
    /// The core counts allowed (checked once, in [`Config::validate`]).
    pub const CORES_RANGE: std::ops::RangeInclusive<u32> = 1..=16;
    /// The persist-buffer sizes allowed (checked once, in [`Config::validate`]).
    pub const BBPB_RANGE: std::ops::RangeInclusive<u32> = 1..=1024;
}

/// Where the persistence domain ends (`machine.persist_domain`; docs/machine.md).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PersistDomain {
    /// The NVM device: a write is durable when its bank completes it.
    Memory,
    /// Asynchronous DRAM refresh: the controller's write queue too (durable once accepted).
    Adr,
    /// Intel's extended ADR: every cache level too (a store is durable once performed).
    Eadr,
    /// A battery-backed persist buffer per core beside L1 (Alshboul et al., HPCA 2021): a store
    /// is durable once in the buffer, which drains to memory.
    Bbb,
    /// CXL's Global Persistent Flush with both phases: the host's caches are written back and
    /// the device's buffers drained (durable as under `eadr`; docs/cxl.md).
    Gpf,
    /// Global Persistent Flush without its cache write-back phase: only what reached the
    /// controller or the device is drained (durable as under `adr`; docs/cxl.md).
    GpfNoWriteback,
}

impl PersistDomain {
    /// Is the controller's write queue inside the domain (a write durable once accepted)?
    pub fn covers_queue(self) -> bool {
        self != PersistDomain::Memory
    }
    /// Are the core's stores durable once performed (the caches or a persist buffer inside)?
    pub fn covers_stores(self) -> bool {
        matches!(self, PersistDomain::Eadr | PersistDomain::Bbb | PersistDomain::Gpf)
    }
    /// Is the domain one of Global Persistent Flush's (a power failure leaves drain work that
    /// the run reports: docs/cxl.md)?
    pub fn is_gpf(self) -> bool {
        matches!(self, PersistDomain::Gpf | PersistDomain::GpfNoWriteback)
    }
    /// The domain names, for messages.
    pub const NAMES: &'static str = "memory, adr, eadr, bbb, gpf, gpf-no-writeback";
}

/// The in-order, blocking core.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CoreConfig {
    /// Core clock in MHz (Table I: 1 GHz). Memory latencies in ns are converted with it.
    pub freq_mhz: u64,
}

/// One cache level. Lines are 64 bytes; replacement is LRU; write-back, write-allocate.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Capacity in bytes (a power of two, at least `ways * 64`).
    pub size_bytes: u64,
    /// Associativity.
    pub ways: u64,
    /// Lookup latency of this level in core cycles, added on every access that reaches it.
    pub latency_cycles: Cycle,
}

/// The shared last-level cache. Its capacity is `size_per_core_bytes` per core, as chips build
/// it (a slice per core), unless `size_bytes` fixes it; [`Config::llc_cache`] is the one place
/// that resolves it. The sets are indexed by the block number's low bits, so a derived capacity
/// counts the cores down to a power of two (3 cores: 2 slices); every other count is exact.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LlcConfig {
    /// The whole shared capacity in bytes whatever the cores; 0 (the default) derives it from
    /// `size_per_core_bytes`.
    pub size_bytes: u64,
    /// Capacity per core in bytes (Table I's one-core LLC), used when `size_bytes` is 0.
    pub size_per_core_bytes: u64,
    /// Associativity, the same at every capacity (more cores add sets, not ways).
    pub ways: u64,
    /// Lookup latency in core cycles, the same at every capacity (Table I's one-core figure).
    pub latency_cycles: Cycle,
}

/// The memory controller and the NVM device behind it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Independent banks; blocks are interleaved across banks by block number.
    pub banks: u64,
    /// Time a bank is busy serving one 64-byte read, in ns.
    pub read_latency_ns: Ns,
    /// Time a bank is busy serving one 64-byte write, in ns (the write is durable at its end).
    pub write_latency_ns: Ns,
    /// Capacity of the controller's write queue in writes; a full queue stalls the writer.
    pub write_queue_entries: u64,
    /// `ideal`: fixed latencies (Table I); `pcm`: the bit-accurate device of `[pcm]` decides
    /// each write's latency and counts every programmed cell.
    pub device: Device,
    /// `ddr` (default: the bank latencies are the whole path) or `cxl` (a CXL Type-3 device:
    /// the `cxl_*` latencies are added; docs/cxl.md).
    #[serde(default)]
    pub attach: Attach,
    /// Under `attach = "cxl"`: what the CXL link adds to a read, in ns (request and data
    /// response both cross it).
    #[serde(default = "MemoryConfig::default_cxl_read_ns")]
    pub cxl_read_ns: Ns,
    /// Under `attach = "cxl"`: what the CXL link adds before a write reaches the device, in ns
    /// (the write is posted: only the request crosses before the device can program it).
    #[serde(default = "MemoryConfig::default_cxl_write_ns")]
    pub cxl_write_ns: Ns,
    /// Under `attach = "cxl"`: CXL switches between the host and the device (0: directly
    /// attached).
    #[serde(default)]
    pub cxl_switch_hops: i64,
    /// Under `attach = "cxl"`: what one switch adds each way, in ns (a read crosses it twice,
    /// a write once).
    #[serde(default = "MemoryConfig::default_cxl_switch_hop_ns")]
    pub cxl_switch_hop_ns: Ns,
}

impl MemoryConfig {
    /// Switch hops allowed (checked once, in [`Config::validate`]).
    pub const HOPS_RANGE: std::ops::RangeInclusive<i64> = 0..=8;
    fn default_cxl_read_ns() -> Ns {
        Ns::new(70)
    }
    fn default_cxl_write_ns() -> Ns {
        Ns::new(35)
    }
    fn default_cxl_switch_hop_ns() -> Ns {
        Ns::new(35)
    }
    /// Cycles the CXL path adds to a read and to a write (0 and 0 under `ddr`).
    pub fn cxl_cycles(&self, cfg: &Config) -> (Cycle, Cycle) {
        if self.attach == Attach::Ddr {
            return (Cycle::ZERO, Cycle::ZERO);
        }
        let hops = self.cxl_switch_hops.max(0) as u64;
        let read = Ns::new(self.cxl_read_ns.get() + 2 * hops * self.cxl_switch_hop_ns.get());
        let write = Ns::new(self.cxl_write_ns.get() + hops * self.cxl_switch_hop_ns.get());
        (cfg.ns_to_cycles(read), cfg.ns_to_cycles(write))
    }
}

/// The memory log area (hardware logs, and the software log of S-WAL).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// Size of the memory log area in bytes (the paper allocates 32 MB).
    pub size_bytes: u64,
    /// Block-group META blocks (EC-WAL, LOC-WAL, Kiln's fallback log) carry a 24-bit checksum
    /// in their SID word, so that a META torn below 64 bytes is not trusted
    /// (docs/formats/ec-log.md, docs/faults.md). Off by default: the papers' format.
    #[serde(default)]
    pub meta_checksum: bool,
}

/// Software costs of S-WAL, in instructions (1 cycle each), counted from the instruction
/// sequences of an S-WAL library's append, write-set look-up and apply loop (the counts are in
/// docs/protocols/s-wal.md).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SwalConfig {
    /// Non-memory instructions to append one log entry (tail arithmetic, wrap check, header).
    pub append_instructions: u64,
    /// Non-memory instructions of the write-set look-up that redirects a transactional load.
    pub lookup_instructions: u64,
    /// Non-memory instructions per write-set entry applied in place at commit.
    pub apply_instructions: u64,
    /// Entry headers in the packed form, `kind` in the same 8-byte unit as `seq`, so that a
    /// header torn below 64 bytes is not misread (docs/formats/wal-log.md, docs/faults.md). Off
    /// by default: the format without the fix.
    #[serde(default)]
    pub packed_headers: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            machine: MachineConfig { cores: 1, persist_domain: PersistDomain::Memory, bbpb_entries: 32 },
            core: CoreConfig { freq_mhz: 1000 },
            l1: CacheConfig { size_bytes: 32 << 10, ways: 2, latency_cycles: Cycle::new(1) },
            l2: CacheConfig { size_bytes: 256 << 10, ways: 8, latency_cycles: Cycle::new(8) },
            llc: LlcConfig { size_bytes: 0, size_per_core_bytes: 1 << 20, ways: 16, latency_cycles: Cycle::new(21) },
            memory: MemoryConfig {
                banks: 8,
                read_latency_ns: Ns::new(168),
                write_latency_ns: Ns::new(168),
                write_queue_entries: 32,
                device: Device::Ideal,
                attach: Attach::Ddr,
                cxl_read_ns: MemoryConfig::default_cxl_read_ns(),
                cxl_write_ns: MemoryConfig::default_cxl_write_ns(),
                cxl_switch_hops: 0,
                cxl_switch_hop_ns: MemoryConfig::default_cxl_switch_hop_ns(),
            },
            log: LogConfig { size_bytes: 32 << 20, meta_checksum: false },
            pcm: Default::default(),
            startgap: Default::default(),
            swal: SwalConfig {
                append_instructions: 6,
                lookup_instructions: 10,
                apply_instructions: 4,
                packed_headers: false,
            },
            loc: LocConfig { speculation_degree: 16, two_slot_head: false },
            proteus: ProteusConfig { llt_entries: 16, lpq_entries: 128 },
            hoop: HoopConfig::default(),
            atom: AtomConfig::default(),
            ordering: Default::default(),
            workload: Default::default(),
        }
    }
}

/// A configuration error: one line, naming the bad key or value and what is allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Config {
    /// The shortest time a write can take on the configured device, in cycles (what in-controller
    /// ordering may rely on: a write started later than another by more than the difference of
    /// their latencies completes later).
    pub fn min_write_cycles(&self) -> Cycle {
        match self.memory.device {
            Device::Pcm => self.ns_to_cycles(Ns::new(self.pcm.write_overhead_ns)),
            Device::Ideal => self.ns_to_cycles(self.memory.write_latency_ns),
        }
    }

    /// Convert a latency in ns to core cycles, rounding up: the one way from [`Ns`] to
    /// [`Cycle`].
    pub fn ns_to_cycles(&self, ns: Ns) -> Cycle {
        Cycle::new((ns.get() * self.core.freq_mhz).div_ceil(1000))
    }

    /// Simulated seconds of a span of core cycles at `core.freq_mhz`: the one way from
    /// [`Cycle`] to wall time.
    pub fn cycles_to_seconds(&self, cycles: Cycle) -> f64 {
        cycles.get() as f64 / (self.core.freq_mhz as f64 * 1e6)
    }

    /// Defaults, then the TOML text of a config file (if any), then `key=value` overrides.
    pub fn build(file_text: Option<&str>, sets: &[String]) -> Result<Config, ConfigError> {
        let mut tree = toml::Value::try_from(Config::default()).expect("defaults serialize");
        if let Some(text) = file_text {
            let user: toml::Value =
                toml::from_str(text).map_err(|e| ConfigError(format!("config file: {}", one_line(&e.to_string()))))?;
            merge(&mut tree, &user)?;
        }
        for s in sets {
            let (key, value) =
                s.split_once('=').ok_or_else(|| ConfigError(format!("--set `{s}`: expected key=value")))?;
            set_path(&mut tree, key.trim(), parse_value(value.trim()))?;
        }
        let mut cfg: Config = tree
            .try_into()
            .map_err(|e: toml::de::Error| ConfigError(format!("config: {}", one_line(&e.to_string()))))?;
        cfg.workload.tpcc.resolve(cfg.machine.cores);
        cfg.validate()?;
        Ok(cfg)
    }

    /// Range checks; each error names the key, the value and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let err = |k: &str, v: u64, allowed: &str| Err(ConfigError(format!("{k} = {v}: allowed {allowed}")));
        if !MachineConfig::CORES_RANGE.contains(&self.machine.cores) {
            return err("machine.cores", self.machine.cores as u64, "1..=16");
        }
        if !MachineConfig::BBPB_RANGE.contains(&self.machine.bbpb_entries) {
            return err("machine.bbpb_entries", self.machine.bbpb_entries as u64, "1..=1024");
        }
        if !(1..=10_000).contains(&self.core.freq_mhz) {
            return err("core.freq_mhz", self.core.freq_mhz, "1..=10000");
        }
        self.validate_caches()?;
        self.validate_memory()?;
        if self.log.size_bytes < 64 * 1024
            || !self.log.size_bytes.is_multiple_of(4096)
            || self.log.size_bytes > (1 << 36)
        {
            return err("log.size_bytes", self.log.size_bytes, "a multiple of 4096 between 65536 and 2^36");
        }
        if !LocConfig::SD_RANGE.contains(&self.loc.speculation_degree) {
            let allowed = format!("{}..={}", LocConfig::SD_RANGE.start(), LocConfig::SD_RANGE.end());
            return err("loc.speculation_degree", self.loc.speculation_degree as u64, &allowed);
        }
        for (key, v, r) in [
            ("proteus.llt_entries", self.proteus.llt_entries, ProteusConfig::LLT_RANGE),
            ("proteus.lpq_entries", self.proteus.lpq_entries, ProteusConfig::LPQ_RANGE),
        ] {
            if !r.contains(&v) {
                return err(key, v as u64, &format!("{}..={}", r.start(), r.end()));
            }
        }
        let h = &self.hoop;
        if !HoopConfig::THRESHOLD_RANGE.contains(&h.gc_threshold_percent) {
            return err("hoop.gc_threshold_percent", h.gc_threshold_percent as u64, "1..=90");
        }
        if !HoopConfig::ENTRIES_RANGE.contains(&h.mapping_entries) {
            return err("hoop.mapping_entries", h.mapping_entries as u64, "16..=16777216");
        }
        self.pcm.validate().map_err(ConfigError)?;
        self.startgap.validate().map_err(ConfigError)?;
        if self.startgap.enabled && self.machine.persist_domain.covers_stores() {
            return Err(ConfigError(
                format!(
                    "startgap.enabled with machine.persist_domain = {:?}: not modelled (a gap move would copy a line \
                 the caches hold durable); allowed with memory, adr",
                    self.machine.persist_domain
                )
                .to_lowercase(),
            ));
        }
        self.workload.validate().map_err(ConfigError)?;
        Ok(())
    }

    /// [`Config::validate`] of the caches: ways, sizes, latencies, inclusion.
    fn validate_caches(&self) -> Result<(), ConfigError> {
        let err = |k: &str, v: u64, allowed: &str| Err(ConfigError(format!("{k} = {v}: allowed {allowed}")));
        let llc = &self.llc;
        let per_core =
            CacheConfig { size_bytes: llc.size_per_core_bytes, ways: llc.ways, latency_cycles: llc.latency_cycles };
        let fixed = CacheConfig { size_bytes: llc.size_bytes, ..per_core.clone() };
        let levels =
            [("l1", &self.l1, "size_bytes"), ("l2", &self.l2, "size_bytes"), ("llc", &per_core, "size_per_core_bytes")];
        let fixed = (llc.size_bytes != 0).then_some(("llc", &fixed, "size_bytes"));
        for (name, c, size_key) in levels.into_iter().chain(fixed) {
            if !(1..=16).contains(&c.ways) {
                return err(&format!("{name}.ways"), c.ways, "1..=16");
            }
            let lines = c.size_bytes / 64;
            if c.size_bytes % 64 != 0
                || lines % c.ways != 0
                || !(lines / c.ways).is_power_of_two()
                || c.size_bytes > 1 << 36
            {
                let allowed = "a multiple of ways*64 giving a power-of-two number of sets, at most 2^36";
                let allowed =
                    if size_key == "size_bytes" && name == "llc" { format!("0 or {allowed}") } else { allowed.into() };
                return err(&format!("{name}.{size_key}"), c.size_bytes, &allowed);
            }
            if c.latency_cycles.get() > 10_000 {
                return err(&format!("{name}.latency_cycles"), c.latency_cycles.get(), "0..=10000");
            }
        }
        let shared = self.llc_cache().size_bytes;
        if shared > 1 << 36 {
            let allowed =
                format!("at most 2^36 / {} slices (machine.cores = {})", self.llc_slices(), self.machine.cores);
            return err("llc.size_per_core_bytes", llc.size_per_core_bytes, &allowed);
        }
        if self.l1.size_bytes > self.l2.size_bytes || self.l2.size_bytes > shared {
            return Err(ConfigError("cache sizes: inclusive hierarchy needs l1 <= l2 <= llc".into()));
        }
        Ok(())
    }

    /// The slices of a derived LLC: the cores, counted down to a power of two so that the sets
    /// stay a power of two.
    fn llc_slices(&self) -> u64 {
        1 << self.machine.cores.max(1).ilog2()
    }

    /// The shared LLC as built: `llc.size_bytes` if set, else `llc.size_per_core_bytes` times
    /// the cores (counted down to a power of two). One core: Table I's 1 MiB.
    pub fn llc_cache(&self) -> CacheConfig {
        let llc = &self.llc;
        let size_bytes = match llc.size_bytes {
            0 => llc.size_per_core_bytes.saturating_mul(self.llc_slices()),
            fixed => fixed,
        };
        CacheConfig { size_bytes, ways: llc.ways, latency_cycles: llc.latency_cycles }
    }

    /// [`Config::validate`] of the memory and of S-WAL's software costs.
    fn validate_memory(&self) -> Result<(), ConfigError> {
        let err = |k: &str, v: u64, allowed: &str| Err(ConfigError(format!("{k} = {v}: allowed {allowed}")));
        let m = &self.memory;
        if !(1..=1024).contains(&m.banks) {
            return err("memory.banks", m.banks, "1..=1024");
        }
        if !(1..=1_000_000).contains(&m.read_latency_ns.get()) {
            return err("memory.read_latency_ns", m.read_latency_ns.get(), "1..=1000000");
        }
        if !(1..=1_000_000).contains(&m.write_latency_ns.get()) {
            return err("memory.write_latency_ns", m.write_latency_ns.get(), "1..=1000000");
        }
        if !(1..=4096).contains(&m.write_queue_entries) {
            return err("memory.write_queue_entries", m.write_queue_entries, "1..=4096");
        }
        if !MemoryConfig::HOPS_RANGE.contains(&m.cxl_switch_hops) {
            return Err(ConfigError(format!(
                "memory.cxl_switch_hops = {}: allowed 0..=8 (CXL switches between host and device)",
                m.cxl_switch_hops
            )));
        }
        for (key, v) in [
            ("memory.cxl_read_ns", m.cxl_read_ns),
            ("memory.cxl_write_ns", m.cxl_write_ns),
            ("memory.cxl_switch_hop_ns", m.cxl_switch_hop_ns),
        ] {
            if v.get() > 100_000 {
                return err(key, v.get(), "0..=100000");
            }
        }
        let s = &self.swal;
        for (key, v) in [
            ("swal.append_instructions", s.append_instructions),
            ("swal.lookup_instructions", s.lookup_instructions),
            ("swal.apply_instructions", s.apply_instructions),
        ] {
            if v > 1_000_000 {
                return err(key, v, "0..=1000000");
            }
        }
        Ok(())
    }

    /// The configuration as TOML text (what `locsim config` prints; a valid `--config` file).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("config serializes")
    }

    /// A short stable hash of the configuration (FNV-1a of its TOML), for provenance.
    pub fn hash_hex(&self) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.to_toml().bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Interpret a `--set` value: TOML scalar if it parses as one (integer, float, bool, with `_`
/// separators), otherwise a string.
fn parse_value(v: &str) -> toml::Value {
    let wrapped = format!("x = {v}");
    match toml::from_str::<toml::Table>(&wrapped) {
        Ok(t) => t["x"].clone(),
        Err(_) => toml::Value::String(v.to_string()),
    }
}

fn allowed_keys(t: &toml::Table) -> String {
    t.keys().cloned().collect::<Vec<_>>().join(", ")
}

fn set_path(tree: &mut toml::Value, key: &str, value: toml::Value) -> Result<(), ConfigError> {
    if key == "memory.adr" {
        return Err(ConfigError(format!(
            "`memory.adr` was replaced by `machine.persist_domain`: allowed {}",
            PersistDomain::NAMES
        )));
    }
    let mut node = tree;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let here = parts[..i].join(".");
        let table = node.as_table_mut().ok_or_else(|| ConfigError(format!("`{here}` is a value, not a section")))?;
        if !table.contains_key(*part) {
            let place = if here.is_empty() { "top level".to_string() } else { format!("`{here}`") };
            return Err(ConfigError(format!(
                "unknown config key `{}`: allowed at {place}: {}",
                parts[..=i].join("."),
                allowed_keys(table)
            )));
        }
        node = table.get_mut(*part).expect("checked");
    }
    if node.is_table() {
        if value.as_table().is_some_and(|t| t.is_empty()) {
            return Ok(()); // an empty `[section]` in a file
        }
        return Err(ConfigError(format!("`{key}` is a section; set one of its keys")));
    }
    *node = coerce(node, value, key)?;
    Ok(())
}

/// Keep the default's type: an integer key given `1e3` or a float key given `2` still works.
fn coerce(old: &toml::Value, new: toml::Value, key: &str) -> Result<toml::Value, ConfigError> {
    use toml::Value::*;
    match (old, new) {
        (Integer(_), Integer(v)) => Ok(Integer(v)),
        // Below 2^63: `as` would saturate a larger float to i64::MAX without a word.
        (Integer(_), Float(f)) if f.fract() == 0.0 && (0.0..(1u64 << 63) as f64).contains(&f) => Ok(Integer(f as i64)),
        (Integer(_), Float(f)) if f.fract() == 0.0 && f > 0.0 => {
            Err(ConfigError(format!("`{key}` = {f:e}: expected an integer, at most {}", i64::MAX)))
        }
        (Float(_), Integer(v)) => Ok(Float(v as f64)),
        (Float(_), Float(v)) => Ok(Float(v)),
        (Boolean(_), Boolean(v)) => Ok(Boolean(v)),
        (String(_), v) => Ok(String(v.to_string().trim_matches('"').to_string())),
        (o, v) => Err(ConfigError(format!("`{key}` = {v}: expected {}", o.type_str()))),
    }
}

/// Apply every leaf of a user TOML tree as if it were a `--set path=value`.
fn merge(tree: &mut toml::Value, user: &toml::Value) -> Result<(), ConfigError> {
    let mut leaves = Vec::new();
    flatten(user, String::new(), &mut leaves);
    for (path, v) in leaves {
        set_path(tree, &path, v)?;
    }
    Ok(())
}

fn flatten(v: &toml::Value, prefix: String, out: &mut Vec<(String, toml::Value)>) {
    match v.as_table() {
        Some(t) if !t.is_empty() => {
            for (k, child) in t {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(child, path, out);
            }
        }
        _ => out.push((prefix, v.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_table_one() {
        let c = Config::default();
        assert_eq!((c.l1.size_bytes, c.l1.ways, c.l1.latency_cycles), (32768, 2, Cycle::new(1)));
        assert_eq!((c.l2.size_bytes, c.l2.ways, c.l2.latency_cycles), (262144, 8, Cycle::new(8)));
        assert_eq!((c.llc.size_per_core_bytes, c.llc.ways, c.llc.latency_cycles), (1 << 20, 16, Cycle::new(21)));
        assert_eq!(c.llc_cache().size_bytes, 1 << 20);
        assert_eq!((c.memory.banks, c.ns_to_cycles(c.memory.read_latency_ns)), (8, Cycle::new(168)));
        c.validate().unwrap();
    }

    #[test]
    fn set_overrides_a_value_and_keeps_its_type() {
        let c =
            Config::build(None, &["memory.write_latency_ns=300".into(), "machine.persist_domain=adr".into()]).unwrap();
        assert_eq!(c.memory.write_latency_ns, Ns::new(300));
        assert_eq!(c.machine.persist_domain, PersistDomain::Adr);
    }

    #[test]
    fn the_persist_domain_is_one_of_four_and_memory_adr_points_to_it() {
        for (v, d) in [
            ("memory", PersistDomain::Memory),
            ("adr", PersistDomain::Adr),
            ("eadr", PersistDomain::Eadr),
            ("bbb", PersistDomain::Bbb),
        ] {
            assert_eq!(
                Config::build(None, &[format!("machine.persist_domain={v}")]).unwrap().machine.persist_domain,
                d
            );
        }
        let e = Config::build(None, &["machine.persist_domain=nvdimm".into()]).unwrap_err();
        assert!(e.0.contains("unknown variant `nvdimm`") && e.0.contains("`bbb`") && !e.0.contains('\n'), "{e}");
        let e = Config::build(None, &["memory.adr=true".into()]).unwrap_err();
        assert!(e.0.contains("machine.persist_domain") && e.0.contains("eadr"), "{e}");
        let e = Config::build(Some("[memory]\nadr = true\n"), &[]).unwrap_err();
        assert!(e.0.contains("machine.persist_domain"), "{e}");
        let e = Config::build(None, &["machine.bbpb_entries=0".into()]).unwrap_err();
        assert_eq!(e.0, "machine.bbpb_entries = 0: allowed 1..=1024");
    }

    #[test]
    fn the_llc_grows_with_the_cores_unless_fixed() {
        let at = |sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            Config::build(None, &sets).map(|c| c.llc_cache().size_bytes).map_err(|e| e.0)
        };
        assert_eq!(at(&["machine.cores=4"]), Ok(4 << 20));
        assert_eq!(at(&["machine.cores=8", "llc.size_per_core_bytes=2097152"]), Ok(16 << 20));
        assert_eq!(at(&["machine.cores=3"]), Ok(2 << 20), "counted down to a power of two");
        assert_eq!(at(&["machine.cores=4", "llc.size_bytes=524288"]), Ok(524288), "a fixed size wins");
        let e = at(&["llc.size_per_core_bytes=1000"]).unwrap_err();
        assert!(e.starts_with("llc.size_per_core_bytes = 1000: allowed a multiple of ways*64"), "{e}");
        let e = at(&["llc.size_per_core_bytes=65536", "l2.size_bytes=131072"]).unwrap_err();
        assert!(e.contains("l1 <= l2 <= llc"), "{e}");
        let e = at(&["machine.cores=16", "llc.size_per_core_bytes=68719476736"]).unwrap_err();
        assert_eq!(e, "llc.size_per_core_bytes = 68719476736: allowed at most 2^36 / 16 slices (machine.cores = 16)");
        let e = at(&["llc.size_bytes=1000"]).unwrap_err();
        assert!(e.starts_with("llc.size_bytes = 1000: allowed 0 or a multiple"), "{e}");
    }

    #[test]
    fn unknown_key_is_rejected_with_the_allowed_keys() {
        let e = Config::build(None, &["memory.write_latency=300".into()]).unwrap_err();
        assert!(e.0.contains("unknown config key `memory.write_latency`"), "{e}");
        assert!(e.0.contains("write_latency_ns"), "{e}");
        assert!(!e.0.contains('\n'));
    }

    #[test]
    fn config_file_merges_and_rejects_unknown_keys() {
        let c = Config::build(Some("[l1]\nways = 4\n"), &[]).unwrap();
        assert_eq!((c.l1.ways, c.l1.size_bytes), (4, 32768));
        let e = Config::build(Some("[l1]\nwayz = 4\n"), &[]).unwrap_err();
        assert!(e.0.contains("l1.wayz"), "{e}");
        let e = Config::build(Some("[nope]\nx = 1\n"), &[]).unwrap_err();
        assert!(e.0.contains("unknown config key `nope`"), "{e}");
    }

    #[test]
    fn out_of_range_value_names_the_allowed_range() {
        let e = Config::build(None, &["memory.banks=0".into()]).unwrap_err();
        assert_eq!(e.0, "memory.banks = 0: allowed 1..=1024");
        let e = Config::build(None, &["l1.size_bytes=1000".into()]).unwrap_err();
        assert!(e.0.starts_with("l1.size_bytes = 1000"), "{e}");
        // A cache of more than 2^30 lines: its slots would not fit a link.
        let e = Config::build(None, &["llc.size_bytes=137438953472".into()]).unwrap_err();
        assert!(e.0.starts_with("llc.size_bytes = 137438953472: allowed") && e.0.ends_with("at most 2^36"), "{e}");
    }

    /// Every numeric key has a range: a value the simulator would overflow on, or a NaN, is
    /// refused with the allowed values (found by a sweep of each key over extreme values).
    #[test]
    fn extreme_values_of_every_kind_of_key_are_refused_with_the_range() {
        for (set, want) in [
            ("pcm.write_overhead_ns=1000001", "pcm.write_overhead_ns = 1000001: allowed 0..=1000000"),
            ("pcm.chunk_program_ns=1e7", "pcm.chunk_program_ns = 10000000: allowed 0..=1000000"),
            ("pcm.program_energy_pj_per_bit=nan", "pcm.program_energy_pj_per_bit = NaN: allowed 0 to 1e6"),
            ("pcm.read_energy_pj_per_bit=-0.5", "pcm.read_energy_pj_per_bit = -0.5: allowed 0 to 1e6"),
            ("pcm.background_power_mw=inf", "pcm.background_power_mw = inf: allowed 0 to 1e6"),
            ("pcm.cell_endurance_writes=inf", "pcm.cell_endurance_writes = inf: allowed 1 to 1e18"),
            ("swal.lookup_instructions=1000001", "swal.lookup_instructions = 1000001: allowed 0..=1000000"),
            (
                "workload.sps.compute_cycles_per_swap=1000001",
                "workload.sps.compute_cycles_per_swap = 1000001: allowed 0..=1000000",
            ),
            (
                "workload.btree.compute_cycles_per_moved_block=1000001",
                "workload.btree.compute_cycles_per_moved_block = 1000001: allowed 0..=1000000",
            ),
            // A float too large for an integer is not saturated to i64::MAX.
            ("memory.banks=1e19", "`memory.banks` = 1e19: expected an integer, at most 9223372036854775807"),
        ] {
            assert_eq!(Config::build(None, &[set.into()]).unwrap_err().0, want, "{set}");
        }
        let c = Config::build(None, &["pcm.write_overhead_ns=1e6".into(), "pcm.background_power_mw=0".into()]).unwrap();
        assert_eq!((c.pcm.write_overhead_ns, c.pcm.background_power_mw), (1_000_000, 0.0));
    }

    #[test]
    fn the_memory_device_is_ideal_or_pcm() {
        assert_eq!(Config::build(None, &["memory.device=pcm".into()]).unwrap().memory.device, Device::Pcm);
        let e = Config::build(None, &["memory.device=flash".into()]).unwrap_err();
        assert!(e.0.contains("unknown variant `flash`, expected `ideal` or `pcm`") && !e.0.contains('\n'), "{e}");
        let e = Config::build(None, &["pcm.write_mode=\"sometimes\"".into()]).unwrap_err();
        assert!(e.0.contains("write_mode"), "{e}");
    }

    #[test]
    fn wrong_type_is_rejected() {
        let e = Config::build(None, &["memory.banks=fast".into()]).unwrap_err();
        assert!(e.0.contains("memory.banks"), "{e}");
    }

    #[test]
    fn default_toml_round_trips() {
        // As built: `workload.tpcc.warehouses = "cores"` resolves to the core count.
        let c = Config::build(None, &[]).unwrap();
        assert_eq!(Config::build(Some(&c.to_toml()), &[]).unwrap(), c);
    }
}

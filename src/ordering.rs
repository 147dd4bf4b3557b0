//! The persistence-ordering model (`[ordering]`, docs/ordering.md): which of the LOC papers'
//! strict-ordering mechanisms the machine enforces, one knob per mechanism.
//!
//! Three presets: `overlapped`, locsim's own machine (log writes overlap across banks, the
//! checkpoint runs in the background, the core never waits for it); `paper`, the machine the
//! papers' text describes; `strictest`, `paper` with the strictest reading the text allows:
//! every persistent write of a transaction in program order, each durable before the next, for
//! every protocol (`write_order = durable`, `log_order = program`), and the next transaction
//! waiting at its begin, which bounds the cost of ordering from above. Each knob may also be set alone (`--set ordering.<knob>=<value>`); its
//! default value `preset` takes the preset's value. The sentence each knob comes from is quoted
//! on its type; docs/ordering.md gives both readings where the text is ambiguous.

use serde::{Deserialize, Serialize};

/// `ordering.preset`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// locsim's machine: every knob at the value that reproduces the results before the
    /// ordering model existed.
    Overlapped,
    /// The papers' strict-ordering machine.
    Paper,
    /// `paper` with `write_order = durable`, `log_order = program` and `phase_barrier =
    /// begin`: the strictest reading of the papers' text (docs/ordering.md).
    Strictest,
}

/// `ordering.commit_flush`: what happens to a transaction's dirty lines when it commits (for
/// LOC-WAL, when its speculation window completes). `loc-extended.txt` 1: strict ordering
/// "requires 1) flushing dirty data blocks from each cache level to memory".
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommitFlush {
    /// The preset's value.
    Preset,
    /// The log write copies the line; the core pays nothing to move it out of L1/L2 and the
    /// line keeps its place (locsim's machine).
    None,
    /// The line is flushed down every level (the core pays [`FlushCost`] per line) and stays
    /// cached, clean (a `clwb`-like flush).
    Clean,
    /// As `clean`, and the line then leaves every level (a `clflush`: the papers' "cache flush",
    /// which costs cache efficiency, `loc-extended.txt` 5.2: "The elimination of intra-tx
    /// ordering leads to fewer cache flushes and improves cache efficiency").
    Invalidate,
}

/// `ordering.flush_cost`: what moving one dirty line out of the inner levels costs the core.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlushCost {
    /// The preset's value.
    Preset,
    /// One LLC write (`llc.latency_cycles`) per line dirty in L1 or L2 (locsim's Kiln flush);
    /// `clflush` costs one L1 look-up.
    LlcWrite,
    /// Per level the dirty copy passes: the latency of each level it is written into (L2, then
    /// the LLC), from "flushing dirty data blocks from each cache level".
    PerLevel,
}

/// `ordering.write_order`: how a transaction's commit-time writes (log, commit record, in-place
/// updates) reach the controller. `loc-extended.txt` 1: "2) writing them back to main memory in
/// the order specified by the transaction at transaction commit time".
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteOrder {
    /// The preset's value.
    Preset,
    /// Each protocol's own waits (locsim's machine: log writes wait for acceptance, the
    /// checkpoint's writes are issued back to back).
    AsIssued,
    /// Each write is issued only after the previous one is accepted (program order at the
    /// controller's door).
    Accepted,
    /// Each write is issued only after the previous one is durable (program order in memory).
    Durable,
}

/// `ordering.log_order`: which writes of a transaction `write_order` orders (read only when
/// `write_order` is `accepted` or `durable`). LOC ICCD 2014, section I: "The writes within and
/// across transactions are persisted (i.e., written to persistent memory) in strict program
/// order"; section II: Eager Commit removes the commit record and the wait before it ("Before a
/// transaction commits, WAL needs to ensure that the new version of each updated data block of
/// the transaction is completely persisted. Only after that, WAL updates the commit record.");
/// section III: Speculative Persistence allows "blocks from different transactions to be
/// written to the persistent memory log speculatively".
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LogOrder {
    /// The preset's value.
    Preset,
    /// Only each protocol's commit-time sequence (H-WAL's log, descriptors and commit record;
    /// every WAL protocol's in-place updates; S-WAL's write-backs; ATOM's and HOOP's commit
    /// writes); Eager Commit's and LOC's log writes are left out of it.
    ExemptEcLoc,
    /// Every persistent write of a transaction, from its begin to the end of its commit, in one
    /// sequence (every protocol but the baseline); under Speculative Persistence each
    /// transaction of a window its own sequence, and the window's close (pairs, METAs,
    /// checkpoint) one more.
    Program,
}

/// `ordering.phase_barrier`: when the next transaction may write. `loc-extended.txt` 1: "3)
/// waiting for the completion of all memory writes within the transaction before a single write
/// for the next transaction can be performed"; 2: "one phase cannot be started before the
/// previous phase is complete". EC-WAL keeps it between transactions, LOC-WAL only between
/// speculation windows.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseBarrier {
    /// The preset's value.
    Preset,
    /// The checkpoint and truncation run in the background; nothing waits for them.
    None,
    /// The next transaction's first persistent write waits until every write of the previous
    /// transaction (window), in-place updates and truncation included, is durable.
    FirstWrite,
    /// The next transaction does not begin before that (the program waits at `begin`).
    Begin,
}

/// `ordering.conflict`: what the eviction of an uncommitted transactional line does.
/// `loc-extended.txt` 3.3: "a cache conflict in the CPU cache that causes a block of a later
/// transaction to be evicted must force the eviction of all data blocks of itself and previous
/// transactions"; with Speculative Persistence "cache conflict of one data block does not force
/// eviction of all blocks of its and all previous transactions".
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Conflict {
    /// The preset's value.
    Preset,
    /// Only the evicted line goes to the log.
    Line,
    /// Every dirty line of the transaction goes to the log and leaves the cache (H-WAL, EC-WAL;
    /// never inside a LOC speculation window).
    Transaction,
}

/// The `[ordering]` section as configured (knobs may say `preset`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OrderingConfig {
    /// `overlapped` (locsim's machine), `paper` (the papers' strict ordering) or `strictest`.
    pub preset: Preset,
    pub commit_flush: CommitFlush,
    pub flush_cost: FlushCost,
    pub write_order: WriteOrder,
    pub phase_barrier: PhaseBarrier,
    pub conflict: Conflict,
    pub log_order: LogOrder,
}

impl Default for OrderingConfig {
    fn default() -> Self {
        OrderingConfig {
            preset: Preset::Overlapped,
            commit_flush: CommitFlush::Preset,
            flush_cost: FlushCost::Preset,
            write_order: WriteOrder::Preset,
            phase_barrier: PhaseBarrier::Preset,
            conflict: Conflict::Preset,
            log_order: LogOrder::Preset,
        }
    }
}

/// The ordering the machine enforces: every knob resolved (none says `Preset`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Ordering {
    pub commit_flush: CommitFlush,
    pub flush_cost: FlushCost,
    pub write_order: WriteOrder,
    pub phase_barrier: PhaseBarrier,
    pub conflict: Conflict,
    pub log_order: LogOrder,
}

impl Ordering {
    /// The values of a preset.
    pub const fn of(p: Preset) -> Ordering {
        match p {
            Preset::Overlapped => Ordering {
                commit_flush: CommitFlush::None,
                flush_cost: FlushCost::LlcWrite,
                write_order: WriteOrder::AsIssued,
                phase_barrier: PhaseBarrier::None,
                conflict: Conflict::Line,
                log_order: LogOrder::ExemptEcLoc,
            },
            Preset::Paper => Ordering {
                commit_flush: CommitFlush::Invalidate,
                flush_cost: FlushCost::PerLevel,
                write_order: WriteOrder::Accepted,
                phase_barrier: PhaseBarrier::FirstWrite,
                conflict: Conflict::Transaction,
                log_order: LogOrder::ExemptEcLoc,
            },
            Preset::Strictest => Ordering {
                write_order: WriteOrder::Durable,
                phase_barrier: PhaseBarrier::Begin,
                log_order: LogOrder::Program,
                ..Ordering::of(Preset::Paper)
            },
        }
    }

    /// Each knob's name and value word, in the order of [`KNOBS`] (the bits of [`KnobsRead`]).
    pub fn words(&self) -> [(&'static str, String); 6] {
        [
            (KNOBS[0].0, word(&self.commit_flush)),
            (KNOBS[1].0, word(&self.flush_cost)),
            (KNOBS[2].0, word(&self.write_order)),
            (KNOBS[3].0, word(&self.phase_barrier)),
            (KNOBS[4].0, word(&self.conflict)),
            (KNOBS[5].0, word(&self.log_order)),
        ]
    }
}

/// The knobs a run has read so far: bit `i` for [`KNOBS`]`[i]`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KnobsRead(u8);

impl KnobsRead {
    /// The names of the knobs never read.
    pub fn unread(self) -> Vec<&'static str> {
        KNOBS.iter().enumerate().filter(|&(i, _)| self.0 & 1 << i == 0).map(|(_, (k, _))| *k).collect()
    }
}

/// The ordering the machine enforces, each knob read through its method, which records the
/// read. Execution is deterministic and a knob can change it only by being read, so a run that
/// never read a knob takes the same path, and gives the same result, whatever that knob's value
/// (docs/ordering.md, "Knobs a run reads"): `reproduce` runs such points once. The values are
/// private so that no read escapes the record.
#[derive(Clone, Debug)]
pub struct Knobs {
    ord: Ordering,
    read: std::cell::Cell<u8>,
}

impl Knobs {
    pub fn new(ord: Ordering) -> Knobs {
        Knobs { ord, read: std::cell::Cell::new(0) }
    }

    #[inline(always)]
    fn mark(&self, knob: usize) {
        self.read.set(self.read.get() | 1 << knob);
    }

    #[inline]
    pub fn commit_flush(&self) -> CommitFlush {
        self.mark(0);
        self.ord.commit_flush
    }

    #[inline]
    pub fn flush_cost(&self) -> FlushCost {
        self.mark(1);
        self.ord.flush_cost
    }

    #[inline]
    pub fn write_order(&self) -> WriteOrder {
        self.mark(2);
        self.ord.write_order
    }

    #[inline]
    pub fn phase_barrier(&self) -> PhaseBarrier {
        self.mark(3);
        self.ord.phase_barrier
    }

    #[inline]
    pub fn conflict(&self) -> Conflict {
        self.mark(4);
        self.ord.conflict
    }

    #[inline]
    pub fn log_order(&self) -> LogOrder {
        self.mark(5);
        self.ord.log_order
    }

    /// Every persistent write of a transaction in one ordered sequence (`write_order` other than
    /// `as-issued` and `log_order = program`); reads `log_order` only when `write_order` orders.
    #[inline]
    pub fn program_order(&self) -> bool {
        matches!(self.write_order(), WriteOrder::Accepted | WriteOrder::Durable)
            && self.log_order() == LogOrder::Program
    }

    /// The knobs read since the machine was built.
    pub fn read(&self) -> KnobsRead {
        KnobsRead(self.read.get())
    }
}

impl Default for Ordering {
    fn default() -> Self {
        Ordering::of(Preset::Overlapped)
    }
}

impl OrderingConfig {
    /// Every knob at its own value, or the preset's.
    pub fn resolve(&self) -> Ordering {
        let p = Ordering::of(self.preset);
        Ordering {
            commit_flush: match self.commit_flush {
                CommitFlush::Preset => p.commit_flush,
                v => v,
            },
            flush_cost: match self.flush_cost {
                FlushCost::Preset => p.flush_cost,
                v => v,
            },
            write_order: match self.write_order {
                WriteOrder::Preset => p.write_order,
                v => v,
            },
            phase_barrier: match self.phase_barrier {
                PhaseBarrier::Preset => p.phase_barrier,
                v => v,
            },
            conflict: match self.conflict {
                Conflict::Preset => p.conflict,
                v => v,
            },
            log_order: match self.log_order {
                LogOrder::Preset => p.log_order,
                v => v,
            },
        }
    }

    /// The knobs that differ from `overlapped` once resolved, as `knob=value` (for labels).
    pub fn differences(&self) -> Vec<String> {
        let overlapped = Ordering::of(Preset::Overlapped).words();
        self.resolve()
            .words()
            .into_iter()
            .zip(overlapped)
            .filter(|((_, v), (_, o))| v != o)
            .map(|((k, v), _)| format!("{k}={v}"))
            .collect()
    }
}

/// The knobs in the order the ablation switches them on, each with its `paper` value
/// (`log_order`'s is `overlapped`'s too: under `paper` it orders what it orders today).
pub const KNOBS: [(&str, &str); 6] = [
    ("commit_flush", "invalidate"),
    ("flush_cost", "per-level"),
    ("write_order", "accepted"),
    ("phase_barrier", "first-write"),
    ("conflict", "transaction"),
    ("log_order", "exempt-ec-loc"),
];

/// The ablation step that is `strictest` with `log_order = exempt-ec-loc`: the strictest
/// reading before every write of a transaction was ordered (Eager Commit's and LOC's log writes
/// exempt), to show what the exemption was worth.
pub const STRICTEST_EXEMPT: &str = "strictest-exempt-ec-loc";

/// The configuration overrides of an ablation step (the `ordering` axis of an experiment):
/// `overlapped`, `paper`, `strictest`, [`STRICTEST_EXEMPT`], a knob name (that knob alone at its `paper` value, the others as in
/// `overlapped`) or `+knob` (that knob and every knob before it in [`KNOBS`]: cumulative steps,
/// the last one being `paper`). An unknown step names the allowed ones.
pub fn step_sets(step: &str) -> Result<Vec<String>, String> {
    let set = |(k, v): &(&str, &str)| format!("ordering.{k}={v}");
    if ["overlapped", "paper", "strictest"].contains(&step) {
        return Ok(vec![format!("ordering.preset={step}")]);
    }
    if step == STRICTEST_EXEMPT {
        return Ok(vec!["ordering.preset=strictest".into(), "ordering.log_order=exempt-ec-loc".into()]);
    }
    if let Some(i) = KNOBS.iter().position(|(k, _)| *k == step) {
        return Ok(vec![set(&KNOBS[i])]);
    }
    if let Some(i) = step.strip_prefix('+').and_then(|k| KNOBS.iter().position(|(n, _)| *n == k)) {
        return Ok(KNOBS[..=i].iter().map(set).collect());
    }
    let knobs: Vec<&str> = KNOBS.iter().map(|(k, _)| *k).collect();
    Err(format!(
        "ordering step `{step}`: allowed overlapped, paper, strictest, {STRICTEST_EXEMPT}, a knob ({}) or +knob (cumulative)",
        knobs.join(", ")
    ))
}

/// A knob value's word as written in the configuration.
pub fn word<T: Serialize>(v: &T) -> String {
    toml::Value::try_from(v).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_default_is_overlapped_and_knobs_follow_the_preset() {
        let c = Config::default();
        assert_eq!(c.ordering.resolve(), Ordering::of(Preset::Overlapped));
        let c = Config::build(None, &["ordering.preset=paper".into()]).unwrap();
        assert_eq!(c.ordering.resolve(), Ordering::of(Preset::Paper));
        let c = Config::build(None, &["ordering.preset=paper".into(), "ordering.conflict=line".into()]).unwrap();
        assert_eq!(c.ordering.resolve().conflict, Conflict::Line);
        assert_eq!(c.ordering.resolve().phase_barrier, PhaseBarrier::FirstWrite);
    }

    #[test]
    fn strictest_is_paper_with_durable_program_order_and_the_barrier_at_begin() {
        let c = Config::build(None, &["ordering.preset=strictest".into()]).unwrap();
        let r = c.ordering.resolve();
        assert_eq!(
            (r.write_order, r.phase_barrier, r.log_order),
            (WriteOrder::Durable, PhaseBarrier::Begin, LogOrder::Program)
        );
        let back = Ordering {
            write_order: WriteOrder::Accepted,
            phase_barrier: PhaseBarrier::FirstWrite,
            log_order: LogOrder::ExemptEcLoc,
            ..r
        };
        assert_eq!(back, Ordering::of(Preset::Paper));
        let c = Config::build(None, &step_sets("strictest").unwrap()).unwrap();
        assert_eq!(c.ordering.resolve(), r);
        // The exemption: the same knobs, Eager Commit's and LOC's log writes out of the sequence.
        let c = Config::build(None, &step_sets(STRICTEST_EXEMPT).unwrap()).unwrap();
        assert_eq!(c.ordering.resolve(), Ordering { log_order: LogOrder::ExemptEcLoc, ..r });
        assert_eq!(
            c.ordering.differences(),
            [
                "commit_flush=invalidate",
                "flush_cost=per-level",
                "write_order=durable",
                "phase_barrier=begin",
                "conflict=transaction"
            ]
        );
    }

    #[test]
    fn program_order_needs_an_ordering_write_order_and_reads_log_order_only_then() {
        let k = Knobs::new(Ordering { log_order: LogOrder::Program, ..Ordering::of(Preset::Overlapped) });
        assert!(!k.program_order());
        assert_eq!(k.read().unread(), ["commit_flush", "flush_cost", "phase_barrier", "conflict", "log_order"]);
        let k = Knobs::new(Ordering::of(Preset::Strictest));
        assert!(k.program_order());
        assert_eq!(k.read().unread(), ["commit_flush", "flush_cost", "phase_barrier", "conflict"]);
        let k = Knobs::new(Ordering { log_order: LogOrder::Program, ..Ordering::of(Preset::Paper) });
        assert!(k.program_order());
        assert!(!Knobs::new(Ordering::of(Preset::Paper)).program_order());
    }

    #[test]
    fn each_knob_is_settable_alone() {
        let c = Config::build(None, &["ordering.write_order=durable".into()]).unwrap();
        let r = c.ordering.resolve();
        assert_eq!(r.write_order, WriteOrder::Durable);
        assert_eq!(Ordering { write_order: WriteOrder::AsIssued, ..r }, Ordering::of(Preset::Overlapped));
        assert_eq!(c.ordering.differences(), vec!["write_order=durable".to_string()]);
        for (k, v) in [
            ("commit_flush", "clean"),
            ("commit_flush", "invalidate"),
            ("flush_cost", "per-level"),
            ("write_order", "accepted"),
            ("phase_barrier", "first-write"),
            ("phase_barrier", "begin"),
            ("conflict", "transaction"),
            ("log_order", "program"),
        ] {
            let c = Config::build(None, &[format!("ordering.{k}={v}")]).unwrap();
            assert_eq!(c.ordering.differences(), vec![format!("{k}={v}")]);
        }
    }

    #[test]
    fn the_cumulative_ablation_ends_at_paper() {
        let last = format!("+{}", KNOBS[KNOBS.len() - 1].0);
        let c = Config::build(None, &step_sets(&last).unwrap()).unwrap();
        assert_eq!(c.ordering.resolve(), Ordering::of(Preset::Paper));
        let c = Config::build(None, &step_sets("overlapped").unwrap()).unwrap();
        assert_eq!(c.ordering.resolve(), Ordering::of(Preset::Overlapped));
        for (k, v) in KNOBS {
            let c = Config::build(None, &step_sets(k).unwrap()).unwrap();
            // `log_order`'s `paper` value is `overlapped`'s.
            let want = if k == "log_order" { vec![] } else { vec![format!("{k}={v}")] };
            assert_eq!(c.ordering.differences(), want);
        }
        let e = step_sets("+speed").unwrap_err();
        assert!(e.contains("allowed overlapped, paper, strictest") && e.contains("phase_barrier"), "{e}");
    }

    #[test]
    fn a_bad_value_names_the_allowed_ones() {
        let e = Config::build(None, &["ordering.preset=strict".into()]).unwrap_err();
        assert!(e.0.contains("unknown variant `strict`") && e.0.contains("paper"), "{e}");
        assert!(!e.0.contains('\n'));
        let e = Config::build(None, &["ordering.write_order=sometimes".into()]).unwrap_err();
        assert!(e.0.contains("accepted") && e.0.contains("durable"), "{e}");
        let e = Config::build(None, &["ordering.log_order=loose".into()]).unwrap_err();
        assert!(
            e.0.contains("unknown variant `loose`") && e.0.contains("exempt-ec-loc") && e.0.contains("program"),
            "{e}"
        );
        assert!(!e.0.contains('\n'));
        let e = Config::build(None, &["ordering.speed=1".into()]).unwrap_err();
        assert!(e.0.contains("unknown config key `ordering.speed`") && e.0.contains("phase_barrier"), "{e}");
    }
}

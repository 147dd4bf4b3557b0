//! Recovery from damaged durable images (docs/faults.md, "Damaged images"): whatever the bytes
//! of the log area and the NV-LLC state (bit flips, zeroed blocks, garbage, a log head pointing
//! anywhere, META blocks, descriptors and commit records with impossible counts and windows),
//! recovery of every protocol returns a well-formed plan or a clean `corrupt log at block N`
//! error; it never panics, loops or reads outside the image, and the image its plan leaves
//! recovers again.
//!
//! The images are real: the durable images of a short recorded run of each protocol at several
//! crash points, damaged by a few random operations each ([`Damage`]). Fields are drawn from
//! values near the ones recovery expects (the head's `start` and `start_seq` plus a little),
//! at the edges of their types, and at random, so that damage gets past the magic numbers and
//! sequence checks into the code that trusts counts and positions.

use super::{apply, recover};
use crate::config::Config;
use crate::log::ec::{BlkTag, Meta, DATA_SLOTS, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::log::nvllc::{self, Register};
use crate::log::swal::{EntryHeader, HEADER_BYTES};
use crate::log::wal::{CommitRecord, Descriptor};
use crate::log::{loc, nvllc::encode_tag};
use crate::pmem::Layout;
use crate::protocol::ProtocolKind;
use crate::runner::{execute, RunSpec};
use crate::types::BlockId;
use crate::types::Cycle;
use crate::workload::WorkloadKind;
use proptest::prelude::*;
use std::sync::OnceLock;

/// A number recovery will read: absolute, or relative to the undamaged head's `start` or
/// `start_seq` (so that sequence checks pass and the damage reaches what follows them).
#[derive(Clone, Copy, Debug)]
enum Num {
    Abs(u64),
    Start(i8),
    Seq(i8),
}

fn num() -> impl Strategy<Value = Num> {
    prop_oneof![
        (0u64..4).prop_map(Num::Abs),
        any::<u64>().prop_map(Num::Abs),
        (0u64..4).prop_map(|d| Num::Abs(u64::MAX - d)),
        (0u64..4).prop_map(|d| Num::Abs((1 << 32) - 1 - d)),
        any::<i8>().prop_map(|d| Num::Start(d % 8)),
        any::<i8>().prop_map(|d| Num::Seq(d % 8)),
    ]
}

/// One damage operation. Positions are fractions (`u16` / 2^16) of the region they fall in, or
/// small offsets from the head's `start`.
#[derive(Clone, Debug)]
enum Damage {
    /// Flip one bit anywhere outside the data area.
    Flip {
        at: u32,
        bit: u8,
    },
    /// Zero a block outside the data area.
    Zero {
        at: u16,
    },
    /// Random bytes in a block outside the data area.
    Garbage {
        at: u16,
        bytes: Vec<u8>,
    },
    /// A u64 field of a block near the head's start (or the head itself, offset 0).
    Field {
        near: u8,
        word: u8,
        value: Num,
    },
    /// A log head with valid magic and format, and any start and start_seq.
    Head {
        start: Num,
        seq: Num,
    },
    /// An H-WAL descriptor / commit record `near` blocks after the start.
    Desc {
        near: u8,
        seq: Num,
        addrs: Vec<u32>,
    },
    Commit {
        near: u8,
        seq: Num,
        blocks: u32,
    },
    /// An S-WAL entry header `near` 8-byte words after the start.
    Entry {
        near: u8,
        seq: Num,
        addr: Num,
        len: u32,
        kind: u32,
    },
    /// A META block for the group `near` after the start, with the SID expected there.
    Meta {
        near: u8,
        sid: Num,
        tags: Vec<(bool, u32, u16, Num, bool)>,
    },
    /// LOC pair block contents at a group's data slot.
    Pairs {
        near: u8,
        slot: u8,
        pairs: Vec<(Num, Num, u16)>,
    },
    /// Kiln: the commit register, or an NV-LLC line's tag.
    Register {
        committed: Num,
        applied: Num,
    },
    NvTag {
        slot: u16,
        home: Num,
        seq: Num,
    },
    /// A HOOP slice with a valid checksum at a slot near the head's start.
    Slice {
        near: u8,
        seq: Num,
        order: Num,
        index: u32,
        commit: bool,
        addrs: Vec<u32>,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<u32>(), any::<u8>()).prop_map(|(at, bit)| Damage::Flip { at, bit }),
        any::<u16>().prop_map(|at| Damage::Zero { at }),
        (any::<u16>(), proptest::collection::vec(any::<u8>(), 64))
            .prop_map(|(at, bytes)| Damage::Garbage { at, bytes }),
        (0u8..24, 0u8..8, num()).prop_map(|(near, word, value)| Damage::Field { near, word, value }),
        (num(), num()).prop_map(|(start, seq)| Damage::Head { start, seq }),
        (0u8..24, num(), proptest::collection::vec(prop_oneof![0u32..64, any::<u32>()], 1..=12))
            .prop_map(|(near, seq, addrs)| Damage::Desc { near, seq, addrs }),
        (0u8..24, num(), prop_oneof![0u32..16, any::<u32>()]).prop_map(|(near, seq, blocks)| Damage::Commit {
            near,
            seq,
            blocks
        }),
        (0u8..64, num(), num(), prop_oneof![0u32..80, any::<u32>()], 0u32..4)
            .prop_map(|(near, seq, addr, len, kind)| Damage::Entry { near, seq, addr, len, kind }),
        (
            0u8..8,
            num(),
            proptest::collection::vec(
                (any::<bool>(), prop_oneof![0u32..64, any::<u32>()], 0u16..12, num(), any::<bool>()),
                7
            )
        )
            .prop_map(|(near, sid, tags)| Damage::Meta { near, sid, tags }),
        (0u8..8, 0u8..7, proptest::collection::vec((num(), num(), any::<u16>()), 0..16))
            .prop_map(|(near, slot, pairs)| Damage::Pairs { near, slot, pairs }),
        (num(), num()).prop_map(|(committed, applied)| Damage::Register { committed, applied }),
        (any::<u16>(), num(), num()).prop_map(|(slot, home, seq)| Damage::NvTag { slot, home, seq }),
        (
            0u8..16,
            num(),
            num(),
            prop_oneof![0u32..4, any::<u32>()],
            any::<bool>(),
            proptest::collection::vec(prop_oneof![0u32..512, any::<u32>()], 1..=8)
        )
            .prop_map(|(near, seq, order, index, commit, addrs)| Damage::Slice {
                near,
                seq,
                order,
                index,
                commit,
                addrs
            }),
    ]
}

/// A protocol's recorded durable images: the layout, its log format and images at several
/// crash points (the first with an empty log, the last after the run).
struct Images {
    format: LogFormat,
    layout: Layout,
    images: Vec<Vec<u8>>,
}

fn images(p: ProtocolKind) -> &'static Images {
    static ALL: OnceLock<Vec<(ProtocolKind, Images)>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        ProtocolKind::ALL
            .iter()
            .filter(|p| p.log_format().is_some())
            .map(|&p| {
                let sets: Vec<String> =
                    ["workload.sps.entries=4096", "log.size_bytes=65536"].iter().map(|s| s.to_string()).collect();
                let cfg = Config::build(None, &sets).unwrap();
                let run = RunSpec {
                    cfg,
                    workload: WorkloadKind::Sps,
                    protocol: p,
                    txs: 400,
                    warmup_txs: 0,
                    seed: 5,
                    abort_rate: 0.1,
                    bug: None,
                    record: true,
                    tape: false,
                    prefault: false,
                };
                let rec = execute(&run).unwrap().recorded.unwrap();
                let w = &rec.record.durable.writes;
                let cycles = (0..8).map(|i| if i == 0 { Cycle::ZERO } else { w[(w.len() - 1) * i / 7].durable });
                let len = rec.layout.total_bytes() as usize;
                let images = cycles.map(|t| rec.record.durable.image_at(&rec.initial[..len], t)).collect();
                (p, Images { format: p.log_format().unwrap(), layout: rec.layout, images })
            })
            .collect()
    });
    &all.iter().find(|(q, _)| *q == p).expect("a logging protocol").1
}

/// Apply `d` to `img` (a durable image of `layout`, whose head decoded as `head` before any
/// damage).
fn apply_damage(img: &mut [u8], layout: &Layout, head: LogHead, d: &Damage) {
    let log0 = layout.log_block0().0;
    let first = log0;
    let blocks = layout.total_bytes() / 64 - first;
    let val = |n: Num| match n {
        Num::Abs(v) => v,
        Num::Start(d) => head.start.wrapping_add(d as i64 as u64),
        Num::Seq(d) => head.start_seq.wrapping_add(d as i64 as u64),
    };
    let cap = layout.log_blocks() - 1;
    let groups = cap / GROUP_BLOCKS;
    // The log block `near` positions after the start (H-WAL's and the groups' unit is a block).
    let log_block = |near: u64| BlockId(log0 + 1 + (head.start.wrapping_add(near)) % cap);
    let group = |near: u64| log0 + 1 + GROUP_BLOCKS * (head.start.wrapping_add(near) % groups);
    let put = |img: &mut [u8], b: BlockId, data: &[u8]| img[b.range()][..data.len()].copy_from_slice(data);
    match d {
        Damage::Flip { at, bit } => {
            let byte = first * 64 + ((*at as u64 * blocks * 64) >> 32);
            img[byte as usize] ^= 1 << (bit % 8);
        }
        Damage::Zero { at } => put(img, BlockId(first + ((*at as u64 * blocks) >> 16)), &[0; 64]),
        Damage::Garbage { at, bytes } => put(img, BlockId(first + ((*at as u64 * blocks) >> 16)), bytes),
        Damage::Field { near, word, value } => {
            let b = if *near == 0 { BlockId(log0) } else { log_block(*near as u64 - 1) };
            let o = b.range().start + 8 * *word as usize;
            img[o..o + 8].copy_from_slice(&val(*value).to_le_bytes());
        }
        Damage::Head { start, seq } => {
            let h = LogHead { format: head.format, start: val(*start), start_seq: val(*seq) };
            put(img, BlockId(log0), &h.encode());
        }
        Damage::Desc { near, seq, addrs } => {
            put(img, log_block(*near as u64), &Descriptor { seq: val(*seq), addrs: addrs.clone() }.encode())
        }
        Damage::Commit { near, seq, blocks } => {
            put(img, log_block(*near as u64), &CommitRecord { seq: val(*seq), blocks: *blocks, order: 0 }.encode())
        }
        Damage::Entry { near, seq, addr, len, kind } => {
            let area = layout.log_base + 64;
            let lso = head.start.wrapping_add(8 * *near as u64);
            let h = EntryHeader { seq: val(*seq), addr: val(*addr), len: *len, kind: *kind }.encode();
            for (i, x) in h.iter().enumerate().take(HEADER_BYTES) {
                img[(area + (lso.wrapping_add(i as u64)) % (layout.log_bytes - 64)) as usize] = *x;
            }
        }
        Damage::Meta { near, sid, tags } => {
            let mut m = Meta { sid: val(*sid), tags: [None; DATA_SLOTS] };
            for (t, &(some, addr, tx_cnt, tx_id, pair)) in m.tags.iter_mut().zip(tags) {
                let tx_id = val(tx_id) as u8;
                *t = some.then_some(BlkTag { addr, tx_cnt, tx_id, tid: 0, cid: 0, pair });
            }
            put(img, BlockId(group(*near as u64) + DATA_SLOTS as u64), &m.encode());
        }
        Damage::Pairs { near, slot, pairs } => {
            let ps: Vec<loc::Pair> =
                pairs.iter().map(|&(x, y, n)| loc::Pair { tx: val(x) as u8, ty: val(y) as u8, n }).collect();
            put(img, BlockId(group(*near as u64) + *slot as u64), &loc::encode(&ps));
        }
        Damage::Register { committed, applied } => {
            if layout.nvllc_bytes > 0 {
                let r = Register { committed: val(*committed), applied: val(*applied) };
                put(img, layout.nvllc_block0(), &r.encode());
            }
        }
        Damage::Slice { near, seq, order, index, commit, addrs } => {
            use crate::log::hoop::{encode_data, SliceMeta, COMMIT, SLICE_BLOCKS, WORDS};
            let slices = cap / SLICE_BLOCKS;
            let at = BlockId(log0 + 1 + SLICE_BLOCKS * (head.start.wrapping_add(*near as u64) % slices));
            let data = encode_data(&addrs.iter().map(|&a| a as u64 * 3).collect::<Vec<_>>());
            let mut a = [0u32; WORDS];
            a[..addrs.len()].copy_from_slice(addrs);
            let flags = if *commit { COMMIT } else { 0 };
            let m = SliceMeta {
                seq: val(*seq),
                order: val(*order),
                index: *index,
                count: addrs.len() as u8,
                flags,
                addrs: a,
            };
            put(img, at, &data);
            put(img, BlockId(at.0 + 1), &m.encode(&data));
        }
        Damage::NvTag { slot, home, seq } => {
            let slots = nvllc::slots_in(layout.nvllc_bytes, layout.cores) as u64;
            if slots > 0 {
                let s = (*slot as u64 % slots) as usize;
                let b = BlockId(layout.nvllc_block0().0 + nvllc::tag_block(s));
                put(img, b, &encode_tag(Some((val(*home), val(*seq)))));
            }
        }
    }
}

/// Recover a damaged image: a well-formed plan (checked by [`recover`] itself) whose result
/// recovers again, or a `corrupt log at block N` error with N in the image.
fn recovers_or_reports(format: LogFormat, layout: &Layout, img: &mut [u8]) -> Result<(), TestCaseError> {
    match recover(Some(format), layout, img) {
        Ok(plan) => {
            apply(img, &plan.writes);
            let again = recover(Some(format), layout, img);
            prop_assert!(again.is_ok(), "the recovered image does not recover again: {:?}", again.err());
        }
        Err(e) => {
            let n = e.strip_prefix("corrupt log at block ").and_then(|r| r.split(':').next()?.parse::<u64>().ok());
            prop_assert!(n.is_some_and(|n| n < layout.total_bytes() / 64), "unclean error: {e}");
        }
    }
    Ok(())
}

fn check(p: ProtocolKind, which: usize, ops: &[Damage]) -> Result<(), TestCaseError> {
    let im = images(p);
    let mut img = im.images[which % im.images.len()].clone();
    let head = LogHead::decode(&img[im.layout.log_block0().range()]).expect("an undamaged head");
    for d in ops {
        apply_damage(&mut img, &im.layout, head, d);
    }
    recovers_or_reports(im.format, &im.layout, &mut img)
}

/// The property tests' configuration: `default_cases` cases from a fixed seed, so that the test
/// suite is deterministic; `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override both for longer
/// runs and for replaying a finding (docs/faults.md).
pub(crate) fn config(default_cases: u32) -> ProptestConfig {
    let base = ProptestConfig::default(); // reads PROPTEST_CASES, PROPTEST_RNG_SEED
    let env = |k: &str| std::env::var_os(k).is_some();
    ProptestConfig {
        cases: if env("PROPTEST_CASES") { base.cases } else { default_cases },
        rng_seed: if env("PROPTEST_RNG_SEED") { base.rng_seed } else { proptest::test_runner::RngSeed::Fixed(26) },
        failure_persistence: None,
        ..base
    }
}

fn cases() -> ProptestConfig {
    config(256)
}

macro_rules! damaged_recovery {
    ($name:ident, $p:expr) => {
        proptest! {
            #![proptest_config(cases())]
            #[test]
            fn $name(which in 0usize..8, ops in proptest::collection::vec(damage(), 1..6)) {
                check($p, which, &ops)?;
            }
        }
    };
}

damaged_recovery!(h_wal_recovers_any_damaged_image_or_reports_it, ProtocolKind::HWal);
damaged_recovery!(s_wal_recovers_any_damaged_image_or_reports_it, ProtocolKind::SWal);
damaged_recovery!(ec_wal_recovers_any_damaged_image_or_reports_it, ProtocolKind::EcWal);
damaged_recovery!(loc_wal_recovers_any_damaged_image_or_reports_it, ProtocolKind::LocWal);
damaged_recovery!(kiln_recovers_any_damaged_image_or_reports_it, ProtocolKind::Kiln);
damaged_recovery!(loc_kiln_recovers_any_damaged_image_or_reports_it, ProtocolKind::LocKiln);
damaged_recovery!(proteus_recovers_any_damaged_image_or_reports_it, ProtocolKind::Proteus);
damaged_recovery!(atom_recovers_any_damaged_image_or_reports_it, ProtocolKind::Atom);
damaged_recovery!(hoop_recovers_any_damaged_image_or_reports_it, ProtocolKind::Hoop);
damaged_recovery!(s_undo_recovers_any_damaged_image_or_reports_it, ProtocolKind::SUndo);

/// Regressions found by the properties above under overflow checks (`cargo test` without
/// `--release`): a head near the end of the number space made the group scan (`start +
/// groups`), S-WAL's byte positions and Kiln's next `start_seq` (`committed + 1`) overflow.
/// Such a head or register is now a clean error (a register there also made the head that
/// recovery writes one that the next recovery refuses).
#[test]
fn a_head_or_register_at_the_end_of_the_number_space_is_reported_not_overflowed() {
    for &p in ProtocolKind::ALL.iter().filter(|p| p.log_format().is_some()) {
        let im = images(p);
        let head = LogHead::decode(&im.images[3][im.layout.log_block0().range()]).unwrap();
        for (start, seq) in [(Num::Abs(u64::MAX - 3), Num::Start(0)), (Num::Start(0), Num::Abs(u64::MAX))] {
            let mut img = im.images[3].clone();
            apply_damage(
                &mut img,
                &im.layout,
                head,
                &Damage::Head { start, seq: if p == ProtocolKind::EcWal { Num::Seq(0) } else { seq } },
            );
            let r = recover(Some(im.format), &im.layout, &img);
            if p == ProtocolKind::EcWal && matches!(start, Num::Start(0)) {
                continue; // EC-WAL does not use start_seq
            }
            let e = r.expect_err("a head at the end of the number space");
            assert!(e.starts_with(&format!("corrupt log at block {}:", im.layout.log_block0().0)), "{p:?}: {e}");
        }
        if im.layout.nvllc_bytes > 0 {
            let mut img = im.images[3].clone();
            let d = Damage::Register { committed: Num::Abs(u64::MAX), applied: Num::Abs(0) };
            apply_damage(&mut img, &im.layout, head, &d);
            let e = recover(Some(im.format), &im.layout, &img).expect_err("a register at the end of the space");
            assert!(e.starts_with(&format!("corrupt log at block {}:", im.layout.nvllc_block0().0)), "{p:?}: {e}");
        }
    }
}

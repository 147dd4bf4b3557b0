//! Unit tests of the journal manager, driven the way SQLite drives it (no SQLite here):
//! header with a zero magic, records, header with the magic (hot), delete.

use super::alloc::{FState, Journal};
use super::format::{self, flag, STREAM_HDR};
use super::media::{Media, Snapshot, Timing};
use super::policy::Policy;
use crate::pcm::PcmConfig;

const MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];

fn world(config: &str, frames: u64) -> (Media, Journal) {
    let mut m = Media::new(&PcmConfig::default(), frames, Timing::default());
    Journal::format(&mut m);
    (m, Journal::new(Policy::parse(config).unwrap(), frames as usize))
}

fn header(magic: bool, nrec: u32, nonce: u32) -> [u8; STREAM_HDR] {
    let mut h = [0u8; STREAM_HDR];
    if magic {
        h[..8].copy_from_slice(&MAGIC);
    }
    h[8..12].copy_from_slice(&nrec.to_be_bytes());
    h[12..16].copy_from_slice(&nonce.to_be_bytes());
    h[24..28].copy_from_slice(&1024u32.to_be_bytes());
    h
}

/// Journal the pages (pgno, fill byte) of database `db`; `end`: delete the journal after.
fn journal(m: &mut Media, j: &mut Journal, db: &str, pages: &[(u32, u8)], end: bool) -> usize {
    let s = j.slot_for(db).unwrap();
    j.start(m, s, &header(false, 0, 7)).unwrap();
    for (k, &(pg, fill)) in pages.iter().enumerate() {
        j.record_pgno(m, s, k, pg).unwrap();
        let mut page = vec![fill; 1024];
        page[0] = k as u8;
        j.record_data(m, s, k, &page).unwrap();
        j.record_cksum(m, s, k, 1000 + pg).unwrap();
    }
    j.update_header(m, s, 0, &header(true, pages.len() as u32, 7)[..12]).unwrap();
    assert!(j.slots[s].hot);
    if end {
        j.end(m, s).unwrap();
        assert!(!j.slots[s].hot);
    }
    s
}

fn ptr_of(j: &Journal, s: usize, pg: u32) -> u16 {
    j.slots[s].descs.iter().find(|d| d.pgno == pg && d.ptr != 0).map(|d| d.ptr).unwrap_or(0)
}

#[test]
fn descriptor_states_are_active_then_reuse_under_ru_and_rr_deletes_through_the_presence_bits() {
    let (mut m, mut j) = world("RU-S2X", 8);
    let s = journal(&mut m, &mut j, "a", &[(5, 1), (9, 2)], false);
    let d = j.slots[s].descs[0];
    assert!(flag::get(d.v, true) && d.ptr != 0, "active: V set, PTR set");
    assert_eq!(j.frames[format::split_ptr(d.ptr).0].state, FState::Active);
    j.end(&mut m, s).unwrap();
    let d = j.slots[s].descs[0];
    assert!(!flag::get(d.v, true) && d.ptr != 0, "reuse: V clear, PTR kept");
    assert_eq!(j.frames[format::split_ptr(d.ptr).0].state, FState::Reuse);
    assert_eq!(j.frames[j.slots[s].frame].state, FState::Reuse);
    j.check(&m).unwrap();

    for config in ["RR-S2X", "RR"] {
        let (mut m, mut j) = world(config, 8);
        let s = journal(&mut m, &mut j, "a", &[(5, 1)], false);
        let (h, d) = (j.slots[s].frame, format::desc_addr(j.slots[s].frame, 0) as usize);
        let slot = m.bytes[format::slot_addr(s) as usize..][..64].to_vec();
        let desc = m.bytes[d..d + 16].to_vec();
        j.end(&mut m, s).unwrap();
        assert!(j.frames[1..].iter().all(|f| f.state == FState::Invalid), "{config}: every frame free");
        assert_eq!(m.bytes[format::slot_addr(s) as usize..][..64], slot[..], "{config}: slot not written");
        assert_eq!(m.bytes[d..d + 16], desc[..], "{config}: descriptor (its V) not written");
        let presence = u64::from_le_bytes(m.bytes[64..72].try_into().unwrap());
        assert_eq!(presence, 0, "{config}: the presence bits say it (in DRAM only with S2)");
        j.check(&m).unwrap();
        journal(&mut m, &mut j, "a", &[(5, 1)], true);
        assert_ne!(j.slots[s].frame, h, "{config}: the next journal takes the next frame in rotation");
        j.check(&m).unwrap();
    }
}

#[test]
fn ru_writes_a_page_again_into_its_old_portion_so_a_small_change_programs_few_cells() {
    let mut cost = Vec::new();
    for config in ["RU-S2X", "RR-S2X"] {
        let (mut m, mut j) = world(config, 8);
        let s = journal(&mut m, &mut j, "a", &[(5, 0x11)], true);
        let first = ptr_of(&j, s, 5);
        let before = m.pcm.wear.total_bit_updates;
        let s = journal(&mut m, &mut j, "a", &[(5, 0x11)], true);
        if config == "RU-S2X" {
            assert_eq!(ptr_of(&j, s, 5), first, "same portion");
            assert_eq!(j.stats.reused_records, 1);
        }
        cost.push(m.pcm.wear.total_bit_updates - before);
    }
    // RR writes the page (0x11 in 1023 bytes: 2 bits each, FNW keeps them) over a fresh
    // frame's zeros; RU only the metadata (mostly the header copy's nonce, generation and
    // checksum, written twice).
    assert!(cost[1] > 2 * 1023, "{cost:?}");
    assert!(cost[0] < 150, "{cost:?}");
}

#[test]
fn a_frame_at_its_per_frame_reuse_limit_is_copied_to_a_fresh_frame_with_its_contents() {
    let (mut m, mut j) = world("RU2F-S2X", 10);
    let s = journal(&mut m, &mut j, "a", &[(5, 0x33), (6, 0x44)], true);
    let p0 = ptr_of(&j, s, 5);
    journal(&mut m, &mut j, "a", &[(5, 0x33)], true);
    assert_eq!(ptr_of(&j, s, 5), p0, "second use: reused in place");
    assert_eq!(j.frames[format::split_ptr(p0).0].uses, 2);
    let old6 = m.bytes[format::portion_addr(ptr_of(&j, s, 6)) as usize + 1];
    journal(&mut m, &mut j, "a", &[(5, 0x33)], true);
    let p1 = ptr_of(&j, s, 5);
    assert_ne!(format::split_ptr(p1).0, format::split_ptr(p0).0, "third use: migrated");
    assert_eq!(format::split_ptr(p1).1, format::split_ptr(p0).1, "same portion index");
    assert_eq!(j.stats.migrations, 2, "the data frame, and the header frame (limit n x m = 2)");
    assert_eq!(j.frames[format::split_ptr(p0).0].state, FState::Invalid);
    let p6 = ptr_of(&j, s, 6);
    assert_eq!(format::split_ptr(p6).0, format::split_ptr(p1).0, "page 6 moved along");
    assert_eq!(m.bytes[format::portion_addr(p6) as usize + 1], old6, "its old image copied");
    j.check(&m).unwrap();
}

#[test]
fn a_portion_at_its_reuse_limit_moves_its_page_alone() {
    for config in ["RU2-S2X", "RU2"] {
        let (mut m, mut j) = world(config, 10);
        let s = journal(&mut m, &mut j, "a", &[(5, 0x33), (6, 0x44)], true);
        let (p5, p6) = (ptr_of(&j, s, 5), ptr_of(&j, s, 6));
        journal(&mut m, &mut j, "a", &[(5, 0x33)], true);
        assert_eq!(ptr_of(&j, s, 5), p5, "{config}: second use: reused in place");
        let (f, q) = format::split_ptr(p5);
        assert_eq!(j.frames[f].puses[q], 2);
        journal(&mut m, &mut j, "a", &[(5, 0x33)], true);
        let p1 = ptr_of(&j, s, 5);
        assert_ne!(p1, p5, "{config}: third use: the page moved");
        assert_eq!(format::split_ptr(p1).0, f, "{config}: into a free portion of the same frame");
        assert_eq!(ptr_of(&j, s, 6), p6, "{config}: page 6 stays");
        assert_eq!(j.stats.moved_at_portion_limit, 1, "{config}");
        assert_eq!(j.stats.migrations, 1, "{config}: the header frame only (limit n x m = 2)");
        assert_eq!(j.frames[f].used >> q & 1, 0, "{config}: the old portion is free");
        journal(&mut m, &mut j, "a", &[(7, 0x55)], true);
        assert_ne!(ptr_of(&j, s, 7), p5, "{config}: a portion at its limit is not handed out again");
        j.check(&m).unwrap();
        if !j.pol.s2 {
            let a = format::portion_count_addr(f, q) as usize;
            assert_eq!(u16::from_le_bytes([m.bytes[a], m.bytes[a + 1]]), 2, "{config}: counter in PCM");
        }
    }
}

#[test]
fn a_new_page_goes_into_a_free_portion_of_its_databases_reuse_state_frame() {
    let (mut m, mut j) = world("RU-S2X", 10);
    let s = journal(&mut m, &mut j, "a", &[(5, 1)], true);
    let (f, q) = format::split_ptr(ptr_of(&j, s, 5));
    assert_eq!(j.frames[f].state, FState::Reuse);
    journal(&mut m, &mut j, "a", &[(9, 2), (10, 3)], true);
    assert_eq!(format::split_ptr(ptr_of(&j, s, 9)), (f, q + 1), "next fit in the reuse-state frame");
    assert_eq!(format::split_ptr(ptr_of(&j, s, 10)), (f, q + 2));
    assert_eq!((j.stats.placed_reuse_frame, j.stats.placed_active_frame, j.stats.placed_fresh_frame), (1, 1, 1));
    let t = journal(&mut m, &mut j, "b", &[(9, 2)], true);
    assert_ne!(format::split_ptr(ptr_of(&j, t, 9)).0, f, "another database never takes it");
    j.check(&m).unwrap();
}

#[test]
fn a_frame_freed_by_gc_keeps_its_associations_until_another_use_takes_it() {
    // 1 manager + 5 frames: a and b leave a header and a data frame each in reuse.
    let (mut m, mut j) = world("RU-S2X", 6);
    let s = journal(&mut m, &mut j, "a", &[(5, 1)], true);
    let pa = ptr_of(&j, s, 5);
    journal(&mut m, &mut j, "b", &[(5, 1)], true);
    journal(&mut m, &mut j, "c", &[(5, 1)], true);
    assert_eq!(j.stats.gcs, 1, "c needed frames");
    assert_eq!(j.stats.associations_dropped, 1, "c took one free frame, then one freed by GC");
    j.check(&m).unwrap();
    let (fa, _) = format::split_ptr(pa);
    assert!(j.frames[fa].stale() || j.frames[fa].state == FState::Reuse || ptr_of(&j, s, 5) == 0);
    let kept = j.slots[s].valid && ptr_of(&j, s, 5) == pa;
    journal(&mut m, &mut j, "a", &[(5, 1)], true);
    if kept {
        assert_eq!(ptr_of(&j, s, 5), pa, "the kept association is used again");
        assert!(j.stats.reclaimed_after_gc >= 1, "{:?}", j.stats);
    }
    j.check(&m).unwrap();
}

#[test]
fn gc_frees_every_reuse_frame_and_inv25_a_quarter_of_them() {
    for (config, freed) in [("RU-S2X", 8), ("RU-S2X-INV25", 2)] {
        // 1 manager + 9 frames: four databases leave a header and a data frame each in reuse.
        let (mut m, mut j) = world(config, 10);
        for db in ["a", "b", "c", "d"] {
            journal(&mut m, &mut j, db, &[(2, 1)], true);
        }
        assert_eq!(j.frames.iter().filter(|f| f.state == FState::Reuse).count(), 8);
        assert_eq!(j.stats.gcs, 0);
        journal(&mut m, &mut j, "e", &[(2, 1)], true);
        assert_eq!(j.stats.gcs, 1, "{config}");
        assert_eq!(j.stats.frames_freed_by_gc, freed, "{config}");
        j.check(&m).unwrap();
    }
}

#[test]
fn wh4_writes_the_header_in_four_copies_in_turn() {
    let (mut m, mut j) = world("RU-S2X-WH4", 6);
    let mut copies = Vec::new();
    for _ in 0..5 {
        let s = journal(&mut m, &mut j, "a", &[(2, 1)], true);
        copies.push((j.slots[s].copy, j.slots[s].hdr.generation));
    }
    assert_eq!(copies, vec![(0, 1), (1, 2), (2, 3), (3, 4), (0, 5)]);
}

#[test]
fn rebuild_recovers_the_dram_metadata_from_pcm() {
    for config in ["RU2-WH4", "RU2-S2X-WH4", "RR-S2X"] {
        let (mut m, mut j) = world(config, 12);
        for i in 0..6u8 {
            journal(&mut m, &mut j, ["a", "b"][i as usize % 2], &[(2, i), (3 + i as u32 % 3, 9)], true);
        }
        let s = journal(&mut m, &mut j, "a", &[(2, 7), (4, 7)], false);
        let snap = Snapshot { pcm: m.bytes.clone(), dbs: Vec::new() };
        let mut m2 = Media::from_snapshot(&PcmConfig::default(), &snap, Timing::default());
        let r = Journal::rebuild(&mut m2, j.pol.clone()).unwrap();
        assert!(m2.pcm_ns > 0, "the rebuild reads PCM");
        r.check(&m2).unwrap();
        let s2 = j.pol.s2;
        for (f, (a, b)) in j.frames.iter().zip(&r.frames).enumerate().skip(1) {
            if a.state == FState::Invalid && !a.stale() {
                assert_eq!(b.state, FState::Invalid, "{config} frame {f}");
                continue;
            }
            if a.stale() {
                assert!(b.state == FState::Reuse || b.stale(), "{config} frame {f}");
                assert_eq!((b.owner, b.used), (a.owner, a.used), "{config} frame {f}");
                continue;
            }
            assert_eq!(
                (a.state, a.header, a.owner, a.used),
                (b.state, b.header, b.owner, b.used),
                "{config} frame {f}"
            );
            if !s2 && (a.header || j.pol.frame_limit().is_some()) {
                assert_eq!(a.uses, b.uses, "{config} frame {f}: reuse counter kept in PCM");
            }
            if !s2 && !a.header && j.pol.frame_limit().is_none() {
                assert_eq!(a.puses, b.puses, "{config} frame {f}: portion counters kept in PCM");
            }
        }
        let (a, b) = (&j.slots[s], &r.slots[s]);
        assert_eq!(
            (a.valid, a.frame, a.hot, &a.descs, &a.records, a.hdr, a.copy),
            (b.valid, b.frame, b.hot, &b.descs, &b.records, b.hdr, b.copy),
            "{config}"
        );
    }
}

/// A random sequence of journals over five databases in a 7-frame area (so GC and migration
/// run often), checked after every journal against a model kept in std collections: the
/// records the journal holds (page number, image, checksum), read back through the PCM
/// structures, and, at random points, through a rebuild from the PCM image alone.
#[test]
fn random_journals_read_back_as_written_and_rebuild_at_random_points() {
    use crate::rng::Rng;
    use std::collections::BTreeMap;
    let seed = 20_261_121;
    println!("seed {seed}");
    for config in ["RR", "RU-S2X", "RU3-S2X-WH2-INV50", "RU2", "RU2F", "RU5F-S2-WH4", "RU2-S2-WH4"] {
        let mut rng = Rng::new(seed);
        let (mut m, mut j) = world(config, 7);
        let mut images: BTreeMap<(usize, u32), Vec<u8>> = BTreeMap::new();
        for step in 0..150 {
            let db = ["a", "b", "c", "d", "e"][rng.below(5) as usize];
            let s = j.slot_for(db).unwrap();
            let mut pages: Vec<u32> = Vec::new();
            while pages.len() < 1 + rng.below(6) as usize {
                let span = 1 + rng.below(100); // skewed: low pages are hot
                let p = 1 + rng.below(span) as u32;
                if !pages.contains(&p) {
                    pages.push(p);
                }
            }
            j.start(&mut m, s, &header(false, 0, step)).unwrap();
            let mut model: Vec<(u32, Vec<u8>, u32)> = Vec::new();
            for (k, &p) in pages.iter().enumerate() {
                let img = images.entry((s, p)).or_insert_with(|| vec![0u8; 1024]);
                for _ in 0..1 + rng.below(8) {
                    img[rng.below(1024) as usize] = rng.next_u64() as u8;
                }
                let ck = rng.next_u64() as u32;
                j.record_pgno(&mut m, s, k, p).unwrap();
                j.record_data(&mut m, s, k, img).unwrap();
                j.record_cksum(&mut m, s, k, ck).unwrap();
                model.push((p, img.clone(), ck));
            }
            j.update_header(&mut m, s, 0, &header(true, pages.len() as u32, step)[..12]).unwrap();
            let read_back = |j: &Journal, m: &Media| -> Vec<(u32, Vec<u8>, u32)> {
                j.slots[s]
                    .records
                    .iter()
                    .map(|&d| {
                        let ds = j.slots[s].descs[d as usize];
                        let a = format::portion_addr(ds.ptr) as usize;
                        (ds.pgno, m.bytes[a..a + 1024].to_vec(), ds.cksum)
                    })
                    .collect()
            };
            assert_eq!(read_back(&j, &m), model, "{config} step {step}: live journal");
            if rng.chance(0.25) {
                let snap = Snapshot { pcm: m.bytes.clone(), dbs: Vec::new() };
                let mut m2 = Media::from_snapshot(&PcmConfig::default(), &snap, Timing::default());
                let r = Journal::rebuild(&mut m2, j.pol.clone()).unwrap();
                r.check(&m2).unwrap_or_else(|e| panic!("{config} step {step}: {e}"));
                assert!(r.slots[s].hot);
                assert_eq!(read_back(&r, &m2), model, "{config} step {step}: rebuilt journal");
            }
            j.end(&mut m, s).unwrap();
            j.check(&m).unwrap_or_else(|e| panic!("{config} step {step}: {e}"));
        }
        if config != "RR" {
            assert!(j.stats.gcs > 0 && j.stats.reused_records > 0, "{config}: {:?}", j.stats);
        }
        if j.pol.frame_limit().is_some() {
            assert!(j.stats.migrations > 0, "{config}: {:?}", j.stats);
        }
        if j.pol.portion_limit().is_some() {
            assert!(j.stats.moved_at_portion_limit > 0, "{config}: {:?}", j.stats);
        }
        if j.pol.reuse {
            assert!(j.stats.placed_reuse_frame > 0 && j.stats.reclaimed_after_gc > 0, "{config}: {:?}", j.stats);
        }
    }
}

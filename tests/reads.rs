//! The configuration a run never read (`runner::RunOutput::unread`): what a run may read of the
//! persistence domain (`machine::DOMAIN_READS`) and the `[loc]` keys (`runner::LOC_READS`). A
//! run that never read one gives the same figures whatever its value, which is what lets
//! `reproduce` run such points once; the `[ordering]` knobs have their own test in
//! tests/ordering.rs. Here every protocol runs over a grid of those keys, the runs are grouped
//! by the words they read, and each group must give one set of figures; the check is shown
//! failing when a read is dropped from the record.

mod common;

use common::*;
use locsim::protocol::ProtocolKind;
use locsim::runner::{execute, tracked_words};
use locsim::workload::WorkloadKind;
use std::collections::BTreeMap;

/// The grid: every persistence domain (the persist buffers at two sizes under `bbb`), each with
/// two speculation degrees and both log-head forms.
fn grid() -> Vec<Vec<String>> {
    let domains: [&[&str]; 5] = [
        &["machine.persist_domain=memory"],
        &["machine.persist_domain=adr"],
        &["machine.persist_domain=eadr"],
        &["machine.persist_domain=bbb", "machine.bbpb_entries=2"],
        &["machine.persist_domain=bbb", "machine.bbpb_entries=32"],
    ];
    let mut out = Vec::new();
    for d in domains {
        for sd in ["loc.speculation_degree=2", "loc.speculation_degree=16"] {
            for head in ["loc.two_slot_head=false", "loc.two_slot_head=true"] {
                out.push(d.iter().copied().chain([sd, head]).map(String::from).collect());
            }
        }
    }
    out
}

/// A run of `w` under `p` with `sets`: its figures (JSON without host timings and provenance)
/// and the tracked words it read, the others as `*` (less those in `forget`, a lost record).
fn run(w: WorkloadKind, p: ProtocolKind, sets: &[String], forget: &[&str]) -> (serde_json::Value, String) {
    let sets: Vec<&str> = sets.iter().map(String::as_str).chain(["workload.btree.key_space=16384"]).collect();
    let mut s = spec(small_cfg(&sets), p, 150, 3, None);
    (s.record, s.workload) = (false, w);
    let out = execute(&s).unwrap_or_else(|e| panic!("{w:?} {p:?} {sets:?}: {e}"));
    let mut v = serde_json::to_value(&out.result).unwrap();
    for k in ["host_seconds", "sim_mem_accesses_per_second", "config_hash", "git_rev"] {
        v.as_object_mut().unwrap().remove(k);
    }
    let unread = |k: &str| out.unread.iter().any(|u| u == k) || forget.contains(&k);
    let words =
        tracked_words(&mut s.cfg)
            .into_iter()
            .map(|(k, v)| if unread(&k) { format!("{k}=*") } else { format!("{k}={v}") });
    (v, words.collect::<Vec<_>>().join(" "))
}

/// Group the grid's runs by the words they read: `Err` names a group whose runs differ;
/// `Ok` counts the runs that another of their group answers.
fn groups_agree(w: WorkloadKind, p: ProtocolKind, forget: &[&str]) -> Result<usize, String> {
    let mut groups: BTreeMap<String, (serde_json::Value, Vec<String>)> = BTreeMap::new();
    let mut answered = 0;
    for sets in grid() {
        let (v, read) = run(w, p, &sets, forget);
        match groups.get(&read) {
            Some((first, at)) if *first != v => {
                return Err(format!("{w:?} {p:?}: {sets:?} and {at:?} read alike ({read}) but their figures differ"));
            }
            Some(_) => answered += 1,
            None => {
                groups.insert(read, (v, sets));
            }
        }
    }
    Ok(answered)
}

#[test]
fn a_run_gives_the_same_figures_whatever_the_domain_and_loc_keys_it_never_read() {
    use ProtocolKind::*;
    for w in [WorkloadKind::Sps, WorkloadKind::BTree] {
        for &p in ProtocolKind::ALL {
            let answered = groups_agree(w, p, &[]).unwrap();
            // What each protocol reads decides how many of the grid's 20 runs others answer.
            let expected = match p {
                // The domain in full (the buffers' size only under `bbb`), no `[loc]` key.
                Baseline | SWal | SUndo => 20 - 5,
                // The queue's cover only (memory or not): 2 classes; no `[loc]` key.
                // (Plain Kiln's window is one transaction whatever the degree.)
                HWal | EcWal | Kiln | Proteus | Atom | Hoop => 20 - 2,
                // ... and the speculation degree.
                LocKiln => 20 - 4,
                // ... and the log head's form.
                LocWal => 20 - 8,
                #[allow(unreachable_patterns)]
                _ => continue,
            };
            assert_eq!(answered, expected, "{w:?} {p:?}");
        }
    }
}

#[test]
fn a_read_left_out_of_the_record_is_caught() {
    use ProtocolKind::*;
    const DOMAIN: &[&str] = &["machine.persist_domain:stores", "machine.persist_domain", "machine.bbpb_entries"];
    for (p, keys) in [
        // `adr`, `eadr` and `bbb` would read alike.
        (SWal, DOMAIN),
        // `eadr` and `bbb` would read alike.
        (Baseline, &DOMAIN[1..]),
        (LocWal, &["loc.speculation_degree"][..]),
        (LocKiln, &["loc.speculation_degree"][..]),
    ] {
        let e = groups_agree(WorkloadKind::Sps, p, keys).unwrap_err();
        assert!(e.contains("read alike") && keys.iter().all(|k| e.contains(&format!("{k}=*"))), "{p:?} {keys:?}: {e}");
    }
}

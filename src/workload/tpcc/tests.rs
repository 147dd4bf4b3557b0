use super::*;

/// A small database: 30 customers per district, 1,000 items, room for 10,000 more orders and
/// payments per warehouse (the seeded runs below stay under it: nothing rolls back for want of
/// room).
fn small(warehouses: u64) -> TpccConfig {
    let c = TpccConfig {
        warehouses: warehouses.to_string(),
        scale: 100,
        orders_per_warehouse: 10_000,
        ..Default::default()
    };
    c.validate().unwrap();
    c
}

/// Populate, then `txs` transactions from seed `seed`: the workload and its data area.
fn ran(cfg: &TpccConfig, txs: u64, seed: u64) -> (Tpcc, Vec<u8>) {
    let mut t = Tpcc::new(cfg);
    let mut data = vec![0u8; t.data_bytes() as usize];
    t.populate(&mut data);
    t.verify(&data).unwrap();
    let mut pm = Native::new(data);
    let mut rng = Rng::new(seed);
    for _ in 0..txs {
        t.run_tx(&mut pm, &mut rng, false);
    }
    (t, pm.mem)
}

#[test]
fn nurand_stays_in_its_range_and_reaches_both_ends() {
    let mut rng = Rng::new(5);
    for (a, x, y, c) in
        [(255, 0, 999, C_LAST_RUN), (1023, 1, 3000, C_ID), (8191, 1, 100_000, C_OL_I_ID), (1023, 1, 30, C_ID)]
    {
        let (mut lo, mut hi) = (u64::MAX, 0);
        for _ in 0..1_000_000 {
            let v = nurand(&mut rng, a, x, y, c);
            assert!((x..=y).contains(&v), "NURand({a}, {x}, {y}) = {v}");
            (lo, hi) = (lo.min(v), hi.max(v));
        }
        assert_eq!((lo, hi), (x, y), "NURand({a}, {x}, {y}) over 1,000,000 draws");
    }
    // Non-uniform: with A = 255 over 0..=999 the most frequent value is drawn far more often
    // than the uniform 1/1000 (the OR of two draws skews toward set bits).
    let mut counts = [0u32; 1000];
    for _ in 0..100_000 {
        counts[nurand(&mut rng, 255, 0, 999, C_LAST_RUN) as usize] += 1;
    }
    assert!(*counts.iter().max().unwrap() > 400, "max count {}", counts.iter().max().unwrap());
}

#[test]
fn last_names_are_the_syllables_of_their_digits() {
    assert_eq!(&last_name(371)[..12], b"PRICALLYOUGH");
    assert_eq!(&last_name(0)[..9], b"BARBARBAR");
    assert_eq!(&last_name(999)[..12], b"EINGEINGEING");
}

#[test]
fn a_seeded_run_has_the_specified_mix_and_rollbacks_and_keeps_the_conditions() {
    let (t, data) = ran(&small(1), 20_000, 11);
    let total: u64 = t.mix.iter().sum::<u64>() + t.rolled_back.iter().sum::<u64>();
    assert_eq!(total, 20_000);
    let share = |k: usize| (t.mix[k] + t.rolled_back[k]) as f64 / total as f64;
    for (k, want) in [(0, 0.45), (1, 0.43), (2, 0.04), (3, 0.04), (4, 0.04)] {
        assert!((share(k) - want).abs() < 0.012, "{}: {:.4}, expected {want}", TX_NAMES[k], share(k));
    }
    // 1 % of New-Orders roll back (an unused item); nothing else does.
    let rb = t.rolled_back[0] as f64 / (t.mix[0] + t.rolled_back[0]) as f64;
    assert!((0.004..0.02).contains(&rb), "New-Order rollbacks {rb:.4}");
    assert_eq!(t.rolled_back[1..], [0, 0, 0, 0]);
    t.verify(&data).unwrap();
}

#[test]
fn several_warehouses_with_remote_items_and_customers_keep_the_conditions() {
    let (t, data) = ran(&small(3), 6000, 2);
    t.verify(&data).unwrap();
    // Remote supply and remote payments happened: some stock row of a warehouse has
    // S_REMOTE_CNT > 0.
    let remote: u64 = (0..3)
        .flat_map(|w| (0..t.items).map(move |s| (w, s)))
        .map(|(w, s)| rd(&data, t.row(w, T::S, s).0 + S_YTD + 6, 2))
        .sum();
    assert!(remote > 0);
}

fn expect_err(t: &Tpcc, data: &[u8], needle: &str) {
    let e = t.verify(data).expect_err(needle);
    assert!(e.contains(needle), "{e}");
}

#[test]
fn the_verifier_catches_each_consistency_condition_broken() {
    let (mut t, data) = ran(&small(2), 3000, 4);
    t.verify(&data).unwrap();
    // 1: W_YTD off by one cent.
    let mut bad = data.clone();
    let a = t.row(1, T::W, 0).0 + W_YTD;
    bad[a as usize] ^= 1;
    expect_err(&t, &bad, "warehouse 2: consistency condition 1");
    // 2: D_NEXT_O_ID moved on.
    let mut bad = data.clone();
    let a = (t.row(0, T::D, 3).0 + D_NEXT_O_ID) as usize;
    bad[a] = bad[a].wrapping_add(1);
    expect_err(&t, &bad, "district 4: consistency condition 2");
    // 3: a NEW-ORDER row from the middle of district 5's deleted (index entry and row).
    let mut pm = Native::new(data.clone());
    let keys: Vec<(u64, u32)> = {
        let at = t.wbase(0) + t.lay.idx[X::No as usize];
        t.trees[X::No as usize].entries_in(&data[at as usize..]).unwrap()
    };
    let mid: Vec<_> = keys.iter().filter(|(k, _)| k >> 32 == 5).collect();
    assert!(mid.len() >= 3);
    let (k, s) = *mid[mid.len() / 2];
    pm.begin();
    let base = t.wbase(0) + t.lay.idx[X::No as usize];
    assert!(t.trees[X::No as usize].delete(&mut Part { pm: &mut pm, base }, k));
    t.free(&mut pm, 0, T::No, s as u64);
    pm.commit();
    expect_err(&t, &pm.mem, "district 5: consistency condition 3");
    // 4: an order's O_OL_CNT one more than its lines.
    let mut bad = data.clone();
    let at = t.wbase(0) + t.lay.idx[X::O as usize];
    let (_, s) = t.trees[X::O as usize].entries_in(&data[at as usize..]).unwrap()[7];
    bad[(t.row(0, T::O, s as u64).0 + O_OL_CNT) as usize] += 1;
    expect_err(&t, &bad, "district 1: consistency condition 4");
    // A dangling index entry: a row freed behind its index's back.
    let mut pm = Native::new(data.clone());
    pm.begin();
    t.free(&mut pm, 0, T::C, 3);
    pm.commit();
    expect_err(&t, &pm.mem, "CUSTOMER: ");
}

#[test]
fn aborts_roll_back_and_the_conditions_hold() {
    let mut t = Tpcc::new(&small(1));
    let mut data = vec![0u8; t.data_bytes() as usize];
    t.populate(&mut data);
    let mut pm = Native::new(data.clone());
    let mut rng = Rng::new(9);
    for _ in 0..200 {
        t.run_tx(&mut pm, &mut rng, true);
    }
    assert!(pm.mem == data, "every transaction rolled back");
}

#[test]
fn bad_settings_are_one_line_naming_the_allowed_values() {
    let bad = |f: fn(&mut TpccConfig)| {
        let mut c = TpccConfig::default();
        f(&mut c);
        c.validate().unwrap_err()
    };
    assert_eq!(bad(|c| c.warehouses = "0".into()), "workload.tpcc.warehouses = 0: allowed cores or 1..=64");
    assert_eq!(bad(|c| c.warehouses = "many".into()), "workload.tpcc.warehouses = many: allowed cores or 1..=64");
    assert_eq!(bad(|c| c.scale = 0), "workload.tpcc.scale = 0: allowed 1..=100");
    let mut c = TpccConfig::default();
    c.resolve(4);
    assert_eq!(c.warehouse_count(), 4);
}

//! `baseline`: no persistence support. Stores go to the cache; dirty lines reach memory only
//! when evicted; commit returns at once. It is the normalisation reference for throughput and
//! makes no durability promise: `crashtest` on it reports violations, by design.

use super::Protocol;
use crate::machine::Machine;
use crate::pmem::Layout;
use crate::types::Addr;

/// What `baseline` is and how it is built (its line in the table of `registry.rs`).
pub static BASELINE: super::Registration<Baseline> = super::Registration {
    desc: super::Descriptor {
        name: "baseline",
        log_format: None,
        stores_persist: true,
        speculates: false,
        bugs: &[],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |_| Baseline,
};

#[derive(Default)]
pub struct Baseline;

impl Protocol for Baseline {
    fn format(&self, _layout: &Layout, _image: &mut [u8]) {}

    fn begin(&mut self, _m: &mut Machine) {}

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, true);
    }

    fn commit(&mut self, m: &mut Machine) {
        m.ack_through(m.txs_committed);
    }

    /// Without log support the program undoes its own stores: it stores the old values again.
    fn abort(&mut self, m: &mut Machine, written: &[(Addr, u32)]) {
        for &(a, len) in written {
            m.access_range(a, len as usize, true);
        }
    }
}

//! The phase barrier of the strict-ordering machine (`ordering.phase_barrier`,
//! docs/ordering.md): what H-WAL and EC-WAL keep between transactions and LOC-WAL between
//! speculation windows. `loc-extended.txt` 2: "one phase cannot be started before the previous
//! phase is complete"; 1: "waiting for the completion of all memory writes within the
//! transaction before a single write for the next transaction can be performed".

use crate::machine::Machine;
use crate::ordering::PhaseBarrier;

/// Armed when a transaction (window) has issued its last write; the next one waits at its
/// first persistent write (`first-write`) or at its begin (`begin`).
#[derive(Default)]
pub struct Barrier {
    armed: bool,
}

impl Barrier {
    /// The transaction (window) has issued every write, truncation included.
    #[inline]
    pub fn arm(&mut self, m: &Machine) {
        self.armed = m.ord.phase_barrier() != PhaseBarrier::None;
    }

    /// The next transaction begins.
    #[inline]
    pub fn at_begin(&mut self, m: &mut Machine) {
        if self.armed && m.ord.phase_barrier() == PhaseBarrier::Begin {
            self.armed = false;
            m.phase_barrier();
        }
    }

    /// The running transaction is about to issue a persistent write.
    #[inline(always)]
    pub fn before_write(&mut self, m: &mut Machine) {
        if self.armed {
            self.armed = false;
            m.phase_barrier();
        }
    }
}

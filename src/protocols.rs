//! The registration table: every protocol locsim models and every log format recovery reads,
//! one line each. It is the only list of either. Each protocol line names its module
//! (`src/protocol/<module>.rs`), the `ProtocolKind` it is, and the [`Registration`] that file
//! declares (what the protocol is and how it is built; a module with two protocols, Kiln and
//! LOC-Kiln, has both on its line); each format line names its code in the log head, its recovery module
//! (`src/recovery/<module>.rs`, whose `recover` reads it) and, for a format whose recovery
//! reads the data area, `reads_data_area`.
//!
//! The table is a macro handed the macro that expands it, so that each module reads the part it
//! owns without naming another module: `src/protocol/mod.rs` declares the protocol modules and
//! defines `ProtocolKind` from the protocol lines, `src/log/head.rs` the `LogFormat` codes and `src/recovery/mod.rs` the
//! recovery dispatch from the format lines. It is declared first in `src/lib.rs`, with
//! `#[macro_use]`, and holds no path of its own: the names in it are resolved where it expands.
//!
//! [`Registration`]: crate::protocol::Registration

macro_rules! registration_table {
    ($expand:ident) => {
        $expand! {
            formats {
                HWal = 1 => wal,
                SWal = 2 => swal reads_data_area,
                Ec = 3 => ec,
                Loc = 4 => loc,
                Kiln = 5 => kiln,
                Proteus = 6 => proteus,
                Atom = 7 => atom,
                Hoop = 8 => hoop reads_data_area,
                SUndo = 9 => sundo,
            }
            protocols {
                baseline { Baseline => BASELINE },
                s_wal { SWal => S_WAL },
                h_wal { HWal => H_WAL },
                ec_wal { EcWal => EC_WAL },
                loc_wal { LocWal => LOC_WAL },
                kiln { Kiln => KILN, LocKiln => LOC_KILN },
                proteus { Proteus => PROTEUS },
                atom { Atom => ATOM },
                hoop { Hoop => HOOP },
                s_undo { SUndo => S_UNDO },
                #[cfg(test)] trivial { #[cfg(test)] Trivial => TRIVIAL },
            }
        }
    };
}

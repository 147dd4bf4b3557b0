//! SQLite's CPU time on the board (docs/journal.md, "SQLite's CPU time"): the ARM instructions
//! SQLite executes per trace command, measured once under qemu-arm on the board's ISA
//! (`scripts/arm_instructions.sh` writes the table `arm_instructions.csv` beside this file), at
//! the Cortex-A9's cycles per instruction and the board's 667 MHz clock (Table I). The
//! host-calibrated figure of the former model stays as the named variant
//! [`CpuTime::HostCalibrated`]; a constant per command (`--cpu-ns-per-command`) overrides both.

use std::sync::OnceLock;

/// Host core cycles per SQLite virtual-machine instruction, measured on the journal traces
/// against in-memory databases (the SQLite work alone, no journal model;
/// `cargo test --release -- --ignored sqlite_host_cycles_per_vm_step --nocapture`, AMD EPYC:
/// 425-707 cycles over the four applications in the least loaded of three runs, rounded to
/// 600; docs/journal.md). The host-calibrated variant ([`CpuTime::HostCalibrated`])
/// takes the board's core to need as many cycles per instruction.
pub const HOST_CYCLES_PER_VM_STEP: u64 = 600;
/// The board's core clock, MHz (Table I).
pub const BOARD_CORE_MHZ: u64 = 667;

/// The table of ARM instructions per command (one row per application, trace and journal mode).
pub const ARM_TABLE: &str = include_str!("arm_instructions.csv");

/// Cycles per ARM instruction of the board's Cortex-A9 on SQLite's integer code, x 1000. An
/// assumption (docs/journal.md gives the reason): one instruction per cycle, half the core's
/// dual-issue peak (Hennessy and Patterson, "Computer Architecture: A Quantitative Approach",
/// 5th ed., section 3.12: the A9 "issues up to two instructions per clock").
pub const A9_CPI_MILLI: u64 = 1_000;

/// Where SQLite's CPU time per command comes from (without `--cpu-ns-per-command`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum CpuTime {
    /// ARM instructions per virtual-machine instruction from the table, x [`A9_CPI_MILLI`] /
    /// [`BOARD_CORE_MHZ`].
    #[default]
    ArmA9,
    /// The host's measured cycles per virtual-machine instruction taken for the board's
    /// ([`super::media::Timing::cpu_ps_per_vm_step`]).
    HostCalibrated,
}

impl CpuTime {
    pub const NAMES: &'static str = "arm-a9, host-calibrated";

    pub fn parse(s: &str) -> Result<CpuTime, String> {
        match s {
            "arm-a9" => Ok(CpuTime::ArmA9),
            "host-calibrated" => Ok(CpuTime::HostCalibrated),
            _ => Err(format!("--cpu-time {s}: allowed {}", CpuTime::NAMES)),
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub app: String,
    pub trace: String,
    /// `journal_mode=DELETE` (true) or `OFF` (the no-journal reference).
    pub journal: bool,
    pub commands: u64,
    pub vm_steps: u64,
    pub arm_instructions: u64,
    pub mean: f64,
    pub p10: u64,
    pub p90: u64,
}

/// Parse the table: `#` comment lines, a header line, then rows.
pub fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let header = lines.next().map(|(_, l)| l);
    if header != Some("app,trace,journal_mode,commands,vm_steps,arm_instructions,mean,p10,p90") {
        return Err(format!("arm_instructions.csv: header {header:?}"));
    }
    for (i, line) in lines {
        let bad = || format!("arm_instructions.csv line {}: '{line}'", i + 1);
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 9 {
            return Err(bad());
        }
        let int = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let journal = match f[2] {
            "delete" => true,
            "off" => false,
            _ => return Err(bad()),
        };
        let row = Row {
            app: f[0].into(),
            trace: f[1].into(),
            journal,
            commands: int(f[3])?,
            vm_steps: int(f[4])?,
            arm_instructions: int(f[5])?,
            mean: f[6].parse().map_err(|_| bad())?,
            p10: int(f[7])?,
            p90: int(f[8])?,
        };
        if row.vm_steps == 0 {
            return Err(bad());
        }
        rows.push(row);
    }
    Ok(rows)
}

/// The checked-in table (parsed once; a test checks that it parses).
pub fn table() -> &'static [Row] {
    static T: OnceLock<Vec<Row>> = OnceLock::new();
    T.get_or_init(|| parse(ARM_TABLE).expect("the checked-in table parses"))
}

/// How a replay's SQLite CPU time is computed: nanoseconds = the commands x `per_command`, or
/// the virtual-machine instructions x `num` / `den`.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuClock {
    per_command: Option<u64>,
    num: u128,
    den: u128,
    /// ARM instructions per virtual-machine instruction (the ARM source only).
    arm_per_vm_step: f64,
    /// What the figure comes from, as `JournalResult::cpu_time_source` reports it.
    pub source: &'static str,
}

impl CpuClock {
    /// The clock of a replay of trace `trace` of application `app` (the labels `journal`
    /// prints; the table's rows are keyed by them) with the journal (`journal`) or without it:
    /// `per_command` ns per command if set, else from `time` (the host-calibrated variant at
    /// `ps_per_vm_step` per virtual-machine instruction). A trace the table has no row for (a
    /// recorded trace, an SQL script) takes the ratio of all rows of its journal mode together.
    pub fn new(
        per_command: Option<u64>,
        time: CpuTime,
        ps_per_vm_step: u64,
        app: &str,
        trace: &str,
        journal: bool,
    ) -> CpuClock {
        if let Some(n) = per_command {
            return CpuClock { per_command: Some(n), num: 0, den: 1, arm_per_vm_step: 0.0, source: "constant" };
        }
        match time {
            CpuTime::HostCalibrated => CpuClock {
                per_command: None,
                num: ps_per_vm_step as u128,
                den: 1000,
                arm_per_vm_step: 0.0,
                source: "host-calibrated",
            },
            CpuTime::ArmA9 => {
                let rows = table();
                let own = rows.iter().find(|r| r.app == app && r.trace == trace && r.journal == journal);
                let (arm, vm, source) = match own {
                    Some(r) => (r.arm_instructions as u128, r.vm_steps as u128, "arm-a9"),
                    None => {
                        let mode = rows.iter().filter(|r| r.journal == journal);
                        let arm = mode.clone().map(|r| r.arm_instructions as u128).sum();
                        (arm, mode.map(|r| r.vm_steps as u128).sum::<u128>().max(1), "arm-a9-pooled")
                    }
                };
                // ns = steps x (arm / vm) instructions x CPI cycles / (MHz cycles per us) x 1000.
                CpuClock {
                    per_command: None,
                    num: arm * A9_CPI_MILLI as u128,
                    den: vm * BOARD_CORE_MHZ as u128,
                    arm_per_vm_step: arm as f64 / vm as f64,
                    source,
                }
            }
        }
    }

    /// SQLite's CPU time, ns, of `commands` commands that executed `steps` virtual-machine
    /// instructions in all.
    pub fn ns(&self, commands: u64, steps: u64) -> u64 {
        match self.per_command {
            Some(n) => commands * n,
            None => (steps as u128 * self.num / self.den) as u64,
        }
    }

    /// ARM instructions per command that `steps` virtual-machine instructions over `commands`
    /// commands stand for (0 unless the source is the ARM table).
    pub fn arm_per_command(&self, commands: u64, steps: u64) -> f64 {
        steps as f64 * self.arm_per_vm_step / commands.max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::super::media::Timing;
    use super::*;

    #[test]
    fn the_table_parses_and_covers_every_application_trace_and_mode() {
        let rows = table();
        for app in ["fb", "tw", "kt", "gm"] {
            for trace in ["1", "2", "3", "4"] {
                for journal in [true, false] {
                    let r = rows.iter().find(|r| r.app == app && r.trace == trace && r.journal == journal);
                    let r = r.unwrap_or_else(|| panic!("no row {app} {trace} {journal}"));
                    assert!(r.p10 as f64 <= r.mean && r.mean <= r.p90 as f64, "{r:?}");
                    let mean = r.arm_instructions as f64 / r.commands as f64;
                    assert!((mean - r.mean).abs() < 0.06, "{r:?}");
                }
            }
        }
    }

    #[test]
    fn a_bad_table_names_its_line() {
        assert!(parse("x\n").unwrap_err().contains("header"));
        let h = "app,trace,journal_mode,commands,vm_steps,arm_instructions,mean,p10,p90\n";
        assert!(parse(&format!("{h}fb,1,sometimes,1,1,1,1,1,1\n")).unwrap_err().contains("line 2"));
        assert!(parse(&format!("# c\n{h}fb,1,off,1,0,1,1,1,1\n")).unwrap_err().contains("line 3"));
        assert_eq!(parse(&format!("{h}fb,1,off,2,10,30,15.0,10,20\n")).unwrap()[0].arm_instructions, 30);
    }

    #[test]
    fn the_arm_clock_gives_the_tables_instructions_at_the_cpi_and_clock() {
        let t = Timing::default();
        let r = table().iter().find(|r| r.app == "tw" && r.trace == "2" && r.journal).expect("row");
        let c = t.cpu_clock("tw", "2", true);
        assert_eq!(c.source, "arm-a9");
        let want = r.arm_instructions as u128 * A9_CPI_MILLI as u128 / BOARD_CORE_MHZ as u128;
        assert_eq!(c.ns(r.commands, r.vm_steps) as u128, want);
        assert!((c.arm_per_command(r.commands, r.vm_steps) - r.mean).abs() < 0.06);
        // No row: the pooled ratio; the constant and the host variant as before.
        assert_eq!(t.cpu_clock("file", "x.trace", true).source, "arm-a9-pooled");
        let fixed = Timing { cpu_ns_per_command: Some(7), ..Timing::default() };
        assert_eq!(fixed.cpu_clock("tw", "2", true).ns(3, 1000), 21);
        let host = Timing { cpu_time: CpuTime::HostCalibrated, ..Timing::default() };
        assert_eq!(host.cpu_clock("tw", "2", true).ns(3, 1000), 1000 * t.cpu_ps_per_vm_step / 1000);
        assert!(CpuTime::parse("x86").unwrap_err().contains("allowed arm-a9, host-calibrated"));
    }
}

//! The configurations of Table IV, named as the paper writes them, parsed with a grammar:
//!
//! ```text
//! NAME   := ("RR" | "RU" [LIMIT ["F"]]) ["-S2" ["X"]] ["-WH" M] ["-INV" PCT]
//! LIMIT  := digits, 2..=100000      (RUn: a portion is used at most n times, then its page
//!                                    moves to another portion; RUnF: a frame is used at most
//!                                    n times, then its referenced portions are migrated)
//! M      := digits, 1..=128         (journal header kept in M copies written in rotation)
//! PCT    := digits, 1..=100         (incremental GC frees PCT % of the reuse-state frames)
//! ```
//!
//! `RR` is the design with reuse limit 1 (rotational allocation, nothing reused); `RU` reuses
//! without limit. `S2` keeps the quasi-non-volatile data (presence bits, first-free pointer) and
//! the non-functional data (reusable bits, reuse counters) in DRAM; `X` makes the hot-journal
//! flag and the valid bits XOR flags. Without `-INV`, garbage collection frees every frame in
//! reuse state at once.

use serde::Serialize;

/// What the reuse limit n of RUn counts (the paper speaks of "reuse counters ... for a
/// portion" and of a frame's contents "copied to a new page frame" at the limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitScope {
    /// `RUn`: one counter per portion; at the limit only the page journaled again moves.
    Portion,
    /// `RUnF`: one counter per data frame; at the limit every referenced portion of the frame
    /// is copied to a fresh frame (the first model's reading).
    Frame,
}

/// One journal configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// The name as given (canonical form).
    pub name: String,
    /// Reuse portions and frames of earlier journals of the same database (RU).
    pub reuse: bool,
    /// Uses of a portion (or data frame, `limit_scope`) before its page moves; `None`:
    /// unlimited (RU). RR: 1.
    pub reuse_limit: Option<u32>,
    /// What the reuse limit counts.
    pub limit_scope: LimitScope,
    /// Strategy 2: quasi-non-volatile and non-functional metadata in DRAM.
    pub s2: bool,
    /// XOR flags for the hot-journal flag and the valid bits.
    pub xor: bool,
    /// Copies of the journal header written in rotation (WHm; 1 without).
    pub header_copies: u32,
    /// Percentage of reuse-state frames one garbage collection frees (100 without INV).
    pub gc_percent: u32,
}

/// The grammar, for error messages.
pub const GRAMMAR: &str =
    "(RR | RU[n[F]]) [-S2[X]] [-WHm] [-INVp], e.g. RR, RR-S2, RR-S2X, RU, RU-S2X, RU20-S2X, RU20F-S2X, RU20-S2X-WH64, \
     RU2-S2X-WH4-INV25 (n 2..=100000, per portion, or per frame with F; m 1..=128; p 1..=100)";

impl Policy {
    /// Parse a configuration name.
    pub fn parse(name: &str) -> Result<Policy, String> {
        let bad = |why: &str| format!("journal configuration '{name}': {why}; grammar: {GRAMMAR}");
        let (reuse, mut rest) = if let Some(r) = name.strip_prefix("RR") {
            (false, r)
        } else if let Some(r) = name.strip_prefix("RU") {
            (true, r)
        } else {
            return Err(bad("must start with RR or RU"));
        };
        let digits = |s: &str| s.chars().take_while(char::is_ascii_digit).count();
        let mut reuse_limit = if reuse { None } else { Some(1) };
        let n = digits(rest);
        if n > 0 {
            if !reuse {
                return Err(bad("RR has reuse limit 1 and takes no number"));
            }
            let v: u32 = rest[..n].parse().map_err(|_| bad("reuse limit too large"))?;
            if !(2..=100_000).contains(&v) {
                return Err(bad("reuse limit must be 2..=100000"));
            }
            reuse_limit = Some(v);
            rest = &rest[n..];
        }
        let mut limit_scope = LimitScope::Portion;
        if let Some(r) = rest.strip_prefix('F') {
            if n == 0 {
                return Err(bad("F (a per-frame reuse limit) needs a limit n, e.g. RU20F"));
            }
            limit_scope = LimitScope::Frame;
            rest = r;
        }
        let (mut s2, mut xor) = (false, false);
        if let Some(r) = rest.strip_prefix("-S2") {
            s2 = true;
            rest = r;
            if let Some(r) = rest.strip_prefix('X') {
                xor = true;
                rest = r;
            }
        }
        let num_after = |prefix: &str, lo: u32, hi: u32, rest: &mut &str| -> Result<Option<u32>, String> {
            let Some(r) = rest.strip_prefix(prefix) else { return Ok(None) };
            let n = digits(r);
            let v: u32 = r[..n].parse().map_err(|_| bad(&format!("{prefix} needs a number {lo}..={hi}")))?;
            if !(lo..=hi).contains(&v) {
                return Err(bad(&format!("{prefix}{v}: allowed {lo}..={hi}")));
            }
            *rest = &r[n..];
            Ok(Some(v))
        };
        let header_copies = num_after("-WH", 1, 128, &mut rest)?.unwrap_or(1);
        let gc_percent = num_after("-INV", 1, 100, &mut rest)?.unwrap_or(100);
        if !rest.is_empty() {
            return Err(bad(&format!("unexpected '{rest}'")));
        }
        Ok(Policy { name: name.to_string(), reuse, reuse_limit, limit_scope, s2, xor, header_copies, gc_percent })
    }

    /// The limit of a portion's uses (per-portion counters), if any.
    pub fn portion_limit(&self) -> Option<u32> {
        self.reuse_limit.filter(|_| self.reuse && self.limit_scope == LimitScope::Portion)
    }

    /// The limit of a data frame's uses (per-frame counters, `RUnF`), if any.
    pub fn frame_limit(&self) -> Option<u32> {
        self.reuse_limit.filter(|_| self.reuse && self.limit_scope == LimitScope::Frame)
    }

    /// Uses of a header frame before it is migrated: n x m (the paper, Fig. 11).
    pub fn header_limit(&self) -> Option<u32> {
        self.reuse_limit.map(|n| n.saturating_mul(self.header_copies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_of_the_paper_parses_to_its_parts() {
        let p = Policy::parse("RU2-S2X-WH4-INV25").unwrap();
        assert_eq!(
            (p.reuse, p.reuse_limit, p.s2, p.xor, p.header_copies, p.gc_percent),
            (true, Some(2), true, true, 4, 25)
        );
        assert_eq!(p.header_limit(), Some(8));
        let p = Policy::parse("RR").unwrap();
        assert_eq!(
            (p.reuse, p.reuse_limit, p.s2, p.xor, p.header_copies, p.gc_percent),
            (false, Some(1), false, false, 1, 100)
        );
        let p = Policy::parse("RU-S2").unwrap();
        assert_eq!((p.reuse, p.reuse_limit, p.s2, p.xor), (true, None, true, false));
        let p = Policy::parse("RU20F-S2X").unwrap();
        assert_eq!(
            (p.reuse_limit, p.limit_scope, p.frame_limit(), p.portion_limit()),
            (Some(20), LimitScope::Frame, Some(20), None)
        );
        let p = Policy::parse("RU20-S2X").unwrap();
        assert_eq!((p.limit_scope, p.frame_limit(), p.portion_limit()), (LimitScope::Portion, None, Some(20)));
        for n in ["RR-S2", "RR-S2X", "RU", "RU-S2X", "RU20-S2X", "RU20-S2X-WH64", "RU5-S2X-WH128"] {
            assert!(Policy::parse(n).is_ok(), "{n}");
        }
    }

    #[test]
    fn unknown_names_are_refused_with_the_grammar() {
        for n in [
            "",
            "XX",
            "RR2",
            "RU1",
            "RU-S3",
            "RU-S2Y",
            "RU-WH0",
            "RU-WH129",
            "RU-INV0",
            "ru",
            "RU-S2X-WH4-INV25x",
            "RUF",
            "RRF",
            "RU2FF",
        ] {
            let e = Policy::parse(n).unwrap_err();
            assert!(e.contains("grammar: (RR | RU[n[F]])"), "{n}: {e}");
            assert!(!e.contains('\n'));
        }
    }
}

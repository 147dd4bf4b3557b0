//! The result cache (`OUT/cache/`): one small JSON file per point, named by a 128-bit hash of
//! the point's identity and of the build, so that rerunning `reproduce` reuses every point whose
//! spec values, run lengths, seed and simulator are unchanged.
//!
//! The build is identified by the crate version and the git revision. A build from a tree with
//! uncommitted changes (revision `...-dirty`) adds a hash of the executable's bytes, since the
//! revision alone does not say what code ran. Values are stored as the bit patterns of the f64s,
//! so a cached point prints exactly as a fresh one.

use super::point::Values;
use crate::runner::{GIT_REV, VERSION};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// FNV-1a, 64 bits, from a chosen offset basis.
fn fnv(bytes: &[u8], basis: u64) -> u64 {
    let mut h = basis;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// 128-bit hash as 32 hex digits (two FNV-1a passes with different bases).
pub fn hash_hex(bytes: &[u8]) -> String {
    format!("{:016x}{:016x}", fnv(bytes, 0xcbf2_9ce4_8422_2325), fnv(bytes, 0x6c62_272e_07bb_0142))
}

/// What identifies the code that computes results.
pub fn build_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let mut id = format!("{VERSION}+{GIT_REV}");
        if GIT_REV.ends_with("-dirty") || GIT_REV == "unknown" {
            let exe = std::env::current_exe().ok().and_then(|p| std::fs::read(p).ok()).unwrap_or_default();
            id.push('+');
            id.push_str(&hash_hex(&exe));
        }
        id
    })
}

/// Encode values for storage: bit patterns in hex, `null` for a missing value.
pub fn encode(v: &Values) -> serde_json::Value {
    serde_json::Value::Array(
        v.iter()
            .map(|x| x.map_or(serde_json::Value::Null, |x| serde_json::Value::String(format!("{:016x}", x.to_bits()))))
            .collect(),
    )
}

pub fn decode(j: &serde_json::Value) -> Option<Values> {
    j.as_array()?
        .iter()
        .map(|x| match x {
            serde_json::Value::Null => Some(None),
            serde_json::Value::String(s) => u64::from_str_radix(s, 16).ok().map(|b| Some(f64::from_bits(b))),
            _ => None,
        })
        .collect()
}

/// The cache in `dir`.
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(out: &Path) -> Cache {
        Cache { dir: out.join("cache") }
    }

    fn path(&self, point_text: &str) -> PathBuf {
        self.dir.join(format!("{}.json", hash_hex(format!("{}\n{point_text}", build_id()).as_bytes())))
    }

    /// The stored values of a point, if any (a file for another point, from a hash collision or
    /// a hand edit, is ignored).
    pub fn get(&self, point_text: &str) -> Option<Values> {
        let text = std::fs::read_to_string(self.path(point_text)).ok()?;
        let j: serde_json::Value = serde_json::from_str(&text).ok()?;
        if j.get("point")?.as_str()? != point_text || j.get("build")?.as_str()? != build_id() {
            return None;
        }
        decode(j.get("values")?)
    }

    pub fn put(&self, point_text: &str, v: &Values) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let j = serde_json::json!({ "point": point_text, "build": build_id(), "values": encode(v) });
        crate::outfile::write(&self.path(point_text), j.to_string())
    }
}

//! One simulation of a spec ([`Point`]: where it stands on the spec's axes, and its seed) and
//! the metric values it gives ([`Values`]).

/// One simulation: coordinates (axis name, value), sorted by axis name, and a seed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Point {
    pub coords: Vec<(String, String)>,
    pub seed: u64,
}

impl Point {
    pub fn get(&self, axis: &str) -> Option<&str> {
        self.coords.iter().find(|(a, _)| a == axis).map(|(_, v)| v.as_str())
    }

    /// The same point with `axis` set to `value`.
    pub fn with(&self, axis: &str, value: &str) -> Point {
        let mut p = self.clone();
        for (a, v) in &mut p.coords {
            if a == axis {
                *v = value.to_string();
            }
        }
        p
    }
}

/// Metric values of one point as run (kind's columns only).
pub type Values = Vec<Option<f64>>;

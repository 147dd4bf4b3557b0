//! The grid a figure shows and a claim is judged on: one metric's mean per series and x value
//! ([`super::table::Table::grid`] makes it).

/// Means per series (rows) and x value (columns).
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    pub xs: Vec<String>,
    pub series: Vec<String>,
    /// `cells[series][x]`.
    pub cells: Vec<Vec<Option<f64>>>,
}

impl Grid {
    pub fn get(&self, x: &str, series: &str) -> Option<f64> {
        let xi = self.xs.iter().position(|v| v == x)?;
        let si = self.series.iter().position(|v| v == series)?;
        self.cells[si][xi]
    }

    /// Arithmetic mean of a series over the x values (None if any is missing).
    pub fn average(&self, series: &str) -> Option<f64> {
        let si = self.series.iter().position(|v| v == series)?;
        let vals: Option<Vec<f64>> = self.cells[si].iter().copied().collect();
        let vals = vals?;
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    }
}

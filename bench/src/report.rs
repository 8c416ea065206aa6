//! Rows of results, the table of medians and ratios, and JSON lines.

use std::collections::BTreeMap;
use std::time::Duration;

/// One measurement: a scenario, a case, an implementation.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub scenario: &'static str,
    pub case: String,
    pub imp: &'static str,
    pub n: u64,
    pub ns_per_op: Option<f64>,
    pub bytes_per_timer: Option<f64>,
    pub per_sec: Option<f64>,
    pub lateness: Option<[Duration; 3]>,
    pub wakeups_per_sec: Option<f64>,
    pub note: Option<String>,
}

impl Row {
    pub fn new(scenario: &'static str, case: impl Into<String>, imp: &'static str, n: u64) -> Row {
        Row { scenario, case: case.into(), imp, n, ..Row::default() }
    }

    pub fn name(&self) -> String {
        format!("{}/{}/{}", self.scenario, self.case, self.imp)
    }

    pub fn json(&self) -> String {
        let lateness = |i: usize| self.lateness.map(|l| l[i].as_nanos() as u64);
        serde_json::json!({
            "scenario": format!("{}/{}", self.scenario, self.case),
            "impl": self.imp,
            "n": self.n,
            "ns_per_op": self.ns_per_op,
            "bytes_per_timer": self.bytes_per_timer,
            "per_sec": self.per_sec,
            "lateness_p50_ns": lateness(0),
            "lateness_p99_ns": lateness(1),
            "lateness_max_ns": lateness(2),
            "wakeups_per_sec": self.wakeups_per_sec,
            "note": self.note,
        })
        .to_string()
    }
}

/// The figure a case is compared on, and whether lower is better.
fn key_figure(row: &Row) -> Option<(f64, bool)> {
    if let Some(ns) = row.ns_per_op {
        return Some((ns, true));
    }
    if let Some(bytes) = row.bytes_per_timer {
        return Some((bytes, true));
    }
    if let Some(l) = row.lateness {
        return Some((l[1].as_nanos() as f64, true));
    }
    if let Some(w) = row.wakeups_per_sec {
        return Some((w, true));
    }
    row.per_sec.map(|p| (p, false))
}

/// Prints each case's rows with the ratio of each to the best peer (every
/// implementation that is not hourglass's own).
pub fn print_table(rows: &[Row]) {
    let mut cases: BTreeMap<(String, String), Vec<&Row>> = BTreeMap::new();
    for row in rows {
        cases.entry((row.scenario.to_owned(), row.case.clone())).or_default().push(row);
    }
    println!(
        "{:<44} {:>10} {:>11} {:>9} {:>12} {:>24} {:>9} {:>9}",
        "scenario/case/impl", "n", "ns/op", "B/timer", "per sec", "lateness p50/p99/max", "wake/s", "vs peer"
    );
    for ((_, _), rows) in cases {
        let best_peer = rows
            .iter()
            .filter(|r| !r.imp.starts_with("hourglass"))
            .filter_map(|r| key_figure(r))
            .reduce(|a, b| if (a.1 && b.0 < a.0) || (!a.1 && b.0 > a.0) { b } else { a });
        for row in rows {
            let ratio = match (key_figure(row), best_peer) {
                (Some((mine, lower)), Some((peer, _))) if mine > 0.0 && peer > 0.0 => {
                    let r = if lower { peer / mine } else { mine / peer };
                    format!("{r:.2}x")
                }
                _ => "-".to_owned(),
            };
            let opt = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
            let lateness = row.lateness.map_or("-".to_owned(), |l| format!("{:.2?}/{:.2?}/{:.2?}", l[0], l[1], l[2]));
            println!(
                "{:<44} {:>10} {:>11} {:>9} {:>12} {:>24} {:>9} {:>9}{}",
                row.name(),
                row.n,
                opt(row.ns_per_op, 1),
                opt(row.bytes_per_timer, 1),
                row.per_sec.map_or("-".to_owned(), |p| format!("{:.2}M", p / 1e6)),
                lateness,
                opt(row.wakeups_per_sec, 1),
                ratio,
                row.note.as_ref().map_or(String::new(), |n| format!("  ({n})")),
            );
        }
    }
    println!("vs peer: how many times better than the best peer in the same case (>1: hourglass leads).");
}

/// The median of a non-empty list of samples.
pub fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

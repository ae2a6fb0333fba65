//! `report merge`: the section a merged result carries, whatever its kind.
//! A merged result is a result of the same kind as its inputs (figures added,
//! percentiles from added histograms) plus `merged`: the sources and one
//! section per host (`H`, the kind's own per-host figures).

use crate::verdict::RunHeader;
use mailbench_base::host::HostInfo;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The `merged` section of a merged result.json.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Merged<H> {
    /// The result files merged, in order.
    pub sources: Vec<String>,
    /// One section per host (merged inputs contribute their own host sections).
    pub hosts: Vec<H>,
}

impl<H> Default for Merged<H> {
    fn default() -> Self {
        Merged {
            sources: Vec::new(),
            hosts: Vec::new(),
        }
    }
}

/// One input of a typed merge: a result of kind `R`, where it came from, and
/// its intervals `I` (intervals.jsonl beside it).
pub struct MergeInput<'a, R, I> {
    pub source: String,
    pub result: &'a R,
    pub intervals: &'a [I],
}

/// A merged result (with `merged` set) and its aligned intervals.
pub struct MergeOutput<R, I> {
    pub result: R,
    pub intervals: Vec<I>,
}

/// The one value all inputs share, else `mixed: a; b`.
pub fn common_or_mixed<'a>(vals: impl Iterator<Item = &'a str>) -> String {
    let set: BTreeSet<&str> = vals.collect();
    if set.len() == 1 {
        set.into_iter().next().unwrap_or_default().to_string()
    } else {
        format!("mixed: {}", set.into_iter().collect::<Vec<_>>().join("; "))
    }
}

/// The host of a merged result: every host's label, the common OS and
/// kernel (or `mixed: ...`), CPUs and memory summed.
pub fn merged_host<'a>(labels: impl Iterator<Item = &'a str>, hosts: &[HostInfo]) -> HostInfo {
    HostInfo {
        hostname: labels.collect::<Vec<_>>().join(", "),
        os: common_or_mixed(hosts.iter().map(|h| h.os.as_str())),
        kernel: common_or_mixed(hosts.iter().map(|h| h.kernel.as_str())),
        cpus: hosts.iter().map(|h| h.cpus).sum(),
        memory_bytes: hosts.iter().map(|h| h.memory_bytes).sum(),
    }
}

/// The header of a merged result of `kind`: every host named (`labels`,
/// the hosts' OS and kernel in common, CPUs and memory summed), the earliest
/// start (of the inputs that have one), the latest end, the longest duration.
pub fn merged_header<'a>(
    kind: &str,
    inputs: &[&RunHeader],
    labels: impl Iterator<Item = &'a str>,
) -> RunHeader {
    let mut header = RunHeader::begin(kind);
    let hosts: Vec<HostInfo> = inputs.iter().map(|h| h.host.clone()).collect();
    header.host = merged_host(labels, &hosts);
    header.started = (inputs.iter().map(|h| h.started.as_str()))
        .filter(|x| !x.is_empty())
        .min()
        .unwrap_or_default()
        .to_string();
    header.ended = (inputs.iter().map(|h| h.ended.as_str()))
        .max()
        .unwrap_or_default()
        .to_string();
    header.duration_s = (inputs.iter().map(|h| h.duration_s)).fold(0.0, f64::max);
    header.log_write_error = inputs.iter().find_map(|h| h.log_write_error.clone());
    header
}

/// Labels for the inputs of a merge: inputs that are merges themselves keep
/// their hosts' labels (`None`); each plain input gets its hostname, made
/// unique with `#2`, `#3`... `inputs` is (hostname, labels already used by
/// the input when it is a merge).
pub fn host_labels(inputs: &[(&str, Option<Vec<String>>)]) -> Vec<Option<String>> {
    let mut used: BTreeSet<String> = inputs
        .iter()
        .filter_map(|(_, m)| m.as_ref())
        .flatten()
        .cloned()
        .collect();
    let mut out = Vec::new();
    for (hostname, merged) in inputs {
        if merged.is_some() {
            out.push(None);
            continue;
        }
        let base = if hostname.is_empty() {
            "host".to_string()
        } else {
            hostname.to_string()
        };
        let mut label = base.clone();
        let mut n = 2;
        while used.contains(&label) {
            label = format!("{base}#{n}");
            n += 1;
        }
        used.insert(label.clone());
        out.push(Some(label));
    }
    out
}

/// `label:name` for a plain input's item, `name` for a merged input's.
pub fn prefixed(label: &Option<String>, name: &str) -> String {
    match label {
        Some(l) => format!("{l}:{name}"),
        None => name.to_string(),
    }
}

/// Weighted mean of (value, weight) pairs; 0 without weight.
pub fn weighted(pairs: impl Iterator<Item = (f64, u64)>) -> f64 {
    let (mut s, mut n) = (0.0, 0u64);
    for (v, w) in pairs {
        s += v * w as f64;
        n += w;
    }
    if n == 0 { 0.0 } else { s / n as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_unique_and_merged_inputs_keep_theirs() {
        let l = host_labels(&[
            ("a", None),
            ("a", None),
            ("", None),
            ("x", Some(vec!["a#3".into()])),
            ("a", None),
        ]);
        assert_eq!(
            l,
            vec![
                Some("a".into()),
                Some("a#2".into()),
                Some("host".into()),
                None,
                Some("a#4".into())
            ]
        );
        assert_eq!(common_or_mixed(["x", "x"].into_iter()), "x");
        assert_eq!(common_or_mixed(["y", "x"].into_iter()), "mixed: x; y");
        assert_eq!(weighted([(1.0, 1), (4.0, 3)].into_iter()), 3.25);
        assert_eq!(weighted(std::iter::empty()), 0.0);
    }
}

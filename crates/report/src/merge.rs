//! `report merge` of storage-run results, from loaded documents: the merge
//! itself is typed in `mailbench_results::storage::merge`.

use crate::load::StorageDoc;
pub use crate::summary::storage::hosts_text;
use mailbench_base::Result;
pub use mailbench_results::storage::merge::{
    HostSection, MergeInput, MergeOutput, StorageMerged as Merged, check_compatible, merge_class,
    merge_totals,
};

/// Merges loaded storage-run results of the same test from several hosts.
pub fn merge(docs: &[StorageDoc]) -> Result<MergeOutput> {
    let inputs: Vec<MergeInput> = docs
        .iter()
        .map(|d| MergeInput {
            source: d.source.display().to_string(),
            result: &d.result,
            intervals: &d.intervals,
        })
        .collect();
    mailbench_results::storage::merge::merge(&inputs)
}

/// Whether loaded storage-run results are of the same test (their intervals
/// are not looked at): what a merge says first.
pub fn check_compatible_docs(docs: &[&StorageDoc]) -> Result<()> {
    let inputs: Vec<MergeInput> = docs
        .iter()
        .map(|d| MergeInput {
            source: d.source.display().to_string(),
            result: &d.result,
            intervals: &[],
        })
        .collect();
    check_compatible(&inputs)
}

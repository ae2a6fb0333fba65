//! Reading result files for a driver above the runner (many hosts): loading
//! a run folder's result with its intervals, the typed merges of loaded
//! results, and summary.txt of a typed result.

use mailbench_base::Result;
pub use mailbench_report::load::{Doc, MailDoc, StorageDoc, load};
use mailbench_results::AnyResult;
use mailbench_results::mail::merge::MailMergeOutput;
use mailbench_results::storage::merge::MergeOutput;

/// `report merge` of loaded storage-run results.
pub fn merge_storage(docs: &[StorageDoc]) -> Result<MergeOutput> {
    mailbench_report::merge::merge(docs)
}

/// `report merge` of loaded mail-run results.
pub fn merge_mail(docs: &[MailDoc]) -> Result<MailMergeOutput> {
    mailbench_report::mailmerge::merge_typed(docs)
}

/// A loaded mail-run document, typed.
pub fn mail_result(d: &MailDoc) -> Result<mailbench_results::mail::run::MailRunResult> {
    mailbench_report::mailmerge::typed(d)
}

/// summary.txt of a typed result.
pub fn summary(r: &AnyResult) -> String {
    mailbench_report::summary::render(r)
}

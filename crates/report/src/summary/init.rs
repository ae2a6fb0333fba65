//! summary.txt of `storage init`: the databases created, resumed or opened.

use mailbench_results::storage::init::StorageInitResult;
use std::fmt::Write as _;

/// summary.txt of a storage-init result.
pub fn storage_init(r: &StorageInitResult) -> String {
    let i = &r.init;
    let mut o = format!(
        "mailbench storage init — {}\n\nDatabase Creation\n",
        r.verdict.label()
    );
    super::lost_log_tail(&mut o, &r.spec.lost_log_tail);
    let _ = writeln!(
        o,
        "  {:<8} {:<8} {:>12} {:>12} {:>9} {:>9}  path",
        "DB", "action", "size MB", "written MB", "seconds", "MB/s"
    );
    for d in &i.databases {
        let _ = writeln!(
            o,
            "  {:<8} {:<8} {:>12.1} {:>12.1} {:>9.2} {:>9.1}  {}",
            d.name,
            d.action,
            d.size_bytes as f64 / 1e6,
            d.written_bytes as f64 / 1e6,
            d.seconds,
            d.mb_per_s,
            d.path.display()
        );
    }
    let _ = writeln!(
        o,
        "  {:<8} {:<8} {:>12} {:>12.1} {:>9.2} {:>9.1}  I/O engine {}, O_DIRECT {}",
        "total",
        "",
        "",
        i.written_bytes as f64 / 1e6,
        i.seconds,
        i.mb_per_s,
        i.io_engine,
        i.o_direct
    );
    o
}

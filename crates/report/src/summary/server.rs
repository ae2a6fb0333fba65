//! summary.txt lines of a mail result's `server` section: the server host's
//! own figures (node exporter, Postfix exporter, Dovecot, or the local
//! target's /proc) over the measured window.

use mailbench_metrics::server::{ServerSection, SourceFigures};

/// The summary's lines for a `server` section (empty when there is none).
pub fn server_text(s: &ServerSection) -> String {
    let mut out = format!(
        "\nServer host (its own counters, {:.0}-{:.0} s of the run)\n",
        s.from_s, s.to_s
    );
    for src in &s.sources {
        out += &source_lines(src);
    }
    if let Some(p) = s.per_mailbox {
        out += &format!(
            "  store IOPS per mailbox   {:.4} (reads {:.4} + writes {:.4} per user per s, {} users)\n",
            p.iops_per_mailbox, p.reads_per_user_per_s, p.writes_per_user_per_s, p.users
        );
        if let Some(r) = s.per_mailbox_real_day.filter(|_| s.compression > 1.0) {
            out += &format!(
                "  at the profile's real rate (day compressed {:.1}x): {:.4} -> mailbench plan --iops-per-mailbox {:.4}\n",
                s.compression, r.iops_per_mailbox, r.iops_per_mailbox
            );
        }
    }
    out
}

fn source_lines(src: &SourceFigures) -> String {
    let mut out = format!("  {}", src.source);
    if !src.kinds.is_empty() {
        out += &format!(" [{}]", src.kinds.join(", "));
    }
    if src.failures > 0 {
        out += &format!(
            " {} of {} readings failed: {}",
            src.failures,
            src.scrapes,
            src.error.as_deref().unwrap_or("")
        );
    }
    out.push('\n');
    let Some(f) = &src.figures else {
        out += "    no figures (fewer than two readings in the window)\n";
        return out;
    };
    if let Some(h) = &f.host {
        let cores: Vec<String> = h
            .cpu_busy_pct_per_core
            .iter()
            .map(|(c, v)| format!("{c}:{v:.0}"))
            .collect();
        out += &format!(
            "    CPU busy {:.1} % (iowait {:.1} %) on {} cores [{}]",
            h.cpu_busy_pct,
            h.cpu_iowait_pct,
            h.cores,
            cores.join(" ")
        );
        if let Some(m) = h.memory_used_pct_max {
            out += &format!(", memory used max {m:.1} %");
        }
        out.push('\n');
        if let Some(st) = &h.store {
            let r = &st.rates;
            out += &format!(
                "    store {}: {:.1} reads/s {:.1} writes/s, {:.2} / {:.2} MB/s, latency {:.2} / {:.2} ms, queue depth {:.2}, busy {:.0} %\n",
                st.devices.join("+"),
                r.reads_per_s,
                r.writes_per_s,
                r.read_bytes_per_s / 1e6,
                r.write_bytes_per_s / 1e6,
                r.read_latency_ms,
                r.write_latency_ms,
                r.queue_depth,
                r.utilisation_pct
            );
        }
    }
    if let Some(q) = &f.queue {
        out += &format!(
            "    mail queue average {:.1}, max {:.0}, last {:.0}\n",
            q.average, q.max, q.last
        );
    }
    let cmds: f64 = f.commands.values().map(|c| c.per_s).sum();
    if cmds > 0.0 {
        out += &format!(
            "    server-side counts {:.1}/s over {} series\n",
            cmds,
            f.commands.len()
        );
    }
    out
}

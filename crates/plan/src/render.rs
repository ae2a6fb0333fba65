//! Plan output as a plain-text report (default) or Markdown; JSON is serde of [`Plan`].

use crate::model::{IopsSource, PerMailbox, Plan, ServerPlan};
use mailbench_base::ByteSize;

/// One block of the report.
#[derive(Debug, Clone)]
enum Block {
    Pairs(Vec<(String, String)>),
    /// Headers, rows; the first column is left-aligned, the others right-aligned.
    Table(Vec<String>, Vec<Vec<String>>),
    Lines(Vec<String>),
}

#[derive(Debug, Clone)]
struct Section {
    title: String,
    blocks: Vec<Block>,
}

/// Whole numbers with thousands separators: 15000 -> 15,000.
pub fn int(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A figure with `d` decimals and thousands separators.
pub fn num(x: f64, d: usize) -> String {
    let s = format!("{:.*}", d, x.abs());
    let (whole, frac) = s.split_once('.').map_or((s.as_str(), ""), |(w, f)| (w, f));
    let w = whole.parse::<u64>().map_or(whole.to_string(), int);
    let sign = if x < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    if frac.is_empty() {
        format!("{sign}{w}")
    } else {
        format!("{sign}{w}.{frac}")
    }
}

/// A size in binary units (`1.08TiB`), or in decimal units when that is exact and the
/// binary form is not (`4GB`, `4TB`, as users write disk and quota sizes).
pub fn size(b: u64) -> String {
    let bin = ByteSize(b).to_string();
    if !bin.contains('.') {
        return bin;
    }
    for (unit, v) in [
        ("TB", 1_000_000_000_000u64),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
    ] {
        if b >= v {
            return if b.is_multiple_of(v) {
                format!("{}{unit}", b / v)
            } else {
                bin
            };
        }
    }
    bin
}

/// A figure with up to `d` decimals, without a trailing `.0` for whole numbers.
pub fn num_auto(x: f64, d: usize) -> String {
    if (x - x.round()).abs() < 1e-9 {
        num(x.round(), 0)
    } else {
        num(x, d)
    }
}

fn pct(x: f64) -> String {
    format!("{} %", num(x * 100.0, 0))
}

fn pairs(v: &[(&str, String)]) -> Block {
    Block::Pairs(
        v.iter()
            .map(|(k, s)| ((*k).to_string(), s.clone()))
            .collect(),
    )
}

fn sections(p: &Plan, layout: bool) -> (String, Vec<Section>) {
    let i = &p.inputs;
    let l = &p.layout;
    let sites: Vec<String> = l
        .site_servers
        .iter()
        .zip(&l.site_copies)
        .enumerate()
        .map(|(s, (n, c))| {
            format!(
                "site {}: {n} servers, {c} cop{}",
                crate::layout::site_letter(s),
                if *c == 1 { "y" } else { "ies" }
            )
        })
        .collect();
    let title = format!(
        "mailbench plan: {} mailboxes, {} messages/day, {} quota, {} copies over {} server{} — {} guidance",
        int(i.mailboxes),
        num_auto(i.messages_per_day, 1),
        size(i.mailbox_quota),
        i.copies,
        int(p.total.servers),
        if p.total.servers == 1 { "" } else { "s" },
        p.guidance.version
    );
    let mut out = Vec::new();

    section_inputs(p, &sites, &mut out);
    section_disk_model(p, &mut out);
    section_per_mailbox(p, &mut out);
    section_per_database(p, &mut out);
    section_per_server(p, &mut out);
    section_group_and_total(p, &mut out);
    section_failure(p, layout, &mut out);
    (title, out)
}

/// The sections "Inputs".
fn section_inputs(p: &Plan, sites: &[String], out: &mut Vec<Section>) {
    let i = &p.inputs;
    let mut inputs = vec![
        ("mailboxes", int(i.mailboxes)),
        (
            "messages sent+received per mailbox per day",
            num_auto(i.messages_per_day, 1),
        ),
        ("average message size", size(i.message_size)),
        ("mailbox quota", size(i.mailbox_quota)),
        (
            "IOPS per mailbox",
            i.iops_per_mailbox.map_or_else(
                || "from the guidance".to_string(),
                |x| format!("{} (measured)", num_auto(x, 4)),
            ),
        ),
        (
            "database copies",
            if i.lagged_copies > 0 {
                format!(
                    "{} ({} lagged, replay lag {} days)",
                    i.copies,
                    i.lagged_copies,
                    num(i.replay_lag_days, 1)
                )
            } else {
                i.copies.to_string()
            },
        ),
        (
            "groups x servers per group",
            format!("{} x {} ({})", i.groups, i.servers, sites.join("; ")),
        ),
        ("failure to survive", i.failure.to_string()),
        ("I/O headroom", format!("{} %", num(i.headroom_pct, 0))),
        (
            "guidance",
            format!("{} ({})", p.guidance.version, p.guidance.name),
        ),
    ];
    if i.mailbox_moves_pct > 0.0 {
        inputs.push((
            "mailbox-move log share",
            format!("{} %", num(i.mailbox_moves_pct, 0)),
        ));
    }
    if i.content_index_pct > 0.0 {
        inputs.push((
            "content index",
            format!("{} % of the database", num(i.content_index_pct, 0)),
        ));
    }
    out.push(Section {
        title: "Inputs".into(),
        blocks: vec![pairs(&inputs)],
    });
}

/// The sections "Disk model".
fn section_disk_model(p: &Plan, out: &mut Vec<Section>) {
    let dk = &p.disk;
    out.push(Section {
        title: "Disk model".into(),
        blocks: vec![pairs(&[
            (
                "disk",
                format!("{} ({})", dk.model.preset, dk.model.description),
            ),
            (
                "capacity",
                format!(
                    "{} ({} bytes){}",
                    size(dk.model.capacity),
                    int(dk.model.capacity),
                    if dk.model.capacity_overridden {
                        ", from --disk-capacity"
                    } else {
                        ", preset"
                    }
                ),
            ),
            (
                "random IOPS per disk",
                format!(
                    "{}{}",
                    num(dk.model.iops, 0),
                    if dk.model.iops_overridden {
                        ", from --disk-iops"
                    } else {
                        ", preset"
                    }
                ),
            ),
            ("preset source", dk.model.source.clone()),
            (
                "RAID",
                format!(
                    "{} in groups of {}, write penalty {}",
                    if dk.raid == "jbod" {
                        "JBOD".to_string()
                    } else {
                        format!("RAID-{}", dk.raid)
                    },
                    dk.raid_group,
                    dk.write_penalty
                ),
            ),
            (
                "disk IOPS per host IOPS",
                format!(
                    "{} = {} reads + {} writes x {}",
                    num(dk.raid_cost, 2),
                    num(dk.read_share, 2),
                    num(1.0 - dk.read_share, 2),
                    dk.write_penalty
                ),
            ),
            (
                "functional IOPS per disk",
                num(dk.functional_iops_per_disk, 1),
            ),
            ("usable space per RAID group", size(dk.usable_per_group)),
        ])],
    });
}

/// Where the IOPS per mailbox comes from, as one line of "Per mailbox".
fn iops_origin(m: &PerMailbox) -> (&'static str, String) {
    let text = match m.iops_source {
        IopsSource::Measured => format!(
            "measured (--iops-per-mailbox {}), in place of the guidance's {}",
            num_auto(m.iops, 4),
            num(m.guidance_iops * m.message_size_factor, 4)
        ),
        IopsSource::Guidance => "guidance (its rate or table x message size factor)".to_string(),
    };
    ("IOPS source", text)
}

/// The sections "Per mailbox".
fn section_per_mailbox(p: &Plan, out: &mut Vec<Section>) {
    let i = &p.inputs;
    let m = &p.per_mailbox;
    out.push(Section {
        title: "Per mailbox".into(),
        blocks: vec![pairs(&[
            iops_origin(m),
            (
                "IOPS from guidance (75 KB messages)",
                num(m.guidance_iops, 4),
            ),
            ("message size factor", num(m.message_size_factor, 3)),
            ("IOPS without headroom", num(m.iops, 4)),
            (
                "IOPS with headroom",
                format!(
                    "{} (+{} %)",
                    num(m.iops_with_headroom, 4),
                    num(i.headroom_pct, 0)
                ),
            ),
            (
                "IOPS of a passive copy",
                num(m.passive_iops_with_headroom, 4),
            ),
            ("database cache", size(m.cache)),
            (
                "transaction logs per day",
                format!(
                    "{} (size factor {}) + {} of mailbox moves",
                    num(m.logs_per_day, 1),
                    num(m.log_size_factor, 2),
                    num(m.move_logs_per_day, 2)
                ),
            ),
            ("white space", size(m.white_space)),
            ("dumpster (recoverable items)", size(m.dumpster)),
            (
                "size on disk (quota + white space + dumpster)",
                size(m.size_on_disk),
            ),
        ])],
    });
}

/// The sections "Per database".
fn section_per_database(p: &Plan, out: &mut Vec<Section>) {
    let i = &p.inputs;
    let d = &p.per_database;
    out.push(Section {
        title: "Per database".into(),
        blocks: vec![
            pairs(&[
                (
                    "databases",
                    format!(
                        "{} per group, {} in total ({})",
                        d.per_group,
                        int(d.total),
                        d.chosen_by
                    ),
                ),
                ("mailboxes (fullest database)", int(d.mailboxes)),
                (
                    "transactional IOPS, active copy",
                    format!(
                        "{} ({} without headroom)",
                        num(d.active_iops, 1),
                        num(d.active_iops_without_headroom, 1)
                    ),
                ),
                ("transactional IOPS, passive copy", num(d.passive_iops, 1)),
                ("log write IOPS per copy", num(d.log_iops, 1)),
                ("database read share", pct(d.read_share)),
                (
                    "background maintenance per copy",
                    format!("{} MB/s", num(d.maintenance_mb_s, 1)),
                ),
                (
                    "transaction logs per day",
                    format!(
                        "{} + {} of mailbox moves",
                        num(d.logs_per_day, 0),
                        num(d.move_logs_per_day, 0)
                    ),
                ),
                ("database cache (active)", size(d.cache)),
                (
                    "database size",
                    format!("{} (advice: at most {})", size(d.size), size(d.size_advice)),
                ),
                (
                    "database volume per copy",
                    format!(
                        "{} (+{} % growth{})",
                        size(d.volume),
                        num(i.growth_pct, 0),
                        if i.content_index_pct > 0.0 {
                            format!(", +{} % content index", num(i.content_index_pct, 0))
                        } else {
                            String::new()
                        }
                    ),
                ),
                (
                    "log space per copy",
                    format!(
                        "{} ({} days of logs)",
                        size(d.log_space),
                        num_auto(i.log_days, 1)
                    ),
                ),
            ])
            .with_lagged(
                i.lagged_copies > 0,
                d.log_space_lagged,
                i.log_days + i.replay_lag_days,
            ),
        ],
    });
}

/// The section "Per server (group 1 of N)".
fn section_per_server(p: &Plan, out: &mut Vec<Section>) {
    let i = &p.inputs;
    let failure_col = p.inputs.failure != crate::input::Failure::None;
    let mut headers = vec![
        "server",
        "site",
        "act",
        "pas",
        "lag",
        "IOPS",
        "log IOPS",
        "seq MB/s",
        "cache",
        "space",
        "disks:IOPS",
        "disks:space",
        "disks",
        "util IOPS",
        "util space",
    ];
    if failure_col {
        headers.splice(5..6, ["IOPS", "act fail", "IOPS fail"]);
    }
    let rows = p
        .servers
        .iter()
        .map(|s| {
            let mut r = vec![
                s.name.clone(),
                s.site.clone(),
                s.normal.active.to_string(),
                s.normal.passive.to_string(),
                s.normal.lagged.to_string(),
                num(s.iops_normal, 1),
            ];
            if failure_col {
                r.push(s.after_failure.active.to_string());
                r.push(num(s.iops_after_failure, 1));
            }
            r.extend([
                num(s.log_iops, 1),
                num(s.sequential_mb_s, 1),
                size(s.cache_after_failure),
                size(s.capacity),
                s.disks_by_iops.to_string(),
                s.disks_by_capacity.to_string(),
                s.disks.to_string(),
                pct(if failure_col {
                    s.iops_utilisation_after_failure
                } else {
                    s.iops_utilisation_normal
                }),
                pct(s.capacity_utilisation),
            ]);
            r
        })
        .collect();
    out.push(Section {
        title: format!(
            "Per server (group 1 of {}; every group is the same)",
            i.groups
        ),
        blocks: vec![
            Block::Table(headers.iter().map(|h| (*h).to_string()).collect(), rows),
            Block::Lines(vec![
                "act/pas/lag: active, passive and lagged copies in normal operation; IOPS: database transactional IOPS with headroom".into(),
                if failure_col {
                    "act fail / IOPS fail: the heaviest state of the server over every case of the failure; disks are sized for it".into()
                } else {
                    "no failure declared: disks are sized for normal operation".into()
                },
                "seq MB/s: background maintenance + average log writes; cache: database cache for the active mailboxes (after the failure)".into(),
                "space: database volumes + log space (+ restore volume); util: share of the chosen disks' IOPS and usable space".into(),
            ]),
        ],
    });
}

/// The sections "Group and total".
fn section_group_and_total(p: &Plan, out: &mut Vec<Section>) {
    let g = &p.group;
    let t = &p.total;
    let both = |f: &dyn Fn(&crate::model::Totals) -> String| vec![f(g), f(t)];
    let total_rows: Vec<(&str, Vec<String>)> = vec![
        ("servers", both(&|x| int(x.servers))),
        ("mailboxes", both(&|x| int(x.mailboxes))),
        ("databases", both(&|x| int(x.databases))),
        ("database copies", both(&|x| int(x.copies))),
        (
            "transactional IOPS, normal",
            both(&|x| num(x.iops_normal, 1)),
        ),
        (
            "transactional IOPS of the survivors after the failure",
            both(&|x| num(x.iops_after_failure, 1)),
        ),
        ("log write IOPS", both(&|x| num(x.log_iops, 1))),
        (
            "background maintenance MB/s",
            both(&|x| num(x.maintenance_mb_s, 1)),
        ),
        (
            "transaction logs per day",
            both(&|x| num(x.logs_per_day, 0)),
        ),
        ("database volumes", both(&|x| size(x.database_space))),
        ("log space", both(&|x| size(x.log_space))),
        ("space needed", both(&|x| size(x.capacity))),
        ("disks", both(&|x| int(x.disks))),
        ("raw capacity", both(&|x| size(x.raw_capacity))),
        ("usable capacity", both(&|x| size(x.usable_capacity))),
    ];
    out.push(Section {
        title: "Group and total".into(),
        blocks: vec![Block::Table(
            vec!["".into(), "per group".into(), "total".into()],
            total_rows
                .into_iter()
                .map(|(k, v)| {
                    let mut r = vec![k.to_string()];
                    r.extend(v);
                    r
                })
                .collect(),
        )],
    });

    out.push(requirements_pane(p));
}

/// The sections "Failure", "Copy layout (activation preference left to right)", "Warnings".
fn section_failure(p: &Plan, layout: bool, out: &mut Vec<Section>) {
    let l = &p.layout;
    let f = &p.failure;
    let mut fl = vec![];
    match (&f.worst_scenario, &f.worst_server) {
        _ if f.scenarios == 0 => fl.push("no failure declared (--failure none)".to_string()),
        (Some(sc), Some(sv)) => fl.push(format!(
            "{}: {} case(s) checked; the heaviest is server {sv} after the loss of {sc}: {} IOPS, {} active databases at most on any server",
            f.failure,
            f.scenarios,
            num(f.worst_server_iops, 1),
            f.max_actives_after
        )),
        _ => fl.push(format!(
            "{}: {} case(s) checked; no server carries more than in normal operation",
            f.failure, f.scenarios
        )),
    }
    fl.push(format!(
        "disks per server: {} (the most any server needs; identical servers)",
        p.disks_per_server
    ));
    let mut fblocks = vec![Block::Lines(fl)];
    if layout && !f.matrix.is_empty() {
        let mut h = vec!["lost".to_string()];
        h.extend(l.names.iter().cloned());
        let rows = f
            .matrix
            .iter()
            .map(|sc| {
                let mut r = vec![sc.label.clone()];
                r.extend(
                    sc.active
                        .iter()
                        .map(|a| a.map_or("-".into(), |n| n.to_string())),
                );
                r
            })
            .collect();
        fblocks.push(Block::Lines(vec![
            "active databases per server after each case (- = lost):".into(),
        ]));
        fblocks.push(Block::Table(h, rows));
    }
    out.push(Section {
        title: "Failure".into(),
        blocks: fblocks,
    });

    if layout {
        let ncopies: usize = l.lagged.len();
        let mut h = vec!["database".to_string(), "active".to_string()];
        for k in 1..ncopies {
            h.push(if l.lagged[k] {
                format!("copy {} (lagged)", k + 1)
            } else {
                format!("copy {}", k + 1)
            });
        }
        let rows = l
            .copies
            .iter()
            .enumerate()
            .map(|(db, list)| {
                let mut r = vec![format!("DB{:03}", db + 1)];
                r.extend(list.iter().map(|&s| l.names[s].clone()));
                r
            })
            .collect();
        out.push(Section {
            title: "Copy layout (activation preference left to right)".into(),
            blocks: vec![Block::Table(h, rows)],
        });
    }

    out.push(Section {
        title: "Warnings".into(),
        blocks: vec![Block::Lines(if p.warnings.is_empty() {
            vec!["none".into()]
        } else {
            p.warnings.iter().map(|w| format!("warning: {w}")).collect()
        })],
    });
}

/// The Exchange 2013 calculator's "Role Requirements Results Pane - Log,
/// Disk Space, and IO Requirements", row by row and named as it names them:
/// per database, per server (the most loaded one), per group (DAG) and for
/// the environment, each row counted as the calculator counts it (docs/
/// planner.md "The calculator's pane"). Rows marked `*` are the model's own
/// figures: the calculator's formula for them is not in a source we have.
fn requirements_pane(p: &Plan) -> Section {
    let groups = f64::from(p.inputs.groups);
    let mut rows = Vec::new();
    for (title, group) in pane_rows(p) {
        rows.push(vec![
            title.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
        for r in group {
            let env = r.dag.map(|x| x * groups);
            rows.push(vec![
                format!("  {}", r.name),
                (r.show)(r.database),
                (r.show)(r.server),
                (r.show)(r.dag),
                (r.show)(env),
            ]);
        }
    }
    Section {
        title: "Log, Disk Space, and IO Requirements".into(),
        blocks: vec![
            Block::Table(
                ["", "/ Database", "/ Server", "/ DAG", "/ Environment"]
                    .iter()
                    .map(|h| (*h).to_string())
                    .collect(),
                rows,
            ),
            Block::Lines(requirements_notes(p)),
        ],
    }
}

/// One row of the pane: the figure per database, server and group (None:
/// `--`, the calculator shows none), and how they are shown.
struct PaneRow {
    name: &'static str,
    database: Option<f64>,
    server: Option<f64>,
    dag: Option<f64>,
    show: fn(Option<f64>) -> String,
}

/// The most of `f` over the servers.
fn most(p: &Plan, f: impl Fn(&ServerPlan) -> f64) -> f64 {
    p.servers.iter().map(f).fold(0.0, f64::max)
}

/// The pane's rows in the calculator's three tables.
fn pane_rows(p: &Plan) -> Vec<(&'static str, Vec<PaneRow>)> {
    vec![
        ("Transaction Log Requirements", log_rows(p)),
        ("Disk Space Requirements", space_rows(p)),
        ("Host IO and Throughput Requirements", io_rows(p)),
    ]
}

fn row(
    name: &'static str,
    database: Option<f64>,
    server: Option<f64>,
    dag: Option<f64>,
    show: fn(Option<f64>) -> String,
) -> PaneRow {
    PaneRow {
        name,
        database,
        server,
        dag,
        show,
    }
}

fn whole(x: Option<f64>) -> String {
    x.map_or("--".into(), |v| num(v, 0))
}

fn gb(x: Option<f64>) -> String {
    x.map_or("--".into(), |v| format!("{} GB", num(v / GIB, 0)))
}

/// Logs a day: one database, the most loaded server's active databases in
/// normal operation, every mailbox of the group once.
fn log_rows(p: &Plan) -> Vec<PaneRow> {
    let (d, pm) = (&p.per_database, &p.per_mailbox);
    let m = p.group.mailboxes as f64;
    let actives = most(p, |s| f64::from(s.normal.active));
    let cols =
        |per_db: f64, per_mbx: f64| (Some(per_db), Some(actives * per_db), Some(m * per_mbx));
    let (u_db, u_sv, u_dag) = cols(d.logs_per_day, pm.logs_per_day);
    let (mv_db, mv_sv, mv_dag) = cols(d.move_logs_per_day, pm.move_logs_per_day);
    let sum = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a + b);
    vec![
        row(
            "User Transaction Logs Generated / Day",
            u_db,
            u_sv,
            u_dag,
            whole,
        ),
        row(
            "Average Move Mailbox Transaction Logs Generated / Day",
            mv_db,
            mv_sv,
            mv_dag,
            whole,
        ),
        row(
            "Average Transaction Logs Generated / Day",
            sum(u_db, mv_db),
            sum(u_sv, mv_sv),
            sum(u_dag, mv_dag),
            whole,
        ),
    ]
}

/// Space: one database (copy), every copy the most loaded server holds,
/// every copy of the group.
fn space_rows(p: &Plan) -> Vec<PaneRow> {
    let (d, pm, g) = (&p.per_database, &p.per_mailbox, &p.group);
    let copies_per_db = g.copies as f64 / g.databases.max(1) as f64;
    let on_server = most(p, |s| f64::from(s.normal.copies()));
    let db_space = d.size as f64;
    let volume = (d.volume + d.log_space) as f64;
    vec![
        row("Transport Database Space Required *", None, None, None, gb),
        row(
            "Database Space Required",
            Some(db_space),
            Some(on_server * db_space),
            Some(copies_per_db * g.mailboxes as f64 * pm.size_on_disk as f64),
            gb,
        ),
        row(
            "Log Space Required",
            Some(d.log_space as f64),
            Some(most(p, |s| s.log_space as f64)),
            Some(g.log_space as f64),
            gb,
        ),
        row(
            "Database+Log Volume Space Required *",
            Some(volume),
            Some(on_server * volume),
            Some(g.copies as f64 * volume),
            gb,
        ),
        row(
            "Log Volume Space Required",
            Some(0.0),
            Some(0.0),
            Some(0.0),
            gb,
        ),
        row(
            "Restore Volume Space Required *",
            None,
            Some(most(p, |s| s.restore_space as f64)),
            Some(p.servers.iter().map(|s| s.restore_space as f64).sum()),
            gb,
        ),
    ]
}

/// IOPS: the database's active copy, the most loaded server's worst case,
/// every server of the group built for it; maintenance of every copy.
fn io_rows(p: &Plan) -> Vec<PaneRow> {
    let (d, g) = (&p.per_database, &p.group);
    let mbs: fn(Option<f64>) -> String = |x| {
        x.map_or("--".into(), |v| {
            format!("{} MB/s", num(v, if v < 10.0 { 1 } else { 0 }))
        })
    };
    let pct: fn(Option<f64>) -> String =
        |x| x.map_or("--".into(), |v| format!("{}%", num(v * 100.0, 0)));
    let worst = most(p, |s| s.iops_after_failure);
    vec![
        row(
            "Total Database Required IOPS",
            Some(d.active_iops),
            Some(worst),
            // Identical servers, each built for the most loaded one's worst case.
            Some(p.servers.len() as f64 * worst),
            whole,
        ),
        row(
            "Total Log Required IOPS *",
            Some(d.log_iops),
            Some(most(p, |s| s.log_iops)),
            Some(g.log_iops),
            whole,
        ),
        row(
            "Database Read I/O Percentage",
            Some(d.read_share),
            None,
            None,
            pct,
        ),
        row(
            "Background Database Maintenance Throughput Requirements",
            Some(d.maintenance_mb_s),
            Some(most(p, |s| s.maintenance_mb_s)),
            Some(g.maintenance_mb_s),
            mbs,
        ),
    ]
}

const GIB: f64 = 1073741824.0;

/// What the pane's columns count, and which rows are the model's own.
fn requirements_notes(p: &Plan) -> Vec<String> {
    vec![
        "/ Database: one database (the fullest), IOPS of its active copy; / Server: the most loaded server (its active databases in normal operation for logs, every copy it holds for space and maintenance, its worst failure case for IOPS); / DAG: logs of every mailbox once, space and maintenance of every copy, IOPS of every server built for the most loaded one's worst case; / Environment: every group".into(),
        format!(
            "log space: {} days of logs (truncation failure tolerance) + a week's mailbox moves ({} % of the mailboxes); GB = 1,024 MB as the calculator counts",
            num_auto(p.inputs.log_days, 1),
            num_auto(p.inputs.mailbox_moves_pct, 1)
        ),
        "* the model's own figure or none: the calculator's formula for this row is not in a source the planner cites (docs/planner.md)".into(),
    ]
}

trait WithLagged {
    fn with_lagged(self, on: bool, bytes: u64, days: f64) -> Block;
}

impl WithLagged for Block {
    fn with_lagged(self, on: bool, bytes: u64, days: f64) -> Block {
        match self {
            Block::Pairs(mut v) if on => {
                v.push((
                    "log space per lagged copy".into(),
                    format!("{} ({} days of logs)", size(bytes), num_auto(days, 1)),
                ));
                Block::Pairs(v)
            }
            b => b,
        }
    }
}

fn widths(headers: &[String], rows: &[Vec<String>]) -> Vec<usize> {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    w
}

fn pad(s: &str, w: usize, left: bool) -> String {
    let n = s.chars().count();
    let fill = " ".repeat(w.saturating_sub(n));
    if left {
        format!("{s}{fill}")
    } else {
        format!("{fill}{s}")
    }
}

/// The plain-text report.
pub fn text(p: &Plan, layout: bool) -> String {
    let (title, secs) = sections(p, layout);
    let mut o = format!("{title}\n");
    for s in secs {
        o.push_str(&format!(
            "\n{}\n{}\n",
            s.title,
            "-".repeat(s.title.chars().count())
        ));
        for b in s.blocks {
            match b {
                Block::Pairs(v) => {
                    let w = v.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
                    for (k, val) in v {
                        o.push_str(&format!("  {}  {val}\n", pad(&k, w, true)));
                    }
                }
                Block::Table(h, rows) => {
                    let w = widths(&h, &rows);
                    let line = |cells: &[String]| {
                        let parts: Vec<String> = cells
                            .iter()
                            .enumerate()
                            .map(|(i, c)| pad(c, w.get(i).copied().unwrap_or(0), i == 0))
                            .collect();
                        format!("  {}\n", parts.join("  ").trim_end())
                    };
                    o.push_str(&line(&h));
                    for r in &rows {
                        o.push_str(&line(r));
                    }
                }
                Block::Lines(v) => {
                    for x in v {
                        o.push_str(&format!("  {x}\n"));
                    }
                }
            }
        }
    }
    o
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The Markdown report.
pub fn markdown(p: &Plan, layout: bool) -> String {
    let (title, secs) = sections(p, layout);
    let mut o = format!("# {}\n", md_escape(&title));
    for s in secs {
        if !o.ends_with("\n\n") {
            o.push('\n');
        }
        o.push_str(&format!("## {}\n\n", md_escape(&s.title)));
        for b in s.blocks {
            match b {
                Block::Pairs(v) => {
                    o.push_str("| | |\n|---|---|\n");
                    for (k, val) in v {
                        o.push_str(&format!("| {} | {} |\n", md_escape(&k), md_escape(&val)));
                    }
                    o.push('\n');
                }
                Block::Table(h, rows) => {
                    o.push_str(&format!(
                        "| {} |\n",
                        h.iter()
                            .map(|x| md_escape(x))
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ));
                    let align: Vec<&str> = (0..h.len())
                        .map(|i| if i == 0 { "---" } else { "---:" })
                        .collect();
                    o.push_str(&format!("|{}|\n", align.join("|")));
                    for r in rows {
                        o.push_str(&format!(
                            "| {} |\n",
                            r.iter()
                                .map(|x| md_escape(x))
                                .collect::<Vec<_>>()
                                .join(" | ")
                        ));
                    }
                    o.push('\n');
                }
                Block::Lines(v) => {
                    for x in v {
                        o.push_str(&format!("- {}\n", md_escape(&x)));
                    }
                    o.push('\n');
                }
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped() {
        assert_eq!(int(15000), "15,000");
        assert_eq!(int(999), "999");
        assert_eq!(int(1_234_567), "1,234,567");
        assert_eq!(num(1234.567, 1), "1,234.6");
        assert_eq!(num(0.1212, 3), "0.121");
        assert_eq!(num(-5.0, 0), "-5");
        assert_eq!(num_auto(150.0, 1), "150");
        assert_eq!(num_auto(150.5, 1), "150.5");
        assert_eq!(size(4_000_000_000), "4GB");
        assert_eq!(size(4_000_000_000_000), "4TB");
        assert_eq!(size(9 << 20), "9MiB");
        assert_eq!(size(75 * 1024), "75KiB");
        assert_eq!(size(1_234_567), "1.18MiB");
    }
}

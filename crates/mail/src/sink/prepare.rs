//! A run's sink target: its users and lists generated as for the local
//! target, the sink started with them, the endpoints and the password.

use super::SinkProcess;
use crate::local::LOCAL_DOMAIN;
use crate::options::Resolved;
use crate::profile::Profile;
use crate::target::Target;
use crate::topology::Topology;
use mailbench_base::Result;
use mailbench_base::rundir::TestLog;

/// The sink target of a run: where the users connect, who they are, and the
/// sink process (stopped when dropped).
pub struct SinkTarget {
    pub target: Target,
    pub topo: Topology,
    pub process: SinkProcess,
}

/// Starts the sink for `o`'s users (with the profile's distribution lists)
/// and describes it as a target.
pub fn prepare(o: &Resolved, profile: &Profile, log: &TestLog) -> Result<SinkTarget> {
    let topo = Topology::generate(
        &o.user_format,
        o.first_user,
        o.users,
        profile,
        Some(LOCAL_DOMAIN),
        o.seed,
    )
    .with_logins(o.login_format.as_deref(), o.first_user);
    log.line(format!(
        "sink target: {} users, {} distribution lists",
        topo.users.len(),
        topo.lists.len()
    ));
    let process = SinkProcess::start(&topo.alias_table(), log)?;
    let p = process.ports;
    let target = Target::on_loopback(
        "sink",
        [p.imap, p.submission, p.sieve],
        process.password.clone(),
        o,
    )?;
    Ok(SinkTarget {
        target,
        topo,
        process,
    })
}

/// What the result says the sink target runs.
pub const SOFTWARE: &str =
    "mailbench sink (IMAP, submission, ManageSieve; answers at once, keeps no message bodies)";

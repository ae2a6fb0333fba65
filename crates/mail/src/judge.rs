//! The pass/fail rules of a mail run live with the results they judge
//! (`mailbench_results::mail::judge`): `mail run` judges its own figures with
//! them and `report merge` the sums of several load generators' results.

pub use mailbench_results::mail::judge::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Profile, ProfileExt, TaskKind};
    use mailbench_results::Status;

    fn criteria() -> Criteria {
        Criteria::PUBLISHED
    }

    #[test]
    fn score_uses_the_profiles_weights_over_tasks_that_ran() {
        let p = Profile::load("mmb3").unwrap();
        let (s, w) = weighted_p95_ms(&p, |k| match k {
            TaskKind::Send => Some(100_000),
            TaskKind::Read => Some(20_000),
            _ => None,
        });
        let (ws, wr) = (p.weight(TaskKind::Send), p.weight(TaskKind::Read));
        assert!((s - (ws * 100.0 + wr * 20.0) / (ws + wr)).abs() < 1e-9);
        let weighted = TaskKind::ALL.iter().filter(|k| p.weight(**k) > 0.0).count();
        assert_eq!(w.len(), weighted);
        assert_eq!(w["send"], ws);
        assert_eq!(weighted_p95_ms(&p, |_| None).0, 0.0);
    }

    #[test]
    fn verdicts() {
        let c = criteria();
        let ok = Figures {
            response_time_ms: 200.0,
            expected_deliveries: 10,
            within_pct: 100.0,
            queue_final: Some(0),
            planned_tasks: 5,
            executed_tasks: 5,
            ..Default::default()
        };
        assert_eq!(verdict(&ok, &c).status, Status::Pass);
        let bad = Figures {
            response_time_ms: 1500.0,
            total_errors: 3,
            error_rate_pct: error_rate_pct(3, 300),
            errors_by_kind: [("timeout".to_string(), 1), ("connect".to_string(), 2)]
                .into_iter()
                .collect(),
            within_pct: within_pct(9, 10),
            queue_final: Some(4),
            executed_tasks: 3,
            ..ok.clone()
        };
        let v = verdict(&bad, &c);
        assert_eq!(v.status, Status::Fail);
        assert_eq!(
            v.reasons,
            vec![
                "the response time (weighted 95th percentile) is 1500 ms, over the 1000 ms limit",
                "3 errors (1.00 % of operations; allowed 0 %): 2 connect, 1 timeout",
                "only 90.0 % of deliveries arrived within 60s (needed 95 %)",
                "the server queue did not drain: 4 messages still queued at the end",
                "2 of 5 planned tasks did not run",
            ]
        );
        // An error rate under the allowed one passes; interrupted skips the plan.
        let c2 = Criteria {
            max_error_rate_pct: 2.0,
            ..c
        };
        let v = verdict(
            &Figures {
                interrupted: true,
                ..bad.clone()
            },
            &c2,
        );
        assert_eq!(v.status, Status::Interrupted);
        assert_eq!(v.reasons[0], "interrupted before the end of the run");
        assert!(!v.reasons.iter().any(|r| r.contains("errors")));
        assert!(!v.reasons.iter().any(|r| r.contains("planned")));
        assert_eq!(within_pct(0, 0), 100.0);
        assert_eq!(error_rate_pct(1, 0), 0.0);
    }

    #[test]
    fn the_verdict_lists_every_error_kind_in_order() {
        use crate::wire::ErrorKind;
        let kinds = [
            ErrorKind::Connect,
            ErrorKind::Auth,
            ErrorKind::Timeout,
            ErrorKind::Reset,
            ErrorKind::Malformed,
            ErrorKind::Rejected,
            ErrorKind::Tls,
            ErrorKind::NotDelivered,
        ];
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        assert_eq!(names, KIND_ORDER);
    }
}

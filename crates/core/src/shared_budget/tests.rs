use std::sync::Arc;
use std::time::Duration;

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

/// $1 per 1000 output tokens, nothing for input: a request's worst case is its max_tokens.
fn cost_at(tokens: u32) -> f64 {
    f64::from(tokens) / 1000.0
}

fn fit_within(usd: f64) -> u64 {
    (usd.max(0.0) * 1000.0) as u64
}

fn grant(budget: &Arc<SharedBudget>, max_tokens: u32) -> Option<(u32, Lease)> {
    match budget
        .reserve(max_tokens, 100, &cost_at, &fit_within)
        .unwrap()
    {
        Reservation::Granted { max_tokens, lease } => Some((max_tokens, lease)),
        Reservation::Refused { .. } => None,
    }
}

#[test]
fn leases_hold_the_cap_and_settle_to_the_cost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.json");
    let a = SharedBudget::open(&path, Some(1.0), "run-a", HOUR).unwrap();
    let b = SharedBudget::open(&path, None, "run-b", HOUR).unwrap();
    assert_eq!(b.cap_usd(), 1.0);
    let (tokens, first) = grant(&a, 600).unwrap();
    assert_eq!(tokens, 600);
    // 0.4 is left while the first request is out: the second is lowered to fit.
    let (tokens, second) = grant(&b, 600).unwrap();
    assert_eq!(tokens, 400);
    assert!(
        grant(&a, 600).is_none(),
        "nothing is left while both are out"
    );
    first.settle(0.1).unwrap();
    second.settle(0.05).unwrap();
    let totals = a.totals().unwrap();
    assert!((totals.spent_usd - 0.15).abs() < 1e-9, "{totals:?}");
    assert_eq!(totals.open_leases, 0);
    // A lease dropped unsettled (the request failed or was cut) is charged its worst case.
    drop(grant(&b, 500).unwrap());
    let after = a.totals().unwrap();
    assert!((after.spent_usd - 0.65).abs() < 1e-9, "{after:?}");
    assert_eq!(after.open_leases, 0);
}

#[test]
fn a_lease_of_a_gone_holder_is_charged_at_its_worst_case() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.json");
    let budget = SharedBudget::open(&path, Some(1.0), "run", Duration::ZERO).unwrap();
    let (_, lease) = grant(&budget, 300).unwrap();
    // Its time is up at once: the next look charges it, and settling later charges nothing.
    let totals = budget.totals().unwrap();
    assert_eq!(totals.open_leases, 0);
    assert!((totals.expired_usd - 0.3).abs() < 1e-9, "{totals:?}");
    lease.settle(0.1).unwrap();
    assert_eq!(budget.totals().unwrap().spent_usd, 0.0);

    // A holder whose process is gone on this host, though its time is not up.
    let mut ledger: Ledger = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    ledger.leases.push(LeaseRecord {
        id: 99,
        holder: "dead".into(),
        host: host_name(),
        pid: u32::MAX - 1,
        amount_usd: 0.2,
        expires_unix_ms: u64::MAX,
    });
    std::fs::write(&path, serde_json::to_vec(&ledger).unwrap()).unwrap();
    let totals = budget.totals().unwrap();
    assert!((totals.expired_usd - 0.5).abs() < 1e-9, "{totals:?}");
}

#[test]
fn a_ledger_is_opened_only_as_it_was_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.json");
    assert!(matches!(
        SharedBudget::open(&path, None, "r", HOUR),
        Err(SharedBudgetError::NoCap { .. })
    ));
    for cap in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            SharedBudget::open(&path, Some(cap), "r", HOUR),
            Err(SharedBudgetError::BadCap(_))
        ));
    }
    SharedBudget::open(&path, Some(2.0), "r", HOUR).unwrap();
    let err = SharedBudget::open(&path, Some(3.0), "r", HOUR).unwrap_err();
    assert!(err.to_string().contains("holds max_cost_usd 2"), "{err}");
    std::fs::write(&path, "{\"version\": 7}").unwrap();
    assert!(matches!(
        SharedBudget::open(&path, None, "r", HOUR),
        Err(SharedBudgetError::Malformed { .. })
    ));
}

/// Many holders on many threads, each with its own open ledger: the sum of what is charged
/// never passes the cap.
#[test]
fn concurrent_holders_never_pass_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("budget.json");
    SharedBudget::open(&path, Some(5.0), "init", HOUR).unwrap();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let path = path.clone();
            std::thread::spawn(move || {
                let budget = SharedBudget::open(&path, None, &format!("t{i}"), HOUR).unwrap();
                let mut charged = 0.0;
                while let Some((tokens, lease)) = grant(&budget, 250) {
                    let cost = cost_at(tokens) * 0.8;
                    lease.settle(cost).unwrap();
                    charged += cost;
                }
                charged
            })
        })
        .collect();
    let charged: f64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let budget = SharedBudget::open(&path, None, "check", HOUR).unwrap();
    let totals = budget.totals().unwrap();
    assert!(charged <= 5.0 + 1e-9, "{charged}");
    assert!(
        (totals.spent_usd - charged).abs() < 1e-6,
        "{totals:?} {charged}"
    );
    // It stopped because too little was left for the floor of 100 tokens ($0.1).
    assert!(totals.spent_usd > 5.0 - 0.1 - 1e-9, "{totals:?}");
}

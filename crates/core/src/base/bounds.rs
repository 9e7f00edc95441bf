//! Deadlines from waits that outside input chose (a header, a config value): `now + wait`
//! capped, so no input can overflow an `Instant` and panic the run. Pure arithmetic.

use std::time::Duration;

use tokio::time::Instant;

/// The furthest deadline tollgate computes, as tokio itself caps a sleep: about 30 years,
/// which no run outlives, and far inside what a monotonic clock can hold.
pub const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `from + wait`, or `from + FAR_FUTURE` when `wait` is longer than that.
pub fn deadline(from: Instant, wait: Duration) -> Instant {
    let wait = wait.min(FAR_FUTURE);
    from.checked_add(wait)
        .or_else(|| from.checked_add(Duration::from_secs(86_400)))
        .unwrap_or(from)
}

/// `deadline` on the standard library's clock.
pub fn deadline_std(from: std::time::Instant, wait: Duration) -> std::time::Instant {
    deadline(Instant::from_std(from), wait).into_std()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_wait_overflows_the_clock() {
        let now = Instant::now();
        for wait in [
            Duration::ZERO,
            Duration::from_secs(1),
            FAR_FUTURE,
            Duration::MAX,
        ] {
            let at = deadline(now, wait);
            assert!(at >= now && at - now <= FAR_FUTURE, "{wait:?}");
        }
        assert_eq!(
            deadline(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        let std_now = std::time::Instant::now();
        assert!(deadline_std(std_now, Duration::MAX) > std_now);
    }
}

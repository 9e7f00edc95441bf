//! One cost budget for many runs — a batch's shards, a matrix, a day of cron jobs — kept in a
//! file on storage they all reach. Before each model request a run reserves the request's
//! worst case (a lease) and after it settles the lease to what the request cost, so the spend
//! settled plus the leases still open never exceeds the cap, however many runs share it.
//!
//! Every change happens under an exclusive `flock` on a lock file beside the ledger, and the
//! ledger is replaced whole (written to a temporary file, synced, renamed), so a reader never
//! sees half a ledger and a crash never leaves one. A lease whose holder died before settling
//! (its process gone on this host, or its time up) is charged at its worst case: the request
//! may have been billed, and the cap must hold.

mod lock;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use lock::LockFile;

/// Where a run's shared budget is kept and, for the run that may create it, its cap: the
/// operator's to name (`--shared-budget`, `--shared-max-cost`), never a repository's file.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedBudgetOptions {
    pub path: PathBuf,
    pub max_cost_usd: Option<f64>,
}

/// The ledger's format version; another is refused rather than misread.
const VERSION: u32 = 1;

/// How long a run waits for the lock before it gives up on the request.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Two caps within this are the same cap (a float written and read back).
const SAME_CAP: f64 = 1e-9;

#[derive(Debug, thiserror::Error)]
pub enum SharedBudgetError {
    #[error("the shared budget {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the shared budget {path} is not a ledger tollgate wrote: {why}")]
    Malformed { path: PathBuf, why: String },
    #[error(
        "the shared budget {path} holds max_cost_usd {held}, and this run names {named}: one ledger has one cap (start a new ledger file for a new cap)"
    )]
    CapDiffers {
        path: PathBuf,
        held: f64,
        named: f64,
    },
    #[error(
        "the shared budget {path} does not exist yet: name its cap with --shared-max-cost (or TOLLGATE_SHARED_MAX_COST) to create it"
    )]
    NoCap { path: PathBuf },
    #[error("the shared budget's cap must be a positive number of US dollars, not {0}")]
    BadCap(f64),
    #[error("the shared budget {path} stayed locked for {secs} s", secs = LOCK_WAIT.as_secs())]
    LockTimeout { path: PathBuf },
}

/// The ledger as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Ledger {
    version: u32,
    max_cost_usd: f64,
    /// What settled requests cost, all runs together.
    spent_usd: f64,
    /// Leases whose holder never settled them, charged at their worst case.
    expired_usd: f64,
    next_lease: u64,
    leases: Vec<LeaseRecord>,
    /// Each holder's settled spend, for whoever audits the fleet.
    holders: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct LeaseRecord {
    id: u64,
    holder: String,
    host: String,
    pid: u32,
    amount_usd: f64,
    expires_unix_ms: u64,
}

impl Ledger {
    fn new(max_cost_usd: f64) -> Ledger {
        Ledger {
            version: VERSION,
            max_cost_usd,
            spent_usd: 0.0,
            expired_usd: 0.0,
            next_lease: 1,
            leases: Vec::new(),
            holders: BTreeMap::new(),
        }
    }

    fn reserved(&self) -> f64 {
        self.leases.iter().map(|lease| lease.amount_usd).sum()
    }

    fn available(&self) -> f64 {
        self.max_cost_usd - self.spent_usd - self.expired_usd - self.reserved()
    }

    /// Charges the leases whose holder is gone: its process ended on this host, or its time
    /// ran out.
    fn expire(&mut self, now_ms: u64, host: &str, alive: &dyn Fn(u32) -> bool) {
        let (gone, kept): (Vec<LeaseRecord>, Vec<LeaseRecord>) = std::mem::take(&mut self.leases)
            .into_iter()
            .partition(|lease| {
                lease.expires_unix_ms <= now_ms || (lease.host == host && !alive(lease.pid))
            });
        self.expired_usd += gone.iter().map(|lease| lease.amount_usd).sum::<f64>();
        self.leases = kept;
    }
}

/// What the shared budget says before a request.
#[derive(Debug)]
pub enum Reservation {
    /// Send the request with this `max_tokens`; the lease settles it.
    Granted { max_tokens: u32, lease: Lease },
    /// Not enough is left for a useful answer.
    Refused { available_usd: f64, cap_usd: f64 },
}

/// A shared budget as one run holds it: the ledger's place, its cap, and who this run is.
#[derive(Debug)]
pub struct SharedBudget {
    path: PathBuf,
    lock_path: PathBuf,
    cap: f64,
    holder: String,
    host: String,
    /// How long a lease lives: longer than any request with its retries may take.
    lease_ttl: Duration,
}

impl SharedBudget {
    /// Opens the ledger at `path`, creating it with `cap` if it does not exist; a ledger that
    /// holds another cap, or is not one, is refused before the run starts.
    pub fn open(
        path: &Path,
        cap: Option<f64>,
        holder: &str,
        lease_ttl: Duration,
    ) -> Result<Arc<SharedBudget>, SharedBudgetError> {
        if let Some(cap) = cap
            && !(cap.is_finite() && cap > 0.0)
        {
            return Err(SharedBudgetError::BadCap(cap));
        }
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let mut budget = SharedBudget {
            path: path.to_path_buf(),
            lock_path: PathBuf::from(lock_path),
            cap: cap.unwrap_or(0.0),
            holder: holder.to_string(),
            host: host_name(),
            lease_ttl,
        };
        let held = budget.with_ledger(|ledger| Ok((ledger.max_cost_usd, false)), cap)?;
        if let Some(named) = cap
            && (held - named).abs() > SAME_CAP
        {
            return Err(SharedBudgetError::CapDiffers {
                path: path.to_path_buf(),
                held,
                named,
            });
        }
        budget.cap = held;
        Ok(Arc::new(budget))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn cap_usd(&self) -> f64 {
        self.cap
    }

    /// Reserves a request's worst case: `cost_at(max_tokens)` if that fits, else the most
    /// output tokens that fit (`fit_within(available)`) when they are at least `floor`.
    pub fn reserve(
        self: &Arc<Self>,
        max_tokens: u32,
        floor: u32,
        cost_at: &dyn Fn(u32) -> f64,
        fit_within: &dyn Fn(f64) -> u64,
    ) -> Result<Reservation, SharedBudgetError> {
        let ttl_ms = u64::try_from(self.lease_ttl.as_millis()).unwrap_or(u64::MAX);
        self.with_ledger(
            |ledger| {
                let available = ledger.available();
                let grant = if cost_at(max_tokens) <= available {
                    Some(max_tokens)
                } else {
                    let fits = fit_within(available);
                    (fits >= u64::from(floor))
                        .then(|| max_tokens.min(u32::try_from(fits).unwrap_or(u32::MAX)))
                };
                let Some(granted) = grant else {
                    return Ok((
                        Reservation::Refused {
                            available_usd: available.max(0.0),
                            cap_usd: ledger.max_cost_usd,
                        },
                        false,
                    ));
                };
                let amount = cost_at(granted);
                let id = ledger.next_lease;
                ledger.next_lease += 1;
                ledger.leases.push(LeaseRecord {
                    id,
                    holder: self.holder.clone(),
                    host: self.host.clone(),
                    pid: std::process::id(),
                    amount_usd: amount,
                    expires_unix_ms: now_ms().saturating_add(ttl_ms),
                });
                let lease = Lease {
                    budget: Arc::clone(self),
                    id,
                    amount_usd: amount,
                    open: true,
                };
                Ok((
                    Reservation::Granted {
                        max_tokens: granted,
                        lease,
                    },
                    true,
                ))
            },
            None,
        )
    }

    /// Ends lease `id`, charging `cost`. A lease already expired was charged at its worst
    /// case then; it is not charged twice.
    fn end(&self, id: u64, cost: f64) -> Result<(), SharedBudgetError> {
        self.with_ledger(
            |ledger| {
                let Some(at) = ledger.leases.iter().position(|lease| lease.id == id) else {
                    return Ok(((), false));
                };
                ledger.leases.remove(at);
                ledger.spent_usd += cost;
                *ledger.holders.entry(self.holder.clone()).or_default() += cost;
                Ok(((), true))
            },
            None,
        )
    }

    /// Settled spend, expired charges and open leases, as the ledger holds them now.
    pub fn totals(&self) -> Result<Totals, SharedBudgetError> {
        self.with_ledger(
            |ledger| {
                Ok((
                    Totals {
                        cap_usd: ledger.max_cost_usd,
                        spent_usd: ledger.spent_usd,
                        expired_usd: ledger.expired_usd,
                        reserved_usd: ledger.reserved(),
                        open_leases: ledger.leases.len(),
                    },
                    false,
                ))
            },
            None,
        )
    }

    /// Runs `change` on the ledger under the lock (expired leases charged first), writing it
    /// back when `change` says it changed or expiry did. A missing ledger is created with
    /// `create_with` when given.
    fn with_ledger<T>(
        &self,
        change: impl FnOnce(&mut Ledger) -> Result<(T, bool), SharedBudgetError>,
        create_with: Option<f64>,
    ) -> Result<T, SharedBudgetError> {
        let io = |source| SharedBudgetError::Io {
            path: self.path.clone(),
            source,
        };
        let _lock = LockFile::acquire(&self.lock_path, LOCK_WAIT)
            .map_err(|source| SharedBudgetError::Io {
                path: self.lock_path.clone(),
                source,
            })?
            .ok_or_else(|| SharedBudgetError::LockTimeout {
                path: self.path.clone(),
            })?;
        let (mut ledger, mut dirty) = match std::fs::read(&self.path) {
            Ok(bytes) => (self.parse(&bytes)?, false),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => match create_with {
                Some(cap) => (Ledger::new(cap), true),
                None => {
                    return Err(SharedBudgetError::NoCap {
                        path: self.path.clone(),
                    });
                }
            },
            Err(err) => return Err(io(err)),
        };
        let before = ledger.leases.len();
        ledger.expire(now_ms(), &self.host, &process_alive);
        dirty |= ledger.leases.len() != before;
        let (out, changed) = change(&mut ledger)?;
        if dirty || changed {
            self.store(&ledger).map_err(io)?;
        }
        Ok(out)
    }

    fn parse(&self, bytes: &[u8]) -> Result<Ledger, SharedBudgetError> {
        let malformed = |why: String| SharedBudgetError::Malformed {
            path: self.path.clone(),
            why,
        };
        let ledger: Ledger =
            serde_json::from_slice(bytes).map_err(|err| malformed(err.to_string()))?;
        if ledger.version != VERSION {
            return Err(malformed(format!(
                "version {} (this tollgate writes {VERSION})",
                ledger.version
            )));
        }
        let amounts = [ledger.max_cost_usd, ledger.spent_usd, ledger.expired_usd];
        if amounts.iter().any(|v| !v.is_finite() || *v < 0.0) || ledger.max_cost_usd <= 0.0 {
            return Err(malformed("a negative or non-finite amount".into()));
        }
        Ok(ledger)
    }

    /// Replaces the ledger whole: a temporary file beside it, synced, renamed over it.
    fn store(&self, ledger: &Ledger) -> std::io::Result<()> {
        let mut temp = self.path.as_os_str().to_owned();
        temp.push(format!(".{}.tmp", std::process::id()));
        let temp = PathBuf::from(temp);
        let bytes = serde_json::to_vec_pretty(ledger).map_err(std::io::Error::other)?;
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, &self.path)
    }
}

/// Settles `lease`, if there is one, with what its request cost (at its worst case when the
/// price is not known); a ledger that cannot be written leaves the lease to expire, charged.
pub fn settle(lease: Option<Lease>, cost_usd: Option<f64>) {
    if let Some(lease) = lease {
        let cost = cost_usd.unwrap_or(lease.amount_usd());
        if let Err(err) = lease.settle(cost) {
            tracing::warn!("cannot settle a shared-budget lease: {err}");
        }
    }
}

/// The ledger's sums at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Totals {
    pub cap_usd: f64,
    pub spent_usd: f64,
    pub expired_usd: f64,
    pub reserved_usd: f64,
    pub open_leases: usize,
}

/// One request's reservation. Settle it with what the request cost; dropped unsettled (a
/// request that failed, was cut or was aborted), it is charged at its worst case, since what
/// was streamed before the end may have been billed.
#[derive(Debug)]
pub struct Lease {
    budget: Arc<SharedBudget>,
    id: u64,
    amount_usd: f64,
    open: bool,
}

impl Lease {
    pub fn amount_usd(&self) -> f64 {
        self.amount_usd
    }

    /// Charges what the request cost, as the response's usage priced it.
    pub fn settle(mut self, cost: f64) -> Result<(), SharedBudgetError> {
        self.open = false;
        self.budget.end(self.id, cost)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.open
            && let Err(err) = self.budget.end(self.id, self.amount_usd)
        {
            // The lease expires and is charged then, at the same worst case.
            tracing::warn!("cannot charge a shared-budget lease: {err}");
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Whether process `pid` exists on this host (a process of another user still exists).
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 checks for existence and permission only; nothing is sent.
    let result = unsafe { libc::kill(pid, 0) };
    result == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// This host's name, so a lease's process is only looked for where it ran.
fn host_name() -> String {
    let mut buffer = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that.
    let result = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) };
    if result != 0 {
        return String::from("unknown");
    }
    let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).into_owned()
}

#[cfg(test)]
mod tests;

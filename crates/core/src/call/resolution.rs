//! What a call's decision is: allowed with the call to run, or refused, each naming who
//! answered. Made by `decide` alone; everyone else reads the answerer, never works it out.

use serde::Serialize;

use super::{PreparedCall, Unreached};
use crate::policy::{AllowBasis, PermissionDecision, Step};

/// Who had the last word on a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Answerer {
    /// The gate's pipeline, at this step: a rule, the tool's own check, a guardrail, an
    /// interaction requirement, bypassPermissions, plan mode.
    Gate(Step),
    /// No such tool in the run's pool, or an input its tool rejects.
    Pool,
    /// An explore sub-agent's read-only scope, which no rule, mode or hook can widen.
    Scope,
    /// A PreToolUse or PermissionRequest hook.
    Hook,
    /// Auto mode's fast path.
    FastPath,
    /// Auto mode's classifier.
    Classifier,
    /// An ask nobody answered, refused (or parked) by the headless mode.
    Mode(Awaited),
    /// A person's answer to a parked call (`tollgate approve`), on resume.
    Person,
}

/// Whom an ask the mode refused was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Awaited {
    /// A person: headless, nobody is there.
    Person,
    /// Auto mode's classifier, and none answered (none is configured).
    Classifier,
}

/// A call's decision.
pub enum Resolution {
    Allowed {
        by: Answerer,
        /// The decision as recorded.
        decision: PermissionDecision,
        /// The call to run: a hook's rewrite of the input when it made one.
        run: PreparedCall,
        /// What the allow rests on, for the sandbox.
        basis: AllowBasis,
    },
    Refused {
        by: Answerer,
        decision: PermissionDecision,
        /// The call as it was judged last (a hook's rewrite when that was refused); `None`
        /// when there was no call to prepare.
        judged: Option<PreparedCall>,
    },
    /// Neither run nor refused: the call waits for a person's answer (a `defer:` rule, the
    /// run's `--defer-asks`, a PreToolUse hook's `defer`). The decision records `defer`.
    Parked {
        by: Answerer,
        decision: PermissionDecision,
        /// The call as it was asked: what a person approves is exactly this.
        call: PreparedCall,
    },
}

impl Resolution {
    /// A call that never reached the gate, as `check` and `replay` report it.
    pub fn unreached(unreached: &Unreached) -> Resolution {
        Resolution::Refused {
            by: Answerer::Pool,
            decision: unreached.decision(),
            judged: None,
        }
    }

    pub fn by(&self) -> Answerer {
        match self {
            Resolution::Allowed { by, .. }
            | Resolution::Refused { by, .. }
            | Resolution::Parked { by, .. } => *by,
        }
    }

    pub fn decision(&self) -> &PermissionDecision {
        match self {
            Resolution::Allowed { decision, .. }
            | Resolution::Refused { decision, .. }
            | Resolution::Parked { decision, .. } => decision,
        }
    }

    pub fn is_allowed(&self) -> bool {
        matches!(self, Resolution::Allowed { .. })
    }

    /// The call as last judged, whether it runs or not.
    pub fn call(&self) -> Option<&PreparedCall> {
        match self {
            Resolution::Allowed { run, .. } => Some(run),
            Resolution::Refused { judged, .. } => judged.as_ref(),
            Resolution::Parked { call, .. } => Some(call),
        }
    }

    pub fn into_decision(self) -> PermissionDecision {
        match self {
            Resolution::Allowed { decision, .. }
            | Resolution::Refused { decision, .. }
            | Resolution::Parked { decision, .. } => decision,
        }
    }
}

//! The gate's answers: what a tool's own check says (`ToolCheck`), what the gate says
//! (`GateDecision`: allow, deny or a real ask) and the final, recorded answer
//! (`PermissionDecision`), each carrying the step, layer, rule and reason behind it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::rule::Rule;
use crate::config::SourceLocation;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    Ask,
    /// Parked: neither run nor refused; a person answers it later (`tollgate approve`)
    /// and a resumed run runs it or refuses it.
    Defer,
}

/// The pipeline step (S4) that produced the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    /// The tool is not in this run's pool, or its input is malformed.
    #[serde(rename = "0")]
    Pool,
    #[serde(rename = "1a")]
    WholeToolDeny,
    #[serde(rename = "1b")]
    WholeToolAsk,
    #[serde(rename = "1c")]
    ToolCheck,
    #[serde(rename = "1d")]
    ToolDeny,
    #[serde(rename = "1e")]
    RequiresInteraction,
    #[serde(rename = "1f")]
    ContentAsk,
    #[serde(rename = "1g")]
    Guardrail,
    #[serde(rename = "2a")]
    Bypass,
    #[serde(rename = "2b")]
    WholeToolAllow,
    #[serde(rename = "3")]
    Passthrough,
}

/// Which of the independent places that can stop a call had the last word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// A whole-tool or content rule from a policy.
    Rule,
    /// The tool's own check (workspace confinement, unproven Bash).
    Tool,
    /// A hard-coded safety guardrail.
    Guardrail,
    /// The tool needs a person.
    Interaction,
    /// The permission mode (dontAsk, headless default, plan, auto's fast path).
    Mode,
    /// A PreToolUse hook.
    Hook,
    /// The auto-mode classifier.
    Classifier,
    /// A person's answer to a parked call (`tollgate approve`).
    Person,
}

/// Refusals counted by the layer that made them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenialCounts {
    pub rule: u32,
    pub tool: u32,
    pub guardrail: u32,
    pub interaction: u32,
    pub mode: u32,
    pub hook: u32,
    pub classifier: u32,
    /// Parked calls a person denied.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub person: u32,
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

impl DenialCounts {
    pub fn count(&mut self, layer: Layer) {
        let slot = match layer {
            Layer::Rule => &mut self.rule,
            Layer::Tool => &mut self.tool,
            Layer::Guardrail => &mut self.guardrail,
            Layer::Interaction => &mut self.interaction,
            Layer::Mode => &mut self.mode,
            Layer::Hook => &mut self.hook,
            Layer::Classifier => &mut self.classifier,
            Layer::Person => &mut self.person,
        };
        *slot += 1;
    }

    /// (layer name, count) for reports.
    pub fn by_name(&self) -> [(&'static str, u32); 8] {
        [
            ("rule", self.rule),
            ("tool", self.tool),
            ("guardrail", self.guardrail),
            ("interaction", self.interaction),
            ("mode", self.mode),
            ("hook", self.hook),
            ("classifier", self.classifier),
            ("person", self.person),
        ]
    }
}

/// A rule as decisions cite it: its text and where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    pub rule: String,
    pub source: SourceLocation,
    /// A `defer:` rule: the ask it makes is parked for a person, not denied.
    #[serde(default, skip_serializing_if = "HeadlessAnswer::is_deny")]
    pub headless: HeadlessAnswer,
}

impl From<&Rule> for RuleRef {
    fn from(rule: &Rule) -> Self {
        RuleRef {
            rule: rule.text.clone(),
            source: rule.source.clone(),
            headless: rule.headless,
        }
    }
}

/// What a headless run makes of an ask only a person could answer: refuse it now, or park
/// the call for a person to approve or deny later (`tollgate approve`, then `--resume`).
/// Never applied to a deny: a parked call is one a person may still allow, so only an ask
/// is parked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadlessAnswer {
    /// Nobody is present: the ask is a deny (dontAsk, a headless default).
    #[default]
    Deny,
    /// The call is parked and the run ends `parked` once its turn's other calls landed.
    Defer,
}

impl HeadlessAnswer {
    pub fn is_deny(&self) -> bool {
        *self == HeadlessAnswer::Deny
    }
}

/// Why a tool's own check wants a person to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskCause {
    /// Not proven safe; bypassPermissions or an allow rule may still allow it.
    Unproven,
    /// A content-level ask rule matched (immune to bypass, step 1f).
    ContentRule(RuleRef),
    /// A safety guardrail matched (immune to bypass, step 1g).
    Guardrail(&'static str),
}

/// A tool's answer for one input (step 1c).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolCheck {
    Allow {
        reason: String,
        rule: Option<RuleRef>,
        updated_input: Option<Value>,
    },
    Deny {
        reason: String,
        rule: Option<RuleRef>,
    },
    Ask {
        reason: String,
        cause: AskCause,
    },
    /// The tool takes no position; `reason` says what an allow would have needed.
    Passthrough {
        reason: String,
    },
}

impl ToolCheck {
    /// The answer's name, as `check --explain` and tests print it.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolCheck::Allow { .. } => "allow",
            ToolCheck::Deny { .. } => "deny",
            ToolCheck::Ask { .. } => "ask",
            ToolCheck::Passthrough { .. } => "passthrough",
        }
    }

    /// Why, in the words the answer gives.
    pub fn reason(&self) -> &str {
        match self {
            ToolCheck::Allow { reason, .. }
            | ToolCheck::Deny { reason, .. }
            | ToolCheck::Ask { reason, .. }
            | ToolCheck::Passthrough { reason } => reason,
        }
    }
}

/// The gate's final, headless answer for one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionDecision {
    pub decision: Decision,
    pub step: Step,
    pub layer: Layer,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<RuleRef>,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_input: Option<Value>,
    /// The pipeline ended in an ask that the mode answered (headless: nobody could).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asked: bool,
}

impl PermissionDecision {
    pub fn is_allow(&self) -> bool {
        self.decision == Decision::Allow
    }
}

/// What an allow rested on, as far as running the call goes. A Bash command that only the
/// analyser's read-only proof allowed (no allow rule, no mode, no hook, no person) runs in
/// the kernel's read-only domain, so a wrong proof cannot write or connect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum AllowBasis {
    /// A rule, a mode, a hook, the classifier or a person allowed it: it runs as granted.
    #[default]
    Granted,
    /// The tool's own check allowed it because the analyser proved it read-only.
    ReadOnlyProof,
}

/// Why a decision was reached: the step, the layer that had the last word, the rule it cites
/// and the reason the model and the reports read.
#[derive(Debug, Clone, PartialEq)]
pub struct Grounds {
    pub step: Step,
    pub layer: Layer,
    pub rule: Option<RuleRef>,
    pub reason: String,
}

/// A call the gate could neither allow nor deny: a person would be asked. Headless, the
/// call's decision answers it (a PreToolUse hook, auto's fast path, the classifier) or denies it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub grounds: Grounds,
    /// Asks from 1b/1e/1f/1g are answered by a person only: no mode, fast path, hook or
    /// bypass turns them into allow.
    pub immune: bool,
}

/// The gate's answer for one call, before anyone resolves an ask.
#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision {
    Allow {
        grounds: Grounds,
        /// The input the tool's own check normalised the call into.
        updated_input: Option<Value>,
    },
    Deny(Grounds),
    Ask(Ask),
}

impl PermissionDecision {
    /// An allow; `asked` when it answered an ask.
    pub fn allow(grounds: Grounds, updated_input: Option<Value>, asked: bool) -> Self {
        let Grounds {
            step,
            layer,
            rule,
            reason,
        } = grounds;
        PermissionDecision {
            decision: Decision::Allow,
            step,
            layer,
            rule,
            reason,
            updated_input,
            asked,
        }
    }

    /// A deny; `asked` when nobody answered an ask.
    pub fn deny(grounds: Grounds, asked: bool) -> Self {
        let Grounds {
            step,
            layer,
            rule,
            reason,
        } = grounds;
        PermissionDecision {
            decision: Decision::Deny,
            step,
            layer,
            rule,
            reason,
            updated_input: None,
            asked,
        }
    }

    /// An ask parked for a person: not run, not refused.
    pub fn defer(grounds: Grounds) -> Self {
        PermissionDecision {
            decision: Decision::Defer,
            ..PermissionDecision::deny(grounds, true)
        }
    }

    pub fn is_defer(&self) -> bool {
        self.decision == Decision::Defer
    }
}

//! What happens to a call that never reaches the gate, in one place: no tool of that name in
//! the pool, an input that is garbled or its tool rejects, one sub-agent more than a turn may
//! start, or a call refused before and repeated verbatim. `run`, `check` and `replay` answer
//! the first two with the same words and grounds (step `pool`, layer `tool`), so a model told
//! "no such tool" in a run sees what `check` and `replay` say of the same call.

use std::sync::Arc;

use serde_json::Value;

use super::PreparedCall;
use crate::policy::{Grounds, Layer, PermissionDecision, Step};
use crate::tools::Tool;

/// What the model is told besides the earlier refusal, so it stops retrying.
pub const REPEATED: &str = "(This exact call was refused before; repeating it gets the same answer. Try another way or stop.)";

/// Why a call is answered without being judged.
#[derive(Debug, Clone, PartialEq)]
pub enum Unreached {
    /// No tool of that name in the pool; `more` follows the sentence (what the run offers,
    /// how to load a deferred tool), empty where the caller does not know it.
    NoSuchTool { name: String, more: String },
    /// The input is garbled (the provider could not read it) or its tool rejects it: what
    /// was wrong, in the words the model reads.
    Invalid(String),
    /// One sub-agent more than a turn may start (`subagents.max_per_turn`).
    OverSubagentCap { cap: u32 },
    /// The same call as one refused before in the same conversation: that refusal.
    Repeated(PermissionDecision),
}

/// How a run answers a call that never reached the gate.
#[derive(Debug, Clone, PartialEq)]
pub enum EarlyAnswer {
    /// A refusal: recorded as the call's decision and counted as a denial, so the denial
    /// limits see it like the gate's; the model reads `content`.
    Refused {
        decision: PermissionDecision,
        content: String,
    },
    /// Not run and not refused: a slip the model can correct (an input to fix, a sub-agent
    /// to start in a later turn), an error result with no decision, so a garbled input never
    /// counts toward ending the run as refused.
    NotRun(String),
}

impl Unreached {
    /// The decision `check` and `replay` report for the call: a refusal at the pool, or the
    /// earlier refusal a repeat gets.
    pub fn decision(&self) -> PermissionDecision {
        match self {
            Unreached::Repeated(earlier) => earlier.clone(),
            Unreached::NoSuchTool { .. }
            | Unreached::Invalid(_)
            | Unreached::OverSubagentCap { .. } => refused_at_pool(self.reason()),
        }
    }

    /// How a run answers it.
    pub fn answer(self) -> EarlyAnswer {
        match self {
            Unreached::NoSuchTool { .. } => {
                let decision = self.decision();
                EarlyAnswer::Refused {
                    content: decision.reason.clone(),
                    decision,
                }
            }
            Unreached::Repeated(earlier) => EarlyAnswer::Refused {
                content: format!("Permission denied: {} {REPEATED}", earlier.reason),
                decision: earlier,
            },
            Unreached::Invalid(_) | Unreached::OverSubagentCap { .. } => {
                EarlyAnswer::NotRun(self.reason())
            }
        }
    }

    fn reason(&self) -> String {
        match self {
            Unreached::NoSuchTool { name, more } => format!("No such tool available: {name}{more}"),
            Unreached::Invalid(problem) => problem.clone(),
            Unreached::OverSubagentCap { cap } => format!(
                "Not run: at most {cap} sub-agents per turn (subagents.max_per_turn = {cap}); start this one in a later turn"
            ),
            Unreached::Repeated(earlier) => earlier.reason.clone(),
        }
    }
}

/// The call prepared once, or why it never reaches the gate: `tool` is the pool's tool of
/// that name if it has one, `garbled` what the provider said of an input it could not read.
/// In that order, so a run, `check` and `replay` name the same first fault.
#[expect(
    clippy::result_large_err,
    reason = "the early answer is made once per call and used at once: boxing it only adds an allocation"
)]
pub fn prepare(
    name: &str,
    tool: Option<Arc<dyn Tool>>,
    input: Value,
    garbled: Option<&str>,
) -> Result<PreparedCall, Unreached> {
    let Some(tool) = tool else {
        return Err(Unreached::NoSuchTool {
            name: name.to_string(),
            more: String::new(),
        });
    };
    if let Some(problem) = garbled {
        return Err(Unreached::Invalid(problem.to_string()));
    }
    PreparedCall::prepare(tool, input).map_err(|err| Unreached::Invalid(err.to_string()))
}

/// The sub-agents one turn's calls start, counted in call order. Each is a conversation of
/// its own: past the cap a call is neither judged nor run, so one response cannot fan out
/// into many.
#[derive(Debug)]
pub struct SubagentCap {
    cap: u32,
    started: u32,
}

impl SubagentCap {
    pub fn new(cap: u32) -> SubagentCap {
        SubagentCap { cap, started: 0 }
    }

    /// Counts `call` if it would start a sub-agent: its early answer once that is one too
    /// many, else `None` (the call goes on to the gate).
    pub fn over(&mut self, call: &PreparedCall) -> Option<Unreached> {
        // A call that starts no sub-agent is not counted.
        call.delegation()?;
        self.started += 1;
        (self.started > self.cap).then_some(Unreached::OverSubagentCap { cap: self.cap })
    }
}

/// A refusal at the pool (step 0, layer `tool`), for `reason`: a `check --calls` line that
/// is not a call, a call outside an explore sub-agent's scope, or an [`Unreached`] call.
pub fn refused_at_pool(reason: String) -> PermissionDecision {
    PermissionDecision::deny(
        Grounds {
            step: Step::Pool,
            layer: Layer::Tool,
            rule: None,
            reason,
        },
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Decision, ToolName};

    #[test]
    fn the_pool_refusal_names_the_tool_and_what_follows() {
        let unknown = Unreached::NoSuchTool {
            name: "Fly".into(),
            more: ". Available tools: Read, Bash".into(),
        };
        let decision = unknown.decision();
        assert_eq!(
            decision.reason,
            "No such tool available: Fly. Available tools: Read, Bash"
        );
        assert_eq!(
            (decision.step, decision.layer, decision.rule.clone()),
            (Step::Pool, Layer::Tool, None)
        );
        assert!(!decision.asked);
        // The run refuses it with the very words check and replay report.
        assert_eq!(
            unknown.answer(),
            EarlyAnswer::Refused {
                content: decision.reason.clone(),
                decision
            }
        );
    }

    #[test]
    fn an_invalid_input_is_refused_by_check_and_an_error_result_in_a_run() {
        let read = crate::tools::builtin(&ToolName::Read);
        let Err(invalid) = prepare("Read", read.clone(), serde_json::json!({"path": "a"}), None)
        else {
            panic!("Read takes no `path`")
        };
        let decision = invalid.decision();
        assert_eq!(decision.decision, Decision::Deny);
        assert!(decision.reason.starts_with("invalid input for Read"));
        assert_eq!(invalid.answer(), EarlyAnswer::NotRun(decision.reason));
        // A missing tool is named before a garbled input, which is named before the
        // tool's own rejection.
        let garbled = Some("the input was not JSON");
        assert!(matches!(
            prepare("Fly", None, Value::Null, garbled),
            Err(Unreached::NoSuchTool { .. })
        ));
        assert_eq!(
            prepare("Read", read, serde_json::json!({"path": "a"}), garbled).err(),
            Some(Unreached::Invalid("the input was not JSON".into()))
        );
    }

    #[test]
    fn a_repeat_gets_the_earlier_refusal_and_says_so() {
        let earlier = refused_at_pool("no rm".into());
        let EarlyAnswer::Refused { decision, content } =
            Unreached::Repeated(earlier.clone()).answer()
        else {
            panic!("a repeat is a refusal")
        };
        assert_eq!(decision, earlier);
        assert_eq!(content, format!("Permission denied: no rm {REPEATED}"));
    }

    #[test]
    fn past_the_cap_a_sub_agent_call_is_not_run() {
        let agent = || {
            PreparedCall::prepare(
                crate::tools::builtin(&ToolName::Agent).unwrap(),
                serde_json::json!({"description": "d", "prompt": "p", "subagent_type": "general"}),
            )
            .unwrap()
        };
        let read = PreparedCall::prepare(
            crate::tools::builtin(&ToolName::Read).unwrap(),
            serde_json::json!({"file_path": "a"}),
        )
        .unwrap();
        let mut cap = SubagentCap::new(1);
        assert_eq!(cap.over(&agent()), None);
        assert_eq!(cap.over(&read), None);
        let over = cap.over(&agent()).unwrap();
        assert_eq!(
            over.answer(),
            EarlyAnswer::NotRun(
                "Not run: at most 1 sub-agents per turn (subagents.max_per_turn = 1); start this one in a later turn".into()
            )
        );
    }
}

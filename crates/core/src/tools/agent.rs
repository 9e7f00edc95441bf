//! Agent (S1): the model starts a sub-agent with a prompt — a built-in one or a custom agent
//! of the run's agent files. The tool only validates the request and answers the gate
//! (`Agent(explore)` / `Agent(general)` / `Agent(<name>)` rules, `Task(…)` being Claude Code's
//! older spelling); the agent loop runs the sub-agent's own conversation, since tools sit below
//! the loop.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::delegation::{AgentProfile, Delegation, Subagent, SubagentKind};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, parse_input};
use crate::base::wildcard_match;
use crate::policy::{
    AskCause, PermissionContext, RuleContent, RuleKind, RuleRef, ToolCheck, ToolName,
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInput {
    description: String,
    prompt: String,
    subagent_type: String,
}

struct AgentInput(Delegation);

/// The Agent tool over the built-in sub-agents and the run's custom agents (none for a run
/// without agent files).
#[derive(Default)]
pub struct AgentTool {
    custom: Vec<Arc<AgentProfile>>,
}

const DESCRIPTION: &str = "Starts a sub-agent with its own context on a self-contained job; its final message comes back as the result. \
     explore: reads and searches only (Read, Glob, Grep, read-only Bash) — use it to look around before you edit. \
     general: your tools except Agent. Give it everything it needs in the prompt: it sees nothing of this conversation.";

impl AgentTool {
    /// The tool offering `custom` besides the built-in kinds (their names were checked not
    /// to be a built-in's when the files were read).
    pub fn with_agents(custom: Vec<Arc<AgentProfile>>) -> AgentTool {
        AgentTool { custom }
    }

    /// An Agent tool that takes the `subagent_type` of `input`, when no built-in's, for a
    /// custom agent of that name: for deciding a call without the agent's file (`check`,
    /// `replay`), since `Agent(name)` rules judge the name alone and a custom agent is a
    /// general one, never read-only.
    pub fn naming(input: &Value) -> AgentTool {
        let custom = input
            .get("subagent_type")
            .and_then(Value::as_str)
            .filter(|wanted| SubagentKind::parse(wanted).is_none())
            .map(|wanted| {
                Arc::new(AgentProfile {
                    name: wanted.trim().to_string(),
                    description: String::new(),
                    tools: None,
                    disallowed: Vec::new(),
                    prompt: String::new(),
                    max_turns: None,
                    file: std::path::PathBuf::new(),
                })
            });
        AgentTool::with_agents(custom.into_iter().collect())
    }

    fn subagent(&self, name: &str) -> Option<Subagent> {
        if let Some(kind) = SubagentKind::parse(name) {
            return Some(Subagent::builtin(kind));
        }
        self.custom
            .iter()
            .find(|profile| profile.name.eq_ignore_ascii_case(name.trim()))
            .map(|profile| Subagent::custom(Arc::clone(profile)))
    }

    fn names(&self) -> Vec<&str> {
        SubagentKind::ALL
            .iter()
            .map(|kind| kind.as_str())
            .chain(self.custom.iter().map(|profile| profile.name.as_str()))
            .collect()
    }
}

impl Tool for AgentTool {
    fn name(&self) -> ToolName {
        ToolName::Agent
    }

    fn description(&self) -> Cow<'static, str> {
        if self.custom.is_empty() {
            return Cow::Borrowed(DESCRIPTION);
        }
        let mut text = format!("{DESCRIPTION} Custom sub-agents (with their own instructions):");
        for profile in &self.custom {
            text.push_str(&format!("\n- {}: {}", profile.name, profile.description));
        }
        Cow::Owned(text)
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A few words on what it is for"},
                "prompt": {"type": "string", "description": "The whole job, self-contained"},
                "subagent_type": {"type": "string", "enum": self.names()}
            },
            "required": ["description", "prompt", "subagent_type"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let raw: RawInput = parse_input(&self.name(), input)?;
        let agent = self.subagent(&raw.subagent_type).ok_or_else(|| {
            ToolError::Invalid(format!(
                "unknown subagent_type `{}`: use {}",
                raw.subagent_type,
                self.names().join(", ")
            ))
        })?;
        if raw.prompt.trim().is_empty() {
            return Err(ToolError::Invalid("the sub-agent needs a prompt".into()));
        }
        Ok(Box::new(AgentInput(Delegation {
            agent,
            description: raw.description,
            prompt: raw.prompt,
        })))
    }
}

/// The first `kind` rule whose content names `label`: compared case-insensitively, with `*`
/// matching any run of characters, so `Skill(*)` or `Skill(release-*)` as a deny rule
/// covers what it says rather than silently matching nothing (a deny rule must never miss
/// on case or on a wildcard).
fn literal_rule(
    ctx: &PermissionContext,
    tool: &ToolName,
    kind: RuleKind,
    label: &str,
) -> Option<RuleRef> {
    let label = label.to_ascii_lowercase();
    ctx.rules
        .content_rules(kind, tool)
        .find(|rule| {
            matches!(&rule.content, Some(RuleContent::Literal(content))
                if wildcard_match(&content.trim().to_ascii_lowercase(), &label))
        })
        .map(RuleRef::from)
}

/// `Tool(label)` rules, deny first; with none, an ask that only an allow rule (or the mode)
/// settles: starting a sub-agent spends the run's budget, so it is never allowed unseen.
pub fn check_literal(ctx: &PermissionContext, tool: &ToolName, label: &str) -> ToolCheck {
    if let Some(rule) = literal_rule(ctx, tool, RuleKind::Deny, label) {
        return ToolCheck::Deny {
            reason: format!("{tool}({label}) is denied by rule {}", rule.rule),
            rule: Some(rule),
        };
    }
    if let Some(rule) = literal_rule(ctx, tool, RuleKind::Ask, label) {
        return ToolCheck::Ask {
            reason: format!("{tool}({label}) needs approval by rule {}", rule.rule),
            cause: AskCause::ContentRule(rule),
        };
    }
    if let Some(rule) = literal_rule(ctx, tool, RuleKind::Allow, label) {
        return ToolCheck::Allow {
            reason: format!("{tool}({label}) is allowed by rule {}", rule.rule),
            rule: Some(rule),
            updated_input: None,
        };
    }
    ToolCheck::Passthrough {
        reason: format!("{tool}({label}) needs an allow rule such as {tool}({label})"),
    }
}

/// What the Agent rules say against starting a `kind` sub-agent by another route (an
/// agent-mode Skill): a whole-tool `Agent` deny or ask rule, or an `Agent(kind)` one. A
/// skill is repository content and must not start a sub-agent the policy keeps from the
/// Agent tool; `None` when no such rule applies (the caller's own rules then decide).
pub fn delegation_refusal(ctx: &PermissionContext, kind: SubagentKind) -> Option<ToolCheck> {
    let tool = ToolName::Agent;
    if let Some(rule) = ctx.rules.whole_tool(RuleKind::Deny, &tool) {
        return Some(ToolCheck::Deny {
            reason: format!("it starts a {kind} sub-agent, and {tool} is denied by rule {rule}"),
            rule: Some(RuleRef::from(rule)),
        });
    }
    if let Some(rule) = ctx.rules.whole_tool(RuleKind::Ask, &tool) {
        return Some(ToolCheck::Ask {
            reason: format!(
                "it starts a {kind} sub-agent, and {tool} needs approval by rule {rule}"
            ),
            cause: AskCause::ContentRule(RuleRef::from(rule)),
        });
    }
    match check_literal(ctx, &tool, kind.as_str()) {
        ToolCheck::Deny { reason, rule } => Some(ToolCheck::Deny {
            reason: format!("it starts a {kind} sub-agent: {reason}"),
            rule,
        }),
        ToolCheck::Ask { reason, cause } => Some(ToolCheck::Ask {
            reason: format!("it starts a {kind} sub-agent: {reason}"),
            cause,
        }),
        _ => None,
    }
}

impl ToolInput for AgentInput {
    // An explore sub-agent cannot write by construction; a general one may.
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        self.0.agent.read_only()
    }

    // Not concurrency-safe: sub-agents share the run's one provider (a script is consumed
    // in order), its budget (each request is admitted against the sum so far, which two
    // sub-agents in parallel would both pass), and its transcript. One at a time keeps all
    // three exact; the sub-agent's own calls still run in parallel where they may.
    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        false
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_literal(ctx, &ToolName::Agent, self.0.agent.name())
    }

    fn delegation(&self) -> Option<&Delegation> {
        Some(&self.0)
    }

    // The loop takes every delegating call before the scheduler would run it; should one
    // reach here, it fails rather than run a sub-agent without its own context.
    fn run<'a>(&'a self, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async {
            Err(ToolError::Failed(
                "a sub-agent runs only inside the agent loop".into(),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run with `--nocapture` for the bytes the README quotes (measured as the economy
    /// bench measures every built-in's definition).
    #[test]
    fn the_input_names_a_known_subagent_and_a_prompt() {
        let definition = json!({
            "name": AgentTool::default().name().to_string(),
            "description": AgentTool::default().description(),
            "input_schema": AgentTool::default().input_schema(),
        });
        eprintln!("Agent definition: {} bytes", definition.to_string().len());
        let prepare = |kind: &str, prompt: &str| {
            AgentTool::default()
                .prepare(&json!({"description": "d", "prompt": prompt, "subagent_type": kind}))
        };
        let explore = prepare("Explore", "look").unwrap();
        assert_eq!(
            explore.delegation().unwrap().agent,
            Subagent::builtin(SubagentKind::Explore)
        );
        crate::policy::with_test_context(|ctx| {
            assert!(explore.is_read_only(ctx));
            assert!(!explore.is_concurrency_safe(ctx));
        });
        let general = prepare("general", "edit").unwrap();
        crate::policy::with_test_context(|ctx| {
            assert!(!general.is_read_only(ctx));
        });
        assert_eq!(
            prepare("general-purpose", "x").err().unwrap().to_string(),
            "unknown subagent_type `general-purpose`: use explore, general"
        );
        assert!(prepare("explore", "  ").is_err());
        assert!(
            AgentTool::default()
                .prepare(&json!({"prompt": "p", "subagent_type": "explore"}))
                .is_err()
        );
    }

    /// Every spelling of the type and of the rule lands on the same decision, and an unknown
    /// type is refused rather than taken for general.
    #[test]
    fn agent_rules_hold_for_every_spelling_of_type_and_rule() {
        use crate::policy::{PermissionMode, Policy, PolicyOrigin, RuleSet, Workspace};
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let tool = || {
            AgentTool::with_agents(vec![Arc::new(AgentProfile {
                name: "reviewer".into(),
                description: "Reviews a diff".into(),
                tools: None,
                disallowed: vec![],
                prompt: "Review.".into(),
                max_turns: None,
                file: "reviewer.md".into(),
            })])
        };
        let check = |permissions: &str, subagent_type: &str| {
            let rules = RuleSet::from_policy(
                &Policy::parse(
                    &format!("permissions:\n{permissions}"),
                    PolicyOrigin {
                        file: std::path::Path::new("p.yaml"),
                        dir: std::path::Path::new("/"),
                        home: None,
                    },
                )
                .unwrap(),
            );
            let ctx = PermissionContext {
                mode: PermissionMode::BypassPermissions,
                rules: &rules,
                workspace: &workspace,
                disk: None,
                auto_allow_bash: false,
            };
            let Ok(input) = tool().prepare(
                &json!({"description": "d", "prompt": "p", "subagent_type": subagent_type}),
            ) else {
                return "invalid";
            };
            input.check_permissions(&ctx).kind()
        };
        let cases = [
            ("  deny: ['Agent(*)']\n", "general", "deny"),
            ("  deny: ['Agent(*)']\n", "explore", "deny"),
            ("  deny: ['Agent(gen*)']\n", " GENERAL ", "deny"),
            ("  deny: ['Agent(General)']\n", "general", "deny"),
            (
                "  allow: ['Agent(*)']\n  deny: ['Agent(*eral)']\n",
                "general",
                "deny",
            ),
            (
                "  allow: ['Agent(*)']\n  deny: ['Agent(*eral)']\n",
                "Explore",
                "allow",
            ),
            ("  ask: ['Agent(EXPLORE)']\n", "explore", "ask"),
            ("  allow: ['Agent(explore)']\n", "general", "passthrough"),
            ("  allow: ['Agent(*)']\n", "general-purpose", "invalid"),
            ("  allow: ['Agent(*)']\n", "", "invalid"),
            ("  allow: ['Agent(*)']\n", "explore\u{0}", "invalid"),
            ("  allow: ['Agent(*)']\n", "explorе", "invalid"),
            // A custom agent answers to its own name, in any case, and to Claude Code's
            // older `Task(…)` spelling; a rule for `general` does not start it.
            ("  deny: ['Agent(reviewer)']\n", "reviewer", "deny"),
            ("  deny: ['Task(reviewer)']\n", "Reviewer", "deny"),
            (
                "  allow: ['Agent(*)']\n  ask: ['Task(rev*)']\n",
                "reviewer",
                "ask",
            ),
            ("  allow: ['Agent(REVIEWER)']\n", "reviewer", "allow"),
            ("  allow: ['Task(reviewer)']\n", "reviewer", "allow"),
            ("  allow: ['Agent(general)']\n", "reviewer", "passthrough"),
            ("  allow: ['Agent(*)']\n", "reviewers", "invalid"),
        ];
        for (permissions, subagent_type, expected) in cases {
            assert_eq!(
                check(permissions, subagent_type),
                expected,
                "{subagent_type:?} under\n{permissions}"
            );
        }
    }
}

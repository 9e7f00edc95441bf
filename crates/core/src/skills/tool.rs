//! The Skill tool: lists the run's skills by name and description (in its own description, the
//! cheapest place: nothing is sent when the run has none) and loads one — injected as its
//! result, or delegated to a sub-agent — behind `Skill(name)` rules.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Skill, SkillMode};
use crate::policy::{PermissionContext, ToolCheck, ToolName, read_refusal};
use crate::tools::{
    Delegation, Subagent, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput,
    check_literal, delegation_refusal, parse_input,
};

pub struct SkillTool {
    skills: Arc<[Skill]>,
}

impl SkillTool {
    /// `None` without skills: a tool that can load nothing is not offered.
    pub fn new(skills: Vec<Skill>) -> Option<SkillTool> {
        (!skills.is_empty()).then(|| SkillTool {
            skills: skills.into(),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInput {
    skill: String,
    #[serde(default)]
    arguments: Option<String>,
}

struct SkillInput {
    skill: Skill,
    arguments: Option<String>,
    /// Set for an agent-mode skill.
    delegation: Option<Delegation>,
}

impl Tool for SkillTool {
    fn name(&self) -> ToolName {
        ToolName::Skill
    }

    fn description(&self) -> Cow<'static, str> {
        let mut text = String::from(
            "Loads a skill: instructions for one kind of job, written for this repository. \
             Use one when the job matches its description. Skills:",
        );
        for skill in self.skills.iter() {
            text.push_str(&format!("\n- {}: {}", skill.name, skill.description));
        }
        Cow::Owned(text)
    }

    fn input_schema(&self) -> Value {
        let names: Vec<&str> = self
            .skills
            .iter()
            .map(|skill| skill.name.as_str())
            .collect();
        json!({
            "type": "object",
            "properties": {
                "skill": {"type": "string", "enum": names},
                "arguments": {"type": "string", "description": "What to apply it to, if anything"}
            },
            "required": ["skill"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let raw: RawInput = parse_input(&self.name(), input)?;
        let skill = self
            .skills
            .iter()
            .find(|skill| skill.name == raw.skill)
            .cloned()
            .ok_or_else(|| {
                ToolError::Invalid(format!(
                    "no skill named `{}`; there are: {}",
                    raw.skill,
                    self.skills
                        .iter()
                        .map(|skill| skill.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        let arguments = raw.arguments.filter(|text| !text.trim().is_empty());
        let delegation = match skill.mode {
            SkillMode::Inject => None,
            SkillMode::Agent(kind) => Some(Delegation {
                agent: Subagent::builtin(kind),
                description: format!("skill {}", skill.name),
                prompt: instructions(&skill, arguments.as_deref()),
            }),
        };
        Ok(Box::new(SkillInput {
            skill,
            arguments,
            delegation,
        }))
    }
}

/// The skill's instructions, with what the caller asked it to work on.
fn instructions(skill: &Skill, arguments: Option<&str>) -> String {
    match arguments {
        Some(arguments) => format!("{}\n\nApply it to: {arguments}", skill.instructions),
        None => skill.instructions.clone(),
    }
}

impl ToolInput for SkillInput {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        self.delegation
            .as_ref()
            .is_none_or(|delegation| delegation.agent.read_only())
    }

    // Loading text may run beside anything; a sub-agent runs alone (see Agent).
    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        self.delegation.is_none()
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        // The instructions are the file's text: where Read may not see it, Skill may not
        // load it.
        for file in [&self.skill.file, &self.skill.resolved] {
            if let Some(refusal) =
                read_refusal(ctx.rules, ctx.workspace, &ToolName::Read, file, false)
            {
                return refusal;
            }
        }
        // An agent-mode skill starts a sub-agent: Agent rules against that kind hold too.
        if let Some(refusal) = self
            .delegation
            .as_ref()
            .and_then(|delegation| delegation_refusal(ctx, delegation.agent.kind))
        {
            return refusal;
        }
        check_literal(ctx, &ToolName::Skill, &self.skill.name)
    }

    fn delegation(&self) -> Option<&Delegation> {
        self.delegation.as_ref()
    }

    fn run<'a>(&'a self, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match &self.delegation {
                None => Ok(ToolOutput::new(format!(
                    "Skill `{}` loaded. Follow these instructions:\n\n{}",
                    self.skill.name,
                    instructions(&self.skill, self.arguments.as_deref())
                ))),
                // The loop runs an agent-mode skill; see `Delegation`.
                Some(_) => Err(ToolError::Failed(
                    "a sub-agent runs only inside the agent loop".into(),
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::SubagentKind;

    fn skill(name: &str, description: &str, mode: SkillMode) -> Skill {
        Skill {
            name: name.into(),
            description: description.into(),
            mode,
            instructions: format!("Do {name}."),
            file: format!("skills/{name}/SKILL.md").into(),
            resolved: format!("skills/{name}/SKILL.md").into(),
        }
    }

    /// Run with `--nocapture` for the bytes the README quotes: what the listing costs in
    /// every request, fixed part and per skill.
    #[test]
    fn each_skill_costs_one_line_and_an_agent_skill_delegates() {
        assert!(SkillTool::new(Vec::new()).is_none());
        let one = SkillTool::new(vec![skill("a", "Does a.", SkillMode::Inject)]).unwrap();
        let two = SkillTool::new(vec![
            skill("a", "Does a.", SkillMode::Inject),
            skill(
                "survey",
                "Surveys.",
                SkillMode::Agent(SubagentKind::Explore),
            ),
        ])
        .unwrap();
        let size = |tool: &SkillTool| {
            tool.name().to_string().len()
                + tool.description().len()
                + tool.input_schema().to_string().len()
        };
        eprintln!(
            "Skill tool with one skill: {} bytes; a second skill adds {}",
            size(&one),
            size(&two) - size(&one)
        );
        assert!(
            two.description()
                .ends_with("Skills:\n- a: Does a.\n- survey: Surveys.")
        );
        let injected = two.prepare(&json!({"skill": "a"})).unwrap();
        crate::policy::with_test_context(|ctx| {
            assert!(injected.delegation().is_none() && injected.is_concurrency_safe(ctx));
        });
        let delegated = two
            .prepare(&json!({"skill": "survey", "arguments": "src/"}))
            .unwrap();
        let delegation = delegated.delegation().unwrap();
        assert_eq!(delegation.agent.kind, SubagentKind::Explore);
        assert_eq!(delegation.prompt, "Do survey.\n\nApply it to: src/");
        crate::policy::with_test_context(|ctx| {
            assert!(delegated.is_read_only(ctx) && !delegated.is_concurrency_safe(ctx));
        });
        let unknown = two.prepare(&json!({"skill": "nope"})).err().unwrap();
        assert_eq!(
            unknown.to_string(),
            "no skill named `nope`; there are: a, survey"
        );
    }

    /// `Skill(name)` rules decide, and where Read may not see the SKILL.md, Skill may not
    /// load it whatever they say.
    #[test]
    fn skill_rules_and_read_rules_on_its_file_gate_it() {
        use crate::policy::{Policy, PolicyOrigin, RuleSet, Workspace};
        let tool = SkillTool::new(vec![Skill {
            file: "/ws/skills/a/SKILL.md".into(),
            ..skill("a", "Does a.", SkillMode::Inject)
        }])
        .unwrap();
        let input = tool.prepare(&json!({"skill": "a"})).unwrap();
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let check = |policy: &str| {
            let rules = RuleSet::from_policy(
                &Policy::parse(
                    policy,
                    PolicyOrigin {
                        file: std::path::Path::new("p.yaml"),
                        dir: std::path::Path::new("/"),
                        home: None,
                    },
                )
                .unwrap(),
            );
            let ctx = PermissionContext {
                mode: crate::policy::PermissionMode::DontAsk,
                rules: &rules,
                workspace: &workspace,
                disk: None,
                auto_allow_bash: false,
            };
            input.check_permissions(&ctx).kind()
        };
        assert_eq!(check("permissions: {}\n"), "passthrough");
        assert_eq!(check("permissions:\n  allow: ['Skill(a)']\n"), "allow");
        assert_eq!(
            check("permissions:\n  allow: ['Skill(b)']\n"),
            "passthrough"
        );
        assert_eq!(
            check("permissions:\n  allow: ['Skill(a)']\n  deny: ['Skill(a)']\n"),
            "deny"
        );
        assert_eq!(
            check("permissions:\n  allow: ['Skill(a)']\n  deny: ['Read(skills/**)']\n"),
            "deny"
        );
    }

    /// Every route past a rule that should stop a skill: a wildcard or another case in the
    /// `Skill(…)` rule, an agent-mode skill under `Agent` rules (whole tool, its kind, any
    /// spelling), a `SKILL.md` reached through a link into a denied folder.
    #[test]
    fn no_spelling_or_route_gets_a_skill_past_a_rule() {
        use crate::policy::{Policy, PolicyOrigin, RuleSet, Workspace};
        let located = |name: &str, mode| Skill {
            file: format!("/ws/skills/{name}/SKILL.md").into(),
            resolved: format!("/ws/skills/{name}/SKILL.md").into(),
            ..skill(name, "Does it.", mode)
        };
        let tool = SkillTool::new(vec![
            located("a", SkillMode::Inject),
            located("survey", SkillMode::Agent(SubagentKind::Explore)),
            located("fixer", SkillMode::Agent(SubagentKind::General)),
            Skill {
                resolved: "/ws/private/SKILL.md".into(),
                ..located("linked", SkillMode::Inject)
            },
        ])
        .unwrap();
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let check = |permissions: &str, name: &str| {
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
                mode: crate::policy::PermissionMode::BypassPermissions,
                rules: &rules,
                workspace: &workspace,
                disk: None,
                auto_allow_bash: false,
            };
            let input = tool.prepare(&json!({ "skill": name })).unwrap();
            input.check_permissions(&ctx).kind()
        };
        let cases = [
            ("  allow: ['Skill(*)']\n", "a", "allow"),
            ("  allow: ['Skill(a)']\n  deny: ['Skill(*)']\n", "a", "deny"),
            (
                "  allow: ['Skill(a)']\n  deny: ['Skill(A*)']\n",
                "a",
                "deny",
            ),
            (
                "  allow: ['Skill(a)']\n  deny: ['Skill( A )']\n",
                "a",
                "deny",
            ),
            (
                "  allow: ['Skill(*)']\n  deny: ['Skill(surv*)']\n",
                "survey",
                "deny",
            ),
            (
                "  allow: ['Skill(*)']\n  deny: ['Skill(*ey)']\n",
                "survey",
                "deny",
            ),
            (
                "  allow: ['Skill(*)']\n  deny: ['Skill(surv*)']\n",
                "a",
                "allow",
            ),
            (
                "  allow: ['Skill(fixer)']\n  deny: ['Agent']\n",
                "fixer",
                "deny",
            ),
            (
                "  allow: ['Skill(fixer)']\n  deny: ['Agent(general)']\n",
                "fixer",
                "deny",
            ),
            (
                "  allow: ['Skill(fixer)']\n  deny: ['Agent(GENERAL)']\n",
                "fixer",
                "deny",
            ),
            (
                "  allow: ['Skill(fixer)']\n  deny: ['Agent(*)']\n",
                "fixer",
                "deny",
            ),
            (
                "  allow: ['Skill(fixer)']\n  ask: ['Agent(general)']\n",
                "fixer",
                "ask",
            ),
            (
                "  allow: ['Skill(fixer)']\n  ask: ['Agent']\n",
                "fixer",
                "ask",
            ),
            (
                "  allow: ['Skill(survey)']\n  deny: ['Agent(explore)']\n",
                "survey",
                "deny",
            ),
            (
                "  allow: ['Skill(survey)']\n  deny: ['Agent(general)']\n",
                "survey",
                "allow",
            ),
            ("  allow: ['Skill(a)']\n  deny: ['Agent']\n", "a", "allow"),
            ("  allow: ['Skill(linked)']\n", "linked", "allow"),
            (
                "  allow: ['Skill(linked)']\n  deny: ['Read(//ws/private/**)']\n",
                "linked",
                "deny",
            ),
            (
                "  allow: ['Skill(linked)']\n  deny: ['Read(//ws/skills/**)']\n",
                "linked",
                "deny",
            ),
        ];
        for (permissions, name, expected) in cases {
            assert_eq!(
                check(permissions, name),
                expected,
                "{name} under\n{permissions}"
            );
        }
    }
}

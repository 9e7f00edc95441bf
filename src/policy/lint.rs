//! `policy lint`: what a reviewer should know about a policy before it guards a run — allow
//! rules that hand out more than they seem to, and rules that can never match.

use super::file::Policy;
use super::rule::{Rule, RuleContent, RuleKind};
use super::tool_name::ToolName;
use crate::bash::CommandPattern;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LintWarning {
    pub rule: String,
    pub source: String,
    pub message: String,
}

/// `implemented` says whether tollgate has a tool of that name (Agent and Skill always count:
/// they are tollgate's even where a run offers neither).
pub fn lint(policy: &Policy, implemented: &dyn Fn(&ToolName) -> bool) -> Vec<LintWarning> {
    let mut warnings = Vec::new();
    for rule in &policy.rules {
        let mut warn = |message: String| {
            warnings.push(LintWarning {
                rule: rule.text.clone(),
                source: rule.source.to_string(),
                message,
            })
        };
        if let Some(danger) = danger(rule).or_else(|| reach(rule)) {
            warn(format!("dangerous allow rule: {danger}"));
        }
        if rule.kind == RuleKind::Deny {
            continue;
        }
        let is_mcp = matches!(rule.tool, ToolName::Mcp { .. });
        let always = matches!(rule.tool, ToolName::Agent | ToolName::Skill);
        if !is_mcp && !always && !implemented(&rule.tool) {
            let close = rule
                .tool
                .close_builtin()
                .map(|close| format!("; did you mean `{close}`?"))
                .unwrap_or_default();
            warn(format!(
                "never matches: tollgate has no {} tool{close}",
                rule.tool
            ));
            continue;
        }
        if let Some(denied) = policy.rules.iter().find(|other| {
            other.kind == RuleKind::Deny && other.is_whole_tool() && other.tool.covers(&rule.tool)
        }) {
            warn(format!(
                "never matches: {} is denied whole by {} at {}",
                rule.tool, denied.text, denied.source
            ));
            continue;
        }
        if let Some(RuleContent::Literal(content)) = &rule.content
            && !matches!(rule.tool, ToolName::Agent | ToolName::Skill)
        {
            warn(format!(
                "never matches: {} takes no `{content}` content",
                rule.tool
            ));
        }
        if let Some(twin) = policy.rules.iter().find(|other| {
            other.kind == RuleKind::Deny && other.tool == rule.tool && other.content == rule.content
        }) {
            warn(format!(
                "never matches: the same rule is denied at {}",
                twin.source
            ));
        }
    }
    warnings
}

/// What an allow rule lets commands destroy or reach that a reviewer should see: deleting
/// files, discarding work, the network. Warned about at load and by lint; not "dangerous" in
/// `danger`'s sense (which auto mode drops), since such a rule may be just what a task needs.
pub fn reach(rule: &Rule) -> Option<&'static str> {
    if rule.kind != RuleKind::Allow || rule.tool != ToolName::Bash {
        return None;
    }
    let Some(RuleContent::Command(pattern)) = &rule.content else {
        return None;
    };
    let open = !matches!(pattern, CommandPattern::Exact(_));
    let words: Vec<&str> = pattern.words().iter().map(String::as_str).collect();
    let name = words.first().map(|w| w.rsplit('/').next().unwrap_or(w));
    let second = words.get(1).copied();
    match name? {
        "rm" | "rmdir" | "unlink" | "shred" | "dd" | "truncate" => {
            Some("it deletes or overwrites files anywhere it is pointed (`rm -rf ~`)")
        }
        "git" => match second {
            None if open => {
                Some("`git checkout -- .`, `git reset --hard` and `git clean` discard work")
            }
            Some("checkout" | "restore" | "reset" | "clean" | "stash" | "switch")
                if open
                    || words
                        .iter()
                        .any(|w| matches!(*w, "--" | "." | "-f" | "--force" | "--hard")) =>
            {
                Some("it discards uncommitted work (`git checkout -- .`, `git reset --hard`)")
            }
            Some("push") if open => {
                Some("it publishes and can overwrite remote history (`--force`)")
            }
            _ => None,
        },
        "gh" if open && matches!(second, None | Some("api")) => {
            Some("`gh api` calls any GitHub endpoint with the runner's token (`-X DELETE`)")
        }
        "curl" | "wget" | "nc" | "ncat" | "netcat" | "ssh" | "scp" | "sftp" | "rsync" | "ftp"
        | "telnet" | "socat" => {
            Some("it reaches the network: it can fetch code to run or send the workspace out")
        }
        _ => None,
    }
}

/// Why an allow rule hands out more than it seems to, if it does (checked at load and by lint).
pub fn danger(rule: &Rule) -> Option<&'static str> {
    if rule.kind != RuleKind::Allow || rule.tool != ToolName::Bash {
        return None;
    }
    match &rule.content {
        None => Some("allows every command"),
        Some(RuleContent::Command(pattern)) => CommandPattern::danger(pattern),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::policy::PolicyOrigin;

    #[test]
    fn lint_finds_dangerous_and_dead_rules() {
        let policy = Policy::parse(
            "permissions:\n  allow: [Bash, 'Bash(python:*)', 'Bash(npm test:*)', WebSearch, 'Read(src/**)', 'Grep(x)', WebFetch, 'TodoWrite(x)']\n  ask: ['Bash(rm:*)']\n  deny: ['Bash(rm:*)', WebFetch, Nope]\n",
            PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let implemented =
            |tool: &ToolName| !matches!(tool, ToolName::Other(_) | ToolName::TodoWrite);
        let found: Vec<(String, String)> = lint(&policy, &implemented)
            .into_iter()
            .map(|w| {
                (
                    w.rule,
                    w.message.split(':').next().unwrap_or_default().to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = [
            ("Bash(rm:*)", "never matches"),
            ("Bash", "dangerous allow rule"),
            ("Bash(python:*)", "dangerous allow rule"),
            ("WebSearch", "never matches"),
            ("WebFetch", "never matches"),
            ("TodoWrite(x)", "never matches"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(found, expected);
    }

    /// A file shaped like the ones that let `check` allow `rm -rf ~` without a word: each
    /// destructive or networked allow rule is warned about; Claude Code's tool names Skill,
    /// Agent and its older `Task` are tollgate's.
    #[test]
    fn destructive_and_networked_allow_rules_are_warned_about() {
        let policy = Policy::parse(
            r#"{"permissions": {"allow": ["Bash(rm:*)", "Bash(gh:*)", "Bash(git checkout:*)", "Bash(git checkout -- .)", "Bash(gh api:*)", "Bash(curl:*)", "Bash(wget https://x.org/a)", "Bash(bash -c:*)", "Bash(python3:*)", "Bash(pnpm dlx:*)", "Bash(npx:*)", "Bash(npm exec:*)", "Bash(rm -rf /*)", "Bash(git status)", "Bash(gh pr view:*)", "Bash(git checkout main)", "Skill(release-notes)", "Agent(general)", "Task(Explore)", "Task"], "deny": ["Bash(curl -X POST:*)"]}}"#,
            PolicyOrigin { file: Path::new("settings.json"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let implemented = |tool: &ToolName| {
            !matches!(tool, ToolName::Other(_) | ToolName::Skill | ToolName::Agent)
        };
        let warned: Vec<String> = lint(&policy, &implemented)
            .into_iter()
            .map(|w| {
                assert!(w.message.starts_with("dangerous allow rule: "), "{w:?}");
                w.rule
            })
            .collect();
        assert_eq!(
            warned,
            [
                "Bash(rm:*)",
                "Bash(gh:*)",
                "Bash(git checkout:*)",
                "Bash(git checkout -- .)",
                "Bash(gh api:*)",
                "Bash(curl:*)",
                "Bash(wget https://x.org/a)",
                "Bash(bash -c:*)",
                "Bash(python3:*)",
                "Bash(pnpm dlx:*)",
                "Bash(npx:*)",
                "Bash(npm exec:*)",
                "Bash(rm -rf /*)",
            ]
        );
        assert!(
            policy
                .rules
                .iter()
                .filter(|r| r.text.starts_with("Task"))
                .all(|r| r.tool == ToolName::Agent)
        );
    }
}

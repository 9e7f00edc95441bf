//! Bash: runs a command with `bash -c` in the workdir, in its own process group (so a timeout
//! or an interrupt kills everything it started), with captured, bounded output.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::shell::{ShellEnding, run_shell};
use super::text::truncate_middle;
use super::{
    Tool, ToolContext, ToolError, ToolFuture, ToolOutput, invalid_input_check, parse_input,
};
use crate::bash::plain_words;
use crate::policy::{
    AskCause, PermissionContext, RuleContent, RuleKind, RuleRef, ToolCheck, ToolName,
};

/// The most a single call may ask for, whatever the model requests.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// What the model sees of a command's output; the middle goes first.
const BASH_OUTPUT_CHARS: usize = 30_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BashInput {
    command: String,
    /// Milliseconds.
    timeout: Option<u64>,
    description: Option<String>,
}

pub struct BashTool;

impl Tool for BashTool {
    fn name(&self) -> ToolName {
        ToolName::Bash
    }

    fn description(&self) -> &'static str {
        "Runs a shell command with bash in the workdir and returns its output and exit code. \
         Commands run unattended: anything the permission policy does not allow is refused."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run"},
                "timeout": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds"},
                "description": {"type": "string", "description": "What the command does, in a few words"}
            },
            "required": ["command"],
            "additionalProperties": false
        })
    }

    fn validate_input(&self, input: &Value) -> Result<(), ToolError> {
        let bash: BashInput = parse_input(&self.name(), input)?;
        if bash.command.trim().is_empty() {
            return Err(ToolError::new("command is empty"));
        }
        Ok(())
    }

    fn check_permissions(&self, input: &Value, ctx: &PermissionContext) -> ToolCheck {
        match parse_input::<BashInput>(&self.name(), input) {
            Ok(bash) => check_command(&bash.command, ctx),
            Err(err) => invalid_input_check(err),
        }
    }

    fn call<'a>(&'a self, input: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let bash: BashInput = parse_input(&self.name(), &input)?;
            let _ = bash.description;
            let timeout = bash
                .timeout
                .map(Duration::from_millis)
                .unwrap_or(ctx.limits.bash_timeout)
                .min(MAX_TIMEOUT);
            run(&bash.command, ctx, timeout).await
        })
    }
}

/// Until the full analyser lands, only plain words are understood: anything else is
/// unproven and asks (headless: denied). Rules match the resolved argv on word boundaries.
fn check_command(command: &str, ctx: &PermissionContext) -> ToolCheck {
    let Some(argv) = plain_words(command) else {
        return ToolCheck::Ask {
            reason: format!(
                "`{command}` is more than plain words (operators, expansions, redirections or newlines) and cannot be proven safe"
            ),
            cause: AskCause::Unproven,
        };
    };
    let find = |kind| {
        ctx.rules
            .content_rules(kind, &ToolName::Bash)
            .find(|rule| matches!(&rule.content, Some(RuleContent::Command(pattern)) if pattern.matches(&argv)))
            .map(RuleRef::from)
    };
    if let Some(rule) = find(RuleKind::Deny) {
        return ToolCheck::Deny {
            reason: format!("`{command}` is denied by rule {}", rule.rule),
            rule: Some(rule),
        };
    }
    if let Some(rule) = find(RuleKind::Ask) {
        return ToolCheck::Ask {
            reason: format!("`{command}` needs approval by rule {}", rule.rule),
            cause: AskCause::ContentRule(rule),
        };
    }
    if let Some(rule) = find(RuleKind::Allow) {
        return ToolCheck::Allow {
            reason: format!("`{command}` is allowed by rule {}", rule.rule),
            rule: Some(rule),
            updated_input: None,
        };
    }
    ToolCheck::Passthrough {
        reason: format!("no rule allows `{command}`"),
    }
}

async fn run(command: &str, ctx: &ToolContext, timeout: Duration) -> Result<ToolOutput, ToolError> {
    let run = run_shell(command, &ctx.workspace.workdir, timeout, &ctx.abort, true)
        .await
        .map_err(|err| ToolError::new(format!("cannot start bash: {err}")))?;
    let output = truncate_middle(run.output.trim_end(), BASH_OUTPUT_CHARS);
    let with_note =
        |note: String| ToolError::new(format!("{output}\n[{note}]").trim_start().to_string());
    match run.ending {
        ShellEnding::Exited(Some(0)) if output.is_empty() => Ok(ToolOutput::new("(no output)")),
        ShellEnding::Exited(Some(0)) => Ok(ToolOutput::new(output)),
        ShellEnding::Exited(Some(code)) => Err(with_note(format!("exit code {code}"))),
        ShellEnding::Exited(None) => Err(with_note("killed by a signal".into())),
        ShellEnding::TimedOut => Err(with_note(format!(
            "timed out after {}s; the command and its children were killed",
            timeout.as_secs_f32()
        ))),
        ShellEnding::Aborted => Err(with_note(
            "interrupted; the command and its children were killed".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::policy::{PermissionMode, Policy, RuleSet, Workspace};
    use crate::tools::{AbortHandle, FileStateCache, ToolLimits};

    fn context(dir: &Path) -> (ToolContext, AbortHandle) {
        let (handle, abort) = AbortHandle::new();
        let ctx = ToolContext {
            workspace: Arc::new(Workspace::new(dir.to_path_buf(), vec![], None)),
            limits: ToolLimits::default(),
            abort,
            files: FileStateCache::default(),
        };
        (ctx, handle)
    }

    #[tokio::test]
    async fn failures_and_timeouts_become_error_results() {
        let dir = tempfile::tempdir().unwrap();
        let (ctx, _handle) = context(dir.path());
        assert_eq!(
            run("true", &ctx, Duration::from_secs(10))
                .await
                .unwrap()
                .content,
            "(no output)"
        );
        let failed = run("echo out; exit 3", &ctx, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(failed.0, "out\n[exit code 3]");
        let slow = run("sleep 5", &ctx, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(slow.0.starts_with("[timed out after 0.2s"), "{slow}");
    }

    #[test]
    fn rules_apply_to_plain_words_only() {
        let policy = Policy::parse(
            "permissions:\n  allow: ['Bash(git status)', 'Bash(npm test:*)']\n  deny: ['Bash(rm:*)']\n  ask: ['Bash(git push:*)']\n",
            crate::policy::PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            mode: PermissionMode::Default,
            rules: &rules,
            workspace: &workspace,
        };
        let kind = |command: &str| match check_command(command, &ctx) {
            ToolCheck::Allow { .. } => "allow",
            ToolCheck::Deny { .. } => "deny",
            ToolCheck::Ask {
                cause: AskCause::ContentRule(_),
                ..
            } => "ask-rule",
            ToolCheck::Ask { .. } => "ask",
            ToolCheck::Passthrough { .. } => "passthrough",
        };
        let cases = [
            ("git status", "allow"),
            ("npm test -- -x", "allow"),
            ("npm testx", "passthrough"),
            ("rm -rf build", "deny"),
            ("\\rm -rf build", "deny"),
            ("/bin/rm x", "deny"),
            ("git push origin main", "ask-rule"),
            ("git status && rm -rf /", "ask"),
            ("echo $(rm x)", "ask"),
            ("ls", "passthrough"),
        ];
        for (command, expected) in cases {
            assert_eq!(kind(command), expected, "{command}");
        }
    }
}

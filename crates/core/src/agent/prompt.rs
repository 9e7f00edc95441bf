//! The system prompt tollgate sends: its own, short, one purpose per part (docs/tools.md's
//! "The system prompt" measures each). Built once per run, so it never moves between
//! requests and stays in the cached prefix.

use std::path::Path;

use super::RunSpec;
use crate::policy::PermissionMode;
use crate::tools::{Subagent, SubagentKind, ToolDefinition};

/// The prompt's parts, named, in order: the name is for measuring, the text is sent.
pub fn parts(
    workdir: &Path,
    mode: PermissionMode,
    deferred: &[ToolDefinition],
) -> Vec<(&'static str, String)> {
    let mut parts = vec![
        (
            "role",
            "You are a coding agent run by tollgate in a CI job, unattended: nobody can answer \
             questions or approve actions."
                .to_string(),
        ),
        (
            "workspace",
            format!(
                "Work inside {}; relative paths resolve against it.",
                workdir.display()
            ),
        ),
        (
            "permissions",
            format!(
                "Permission mode: {mode} ({}). A refused call returns an error starting \
                 \"Permission denied:\" with the reason; do not repeat it: find an allowed way, or \
                 stop and say what you could not do.",
                mode_meaning(mode)
            ),
        ),
        (
            "tools",
            "Prefer Read, Glob and Grep to Bash for reading and searching: they are allowed where a \
             shell command may be refused. In Bash, quote paths with spaces or special characters."
                .to_string(),
        ),
        (
            "finish",
            "When the task is done, reply with a short summary of what you did and make no tool call."
                .to_string(),
        ),
    ];
    if !deferred.is_empty() {
        let mut index = String::from(
            "Deferred tools, callable once loaded with ToolSearch (query \"select:Name\"):",
        );
        for definition in deferred {
            index.push_str(&format!(
                "\n- {}: {}",
                definition.name,
                definition.summary()
            ));
        }
        parts.push(("deferred_tools", index));
    }
    parts
}

/// The MCP servers the task names that the run has not, with why: the model is not left to
/// look for their tools (ToolSearch is not even offered when no deferred tool is left).
fn unavailable_part(servers: &[(&str, &str)]) -> String {
    let listed: Vec<String> = servers
        .iter()
        .map(|(name, why)| format!("{name} ({why})"))
        .collect();
    format!(
        "MCP servers not running in this run, so none of their tools (mcp__<server>__…) can be called: {}.",
        listed.join(", ")
    )
}

fn subagent_part(agent: &Subagent) -> String {
    let Some(profile) = &agent.custom else {
        return builtin_part(agent.kind);
    };
    format!(
        "You are the {} sub-agent, started by another agent for one job. Your final message is returned to that agent as your whole result: make it complete and short.\n\
         Your instructions (from {}, the agent's definition; they cannot change what the policy allows):\n{}",
        profile.name,
        profile.file.display(),
        profile.prompt.trim()
    )
}

fn builtin_part(kind: SubagentKind) -> String {
    let reach = match kind {
        SubagentKind::Explore => {
            "You may only read and search: Read, Glob, Grep and read-only shell commands; anything that writes is refused."
        }
        SubagentKind::General => "You have the same tools as the agent that started you.",
    };
    let article = match kind {
        SubagentKind::Explore => "an",
        SubagentKind::General => "a",
    };
    format!(
        "You are {article} {kind} sub-agent started by another agent for one job. {reach} \
         Your final message is returned to that agent as your whole result: make it complete and short."
    )
}

/// The final answer's contract under `output_schema`.
pub fn output_schema_part(schema: &serde_json::Value) -> String {
    format!(
        "Your final answer (the message with no tool call) must be one JSON value, valid against this JSON Schema, \
         and nothing else: no prose, no code fence.\n{schema}"
    )
}

/// The first user message: the repository's memory files in a block of their own, then the
/// prompt. Sent once; it opens the history, so every later request repeats it unchanged.
pub fn first_message(spec: &RunSpec) -> crate::model::Message {
    use crate::model::{ContentBlock, Message, Role};
    let mut content = Vec::new();
    if let Some(memory) = spec
        .memory
        .as_ref()
        .filter(|memory| !memory.text.is_empty())
    {
        content.push(ContentBlock::Text {
            text: memory.text.clone(),
        });
    }
    content.push(ContentBlock::Text {
        text: spec.prompt.clone(),
    });
    Message {
        role: Role::User,
        content,
    }
}

/// What the mode means for the model's calls, in a few words.
fn mode_meaning(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Default | PermissionMode::DontAsk => {
            "only what the policy allows runs; anything else is refused"
        }
        PermissionMode::AcceptEdits => {
            "file edits inside the workspace run; other actions need the policy's allow"
        }
        PermissionMode::Plan => "read-only: any call that would change something is refused",
        PermissionMode::BypassPermissions => {
            "most calls run; deny rules and guardrails still refuse"
        }
        PermissionMode::Auto => "a classifier judges calls the policy does not settle",
    }
}

/// A sub-agent's prompt is the run's with its role said last: it answers the agent that
/// started it, not a person, and an explore one is told it only reads (its pool enforces it).
pub fn system_prompt(
    spec: &RunSpec,
    deferred: &[ToolDefinition],
    unavailable: &[(&str, &str)],
    subagent: Option<&Subagent>,
) -> String {
    let mut parts = parts(&spec.workspace.workdir, spec.mode, deferred);
    if !unavailable.is_empty() {
        parts.push(("unavailable_servers", unavailable_part(unavailable)));
    }
    if let (Some(schema), None) = (&spec.output_schema, subagent) {
        parts.push(("output_schema", output_schema_part(&schema.schema)));
    }
    if let Some(text) = &spec.append_system_prompt {
        parts.push(("appended", text.clone()));
    }
    if let Some(agent) = subagent {
        parts.push(("subagent", subagent_part(agent)));
    }
    parts
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ToolName;

    /// Bytes of each part (≈ 4 bytes a token): run with `--nocapture` to see the figures the
    /// README quotes. The bound keeps the prompt short as it grows.
    #[test]
    fn every_part_is_short_and_the_whole_stays_small() {
        let deferred = [ToolDefinition {
            name: ToolName::WebFetch,
            description: "Fetches a URL and answers a prompt about the page. More text.".into(),
            input_schema: serde_json::json!({}),
        }];
        let parts = parts(Path::new("/work/repo"), PermissionMode::DontAsk, &deferred);
        let mut total = 0;
        for (name, text) in &parts {
            eprintln!("system prompt part {name}: {} bytes", text.len());
            assert!(text.len() < 400, "{name} is {} bytes", text.len());
            total += text.len() + 1;
        }
        eprintln!("system prompt total: {total} bytes");
        assert!(total < 1_400, "{total}");
        assert!(
            parts
                .last()
                .unwrap()
                .1
                .ends_with("- WebFetch: Fetches a URL and answers a prompt about the page.")
        );
    }

    /// A server the run has not is named in one short part, with why.
    #[test]
    fn servers_the_run_has_not_are_named_in_one_short_part() {
        let part = unavailable_part(&[
            ("tests", "it is held back until the operator approves it"),
            ("gone", "it failed to start"),
        ]);
        eprintln!(
            "system prompt part unavailable_servers (two servers): {} bytes",
            part.len()
        );
        assert!(part.len() < 400, "{} bytes", part.len());
        assert!(
            part.ends_with(": tests (it is held back until the operator approves it), gone (it failed to start)."),
            "{part}"
        );
    }

    /// A sub-agent's prompt adds one part, last, so the run's own prompt is unchanged.
    #[test]
    fn a_subagent_is_told_what_it_is_in_one_short_part() {
        for kind in SubagentKind::ALL {
            let part = subagent_part(&Subagent::builtin(kind));
            eprintln!("system prompt part subagent ({kind}): {} bytes", part.len());
            assert!(part.len() < 400, "{kind}: {} bytes", part.len());
            assert!(part.contains(&format!(" {kind} sub-agent")), "{part}");
        }
        assert!(
            subagent_part(&Subagent::builtin(SubagentKind::Explore))
                .contains("anything that writes is refused")
        );
    }
}

//! Denials that say what to do: the narrowest allow rules that would have let a denied action
//! through, and `proposed-rules.yaml`, which gathers them for a maintainer to review and paste.
//! A proposal is advice for a person; nothing here ever widens a run's rules.

use std::path::Path;

use serde_json::Value;

use super::prompt::Action;
use crate::bash::{BashAnalysis, BashEnv, BashRules, CommandVerdict, evaluate};
use crate::policy::Workspace;

/// The rules that would have allowed `action`, narrowest first-guess: for Bash one rule per
/// simple command that is not already read-only (or allowed), on its first two words when the
/// second is a subcommand (`Bash(make lint:*)`), else on the exact command; for file tools the
/// folder (`Edit(docs/**)`); for WebFetch the host. `analysis` is the one the call's gate read,
/// when there is a call: the command is not analysed again.
pub fn narrowest_rules(
    action: &Action,
    workspace: &Workspace,
    analysis: Option<&BashAnalysis>,
) -> Vec<String> {
    let text = |key: &str| action.input.get(key).and_then(Value::as_str);
    match action.tool.as_str() {
        "Bash" => text("command").map_or_else(
            || vec!["Bash".to_string()],
            |command| match analysis {
                Some(analysis) => rules_of(analysis, command),
                None => bash_rules(command, workspace),
            },
        ),
        "Edit" | "Write" | "NotebookEdit" => text("file_path")
            .or_else(|| text("notebook_path"))
            .map_or_else(
                || vec!["Edit".to_string()],
                |path| vec![path_rule("Edit", path, workspace)],
            ),
        "Read" | "Glob" | "Grep" => text("file_path").or_else(|| text("path")).map_or_else(
            || vec!["Read".to_string()],
            |path| vec![path_rule("Read", path, workspace)],
        ),
        "WebFetch" => text("url").and_then(host_of).map_or_else(
            || vec!["WebFetch".to_string()],
            |host| vec![format!("WebFetch(domain:{host})")],
        ),
        other => vec![other.to_string()],
    }
}

/// A command no call carries an analysis for (`auto eval`'s cases, tests): analysed here
/// without rules.
fn bash_rules(command: &str, workspace: &Workspace) -> Vec<String> {
    let env = BashEnv {
        cwd: &workspace.workdir,
        workspace_roots: &workspace.roots,
        home: workspace.home.as_deref(),
        resolve: &crate::base::resolve_without_disk,
        // Proposals name commands, not the files a glob matches.
        list_dir: &|_| Some(Vec::new()),
        links_below: &|_| Ok(Vec::new()),
    };
    rules_of(&evaluate(command, &BashRules::default(), &env), command)
}

/// One rule per simple command the analysis left unallowed: one already read-only or
/// allowed by a rule of the policy needs none.
fn rules_of(analysis: &BashAnalysis, command: &str) -> Vec<String> {
    let mut rules: Vec<String> = Vec::new();
    for report in &analysis.commands {
        if matches!(
            report.verdict,
            CommandVerdict::ReadOnly | CommandVerdict::AllowedByRule(_)
        ) {
            continue;
        }
        let rule = command_rule(&report.argv);
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    if rules.is_empty() {
        // Nothing the analyser could name (a redirection alone, an unparsable script): the
        // exact command is the only honest proposal.
        rules.push(format!("Bash({})", command.trim()));
    }
    rules
}

/// `Bash(make lint:*)` when the second word is a plain subcommand; else the exact command
/// as far as its words are known, as a prefix when a dynamic word cut it short.
fn command_rule(argv: &[String]) -> String {
    let known: Vec<String> = argv
        .iter()
        .take_while(|word| !word.starts_with("<dynamic"))
        .map_while(|word| pattern_word(word))
        .collect();
    let subcommand = known.get(1).is_some_and(|word| {
        word.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == ':')
            && !word.starts_with('-')
    });
    match (known.len(), subcommand) {
        (0, _) => "Bash".to_string(),
        (_, true) => format!("Bash({} {}:*)", known[0], known[1]),
        (len, false) if len == argv.len() => format!("Bash({})", known.join(" ")),
        _ => format!("Bash({}:*)", known.join(" ")),
    }
}

/// A word as a rule pattern writes it: bare, or single-quoted when it holds spaces or shell
/// characters; `None` when it cannot be written (a single quote inside).
fn pattern_word(word: &str) -> Option<String> {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c));
    if plain {
        Some(word.to_string())
    } else if word.contains('\'') || word.contains('*') {
        None
    } else {
        Some(format!("'{word}'"))
    }
}

/// `Edit(docs/**)` for a file in a workspace folder, `Edit(README.md)` at its top, the
/// absolute `//folder/**` outside it.
fn path_rule(tool: &str, path: &str, workspace: &Workspace) -> String {
    let absolute = crate::base::normalize_lexically(&workspace.workdir.join(path));
    let relative = absolute.strip_prefix(&workspace.workdir).ok();
    match relative {
        Some(relative) => match relative.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(folder) => format!("{tool}({}/**)", folder.display()),
            None => format!("{tool}({})", relative.display()),
        },
        None => {
            let folder = absolute.parent().unwrap_or(Path::new("/"));
            format!("{tool}(/{}/**)", folder.display())
        }
    }
}

fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit('@').next()?.split(':').next()?;
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// One proposed rule across the run: how often the classifier denied what it would allow,
/// one example, and the classifier's reasons.
#[derive(Debug, Clone, PartialEq)]
pub struct ProposedRule {
    pub rule: String,
    pub count: u32,
    pub example: Action,
    pub reasons: Vec<String>,
}

/// Adds a denial's proposals to the run's list, merging by rule text.
pub fn record(proposals: &mut Vec<ProposedRule>, rules: &[String], action: &Action, reason: &str) {
    for rule in rules {
        match proposals.iter_mut().find(|seen| &seen.rule == rule) {
            Some(seen) => {
                seen.count += 1;
                if !seen.reasons.iter().any(|r| r == reason) {
                    seen.reasons.push(reason.to_string());
                }
            }
            None => proposals.push(ProposedRule {
                rule: rule.clone(),
                count: 1,
                example: action.clone(),
                reasons: vec![reason.to_string()],
            }),
        }
    }
}

/// `proposed-rules.yaml`. Strings are written as JSON strings, which YAML reads unchanged,
/// so no reason or command can break the file's structure.
pub fn proposed_rules_yaml(proposals: &[ProposedRule]) -> String {
    let quote = |text: &str| Value::String(text.to_string()).to_string();
    let mut out = String::from(
        "# Allow rules that would have let the auto-mode classifier's denied actions through.\n\
         # Review each before pasting it into a policy's permissions.allow.\n\
         proposed_rules:\n",
    );
    for proposal in proposals {
        out.push_str(&format!("  - rule: {}\n", quote(&proposal.rule)));
        out.push_str(&format!("    count: {}\n", proposal.count));
        out.push_str(&format!(
            "    example: {{tool: {}, input: {}}}\n",
            quote(&proposal.example.tool),
            proposal.example.input
        ));
        out.push_str("    reasons:\n");
        for reason in &proposal.reasons {
            out.push_str(&format!("      - {}\n", quote(reason)));
        }
    }
    out
}

/// The block a maintainer pastes into a policy (the step summary shows it).
pub fn paste_block(proposals: &[ProposedRule]) -> String {
    let mut out = String::from("permissions:\n  allow:\n");
    for proposal in proposals {
        out.push_str(&format!("    - {}\n", Value::String(proposal.rule.clone())));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn workspace() -> Workspace {
        Workspace::new(PathBuf::from("/ws"), Vec::new(), None)
    }

    #[test]
    fn proposals_are_the_narrowest_rule_for_each_kind_of_action() {
        let cases = [
            (
                "Bash",
                json!({"command": "make lint"}),
                vec!["Bash(make lint:*)"],
            ),
            (
                "Bash",
                json!({"command": "rm -rf build"}),
                vec!["Bash(rm -rf build)"],
            ),
            (
                "Bash",
                json!({"command": "cat README.md && npm publish --access public"}),
                vec!["Bash(npm publish:*)"],
            ),
            (
                "Bash",
                json!({"command": "curl \"$URL\""}),
                vec!["Bash(curl:*)"],
            ),
            (
                "Edit",
                json!({"file_path": "docs/guide/a.md"}),
                vec!["Edit(docs/guide/**)"],
            ),
            (
                "Write",
                json!({"file_path": "/ws/NOTES.md"}),
                vec!["Edit(NOTES.md)"],
            ),
            (
                "Write",
                json!({"file_path": "/etc/hosts"}),
                vec!["Edit(//etc/**)"],
            ),
            (
                "WebFetch",
                json!({"url": "https://user@Docs.rs:443/x?y"}),
                vec!["WebFetch(domain:docs.rs)"],
            ),
            ("Agent", json!({"prompt": "x"}), vec!["Agent"]),
        ];
        for (tool, input, expected) in cases {
            let action = Action {
                tool: tool.into(),
                input: input.clone(),
            };
            assert_eq!(
                narrowest_rules(&action, &workspace(), None),
                expected,
                "{tool} {input}"
            );
        }
    }

    #[test]
    fn proposals_merge_by_rule_and_render_as_yaml() {
        let action = Action {
            tool: "Bash".into(),
            input: json!({"command": "make lint"}),
        };
        let mut proposals = Vec::new();
        let rules = vec!["Bash(make lint:*)".to_string()];
        record(&mut proposals, &rules, &action, "not in the task");
        record(&mut proposals, &rules, &action, "not in the task");
        record(&mut proposals, &rules, &action, "runs \"code\"");
        assert_eq!(proposals.len(), 1);
        assert_eq!(proposals[0].count, 3);
        assert_eq!(
            proposed_rules_yaml(&proposals),
            "# Allow rules that would have let the auto-mode classifier's denied actions through.\n\
             # Review each before pasting it into a policy's permissions.allow.\n\
             proposed_rules:\n  - rule: \"Bash(make lint:*)\"\n    count: 3\n    example: {tool: \"Bash\", input: {\"command\":\"make lint\"}}\n    reasons:\n      - \"not in the task\"\n      - \"runs \\\"code\\\"\"\n"
        );
        assert_eq!(
            paste_block(&proposals),
            "permissions:\n  allow:\n    - \"Bash(make lint:*)\"\n"
        );
    }
}

//! `policy lint`: what a reviewer should know about a policy before it guards a run — allow
//! rules that hand out more than they seem to, and rules that can never match.

use super::file::Policy;
use super::rule::{Rule, RuleContent, RuleKind};
use super::tool_name::ToolName;
use tollgate_bash::CommandPattern;

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
            Some(sub) if discards_work(sub, &words[2..], open) => {
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

/// Whether a rule's words after the subcommand say something.
type WordsTest = fn(&[&str]) -> bool;

/// git subcommands that can throw away uncommitted work (stashes included), each with what
/// makes an exact rule for it do so. A prefix rule may add those words itself, so it counts
/// whenever its subcommand is here — unless its words pick a listing form (`git stash
/// list:*`), which the Bash analyser proves read-only from the same table.
const DISCARDS_WORK: &[(&str, WordsTest)] = &[
    ("checkout", |rest| {
        has(rest, &["--", ".", "-f", "--force"]) || short_flag(rest, 'f')
    }),
    // Only `--staged` alone leaves the work tree as it is.
    ("restore", |rest| {
        !has(rest, &["--staged", "-S"]) || has(rest, &["--worktree", "-W"])
    }),
    ("reset", |rest| has(rest, &["--hard", "--merge"])),
    ("clean", |rest| !has(rest, &["-n", "--dry-run"])),
    ("stash", |rest| {
        matches!(rest.first(), Some(&("drop" | "clear")))
    }),
    ("switch", |rest| {
        has(rest, &["-f", "--force", "--discard-changes"]) || short_flag(rest, 'f')
    }),
];

/// Whether an allow rule for `git SUB REST…` (`open`: a prefix rule, which matches longer
/// commands too) can discard uncommitted work.
fn discards_work(sub: &str, rest: &[&str], open: bool) -> bool {
    let Some((_, exact)) = DISCARDS_WORK.iter().find(|(name, _)| *name == sub) else {
        return false;
    };
    !tollgate_bash::git_listing_action(sub, rest.first().copied()) && (open || exact(rest))
}

fn has(words: &[&str], any: &[&str]) -> bool {
    words.iter().any(|word| any.contains(word))
}

/// A cluster of short options that holds `letter` (`-fd` for `-f -d`).
fn short_flag(words: &[&str], letter: char) -> bool {
    words.iter().any(|word| {
        word.strip_prefix('-')
            .is_some_and(|flags| !flags.starts_with('-') && flags.contains(letter))
    })
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
    use crate::PolicyOrigin;

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

    fn allow(text: &str) -> Rule {
        let source = crate::config::SourceLocation {
            file: "p.yaml".into(),
            line: 1,
        };
        Rule::parse(text, RuleKind::Allow, source, Path::new("/ws")).unwrap()
    }

    /// Whether the Bash analyser proves `command` read-only in the workspace `/ws` with no
    /// rules at all.
    fn proven_read_only(command: &str) -> bool {
        tollgate_bash::evaluate_in_test_workspace(command, &Default::default()).only_reads
    }

    fn flagged(text: &str) -> Option<&'static str> {
        let rule = allow(text);
        danger(&rule).or_else(|| reach(&rule))
    }

    /// Read-only subcommands are never called destructive, as an exact rule or a prefix one
    /// (`policy lint --strict` once refused `Bash(git stash list:*)` as "discards uncommitted
    /// work"); the analyser proves those it knows read-only.
    #[test]
    fn read_only_subcommands_are_not_destructive() {
        // (command, whether the Bash analyser proves it read-only)
        let cases = [
            ("git stash list", true),
            ("git stash show", true),
            ("git stash show -p stash@{1}", true),
            ("git branch --list", true),
            ("git branch -a", true),
            ("git remote -v", true),
            ("git tag -l", true),
            ("git status", true),
            ("git log --oneline", true),
            ("git diff --stat", true),
            ("git reflog", true),
            ("git worktree list", false),
            ("git clean -n", false),
            ("git restore --staged src/a.rs", false),
            ("git checkout -b topic", false),
        ];
        for (command, read_only) in cases {
            assert_eq!(proven_read_only(command), read_only, "{command}");
            for rule in [format!("Bash({command})")]
                .into_iter()
                .chain(read_only.then(|| format!("Bash({command}:*)")))
            {
                assert_eq!(flagged(&rule), None, "{rule}");
            }
        }
    }

    /// The lint's table of work-discarding git subcommands and the analyser's read-only proof
    /// cannot disagree: for each subcommand of the table and each word that may follow it, a
    /// command the analyser proves read-only is never flagged (as an exact rule or a prefix
    /// one), and an exact rule that is flagged names a command the analyser does not prove.
    #[test]
    fn the_destructive_table_agrees_with_the_read_only_proof() {
        let words = [
            "",
            "list",
            "show",
            "show -p",
            "drop",
            "clear",
            "pop",
            "apply",
            "push",
            "save",
            "--",
            "-- .",
            ".",
            "-f",
            "--force",
            "-fd",
            "-xdf",
            "--hard",
            "--soft",
            "--merge",
            "--keep",
            "-n",
            "--dry-run",
            "main",
            "-b topic",
            "--staged",
            "--staged .",
            "-W .",
            "--discard-changes",
            "HEAD~1",
            "src/a.rs",
        ];
        for (sub, _) in DISCARDS_WORK {
            for word in words {
                let command = format!("git {sub} {word}").trim_end().to_string();
                let exact = flagged(&format!("Bash({command})"));
                let prefix = flagged(&format!("Bash({command}:*)"));
                if proven_read_only(&command) {
                    assert_eq!((exact, prefix), (None, None), "{command}");
                }
                if exact.is_some() {
                    assert!(!proven_read_only(&command), "{command}");
                }
            }
        }
    }

    /// Each kind of work-discarding rule is flagged, and the rule matches a command that
    /// discards work and that the analyser does not prove read-only.
    #[test]
    fn rules_that_discard_work_are_flagged() {
        let cases = [
            ("Bash(git stash:*)", "git stash drop"),
            ("Bash(git stash drop)", "git stash drop"),
            ("Bash(git stash clear)", "git stash clear"),
            ("Bash(git checkout:*)", "git checkout -- ."),
            ("Bash(git checkout -- .)", "git checkout -- ."),
            ("Bash(git checkout -f main)", "git checkout -f main"),
            ("Bash(git reset --hard)", "git reset --hard"),
            ("Bash(git reset:*)", "git reset --hard HEAD~1"),
            ("Bash(git clean -fdx)", "git clean -fdx"),
            ("Bash(git clean:*)", "git clean -f"),
            ("Bash(git restore:*)", "git restore ."),
            ("Bash(git restore src/a.rs)", "git restore src/a.rs"),
            (
                "Bash(git restore --staged:*)",
                "git restore --staged --worktree .",
            ),
            ("Bash(git switch -f main)", "git switch -f main"),
            ("Bash(git switch:*)", "git switch --discard-changes main"),
        ];
        for (text, command) in cases {
            let rule = allow(text);
            let Some(RuleContent::Command(pattern)) = &rule.content else {
                panic!("{text} is not a command rule");
            };
            let argv: Vec<String> = command.split_whitespace().map(String::from).collect();
            assert!(pattern.matches(&argv), "{text} does not match {command}");
            assert!(reach(&rule).is_some(), "{text}");
            assert!(!proven_read_only(command), "{command}");
        }
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

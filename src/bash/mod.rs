//! Bash authorisation (S5): a command string, rules and a context in, an analysis out.
//! Pure: no file I/O, no processes, no environment reads; symlink resolution is injected.

mod analyser;
mod arg_writes;
mod command;
mod git;
mod paths;
mod pattern;
mod readonly;
mod sed;
mod syntax;
mod word;
mod wrappers;

use std::path::{Path, PathBuf};

pub use pattern::{CommandPattern, PatternError};

/// Rules as the gate hands them in: each pattern tagged with an opaque id the caller maps
/// back to its rule (file:line).
#[derive(Debug, Clone, Default)]
pub struct BashRules {
    pub allow: Vec<(CommandPattern, usize)>,
    pub ask: Vec<(CommandPattern, usize)>,
    pub deny: Vec<(CommandPattern, usize)>,
}

/// What the analysis may know about the world, injected by the caller.
pub struct BashEnv<'a> {
    /// Absolute, canonical.
    pub cwd: &'a Path,
    /// Absolute, canonical: workdir + additional_directories.
    pub workspace_roots: &'a [PathBuf],
    pub home: Option<&'a Path>,
    /// Resolves symlinks of an absolute, lexically normalised path (the caller canonicalises
    /// the longest existing prefix). Tests pass identity.
    pub resolve: &'a dyn Fn(&Path) -> PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashAnalysis {
    pub verdict: BashVerdict,
    /// Every simple command found, in source order (nested ones included), with its own
    /// verdict — for `check --explain`.
    pub commands: Vec<CommandReport>,
    /// Every path the script writes through a redirection (absolute, normalised, `~`
    /// expanded, symlinks resolved via `env.resolve`). The caller checks each like an Edit.
    /// A target that cannot be known statically is not listed: it makes the verdict Ask.
    pub writes: Vec<PathBuf>,
    /// Every path a command that is not proven read-only (so runs by a rule or the mode)
    /// names as a file it creates, changes or removes (`cp a b`, `mkdir -p d`, `sed -i … f`),
    /// located like `writes`. The caller holds each against the write guardrails only: the
    /// rule that allowed the command has decided the rest.
    pub named_writes: Vec<PathBuf>,
    /// Such commands that create a git repository (`git init`, `git clone`, `--bare`) or
    /// write files whose names only their input knows (`tar -x`, `unzip`, `patch`): the
    /// caller treats each as a guardrail, since a planted `.git` can hide in them.
    pub unseen_writes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BashVerdict {
    /// Every simple command is allowed by an allow rule or proven read-only inside the
    /// workspace. (Writes still need the caller's check.)
    Allow,
    /// A deny rule named one of the simple commands (anywhere, nested included), or something
    /// that is always refused (`/dev/tcp/…`).
    Deny { rule: Option<usize>, reason: String },
    /// Not proven safe. `rule` is Some(id) when a content-level ask rule matched (the gate
    /// must keep that ask immune to bypass mode).
    Ask { rule: Option<usize>, reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandReport {
    /// The command's source text.
    pub text: String,
    /// The resolved argv of what really runs (wrappers looked through); a word that cannot be
    /// known statically shows as `<dynamic …>`.
    pub argv: Vec<String>,
    pub verdict: CommandVerdict,
    pub why: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandVerdict {
    AllowedByRule(usize),
    ReadOnly,
    Denied(usize),
    AskRule(usize),
    Unproven,
}

/// Scripts longer than this are not analysed (bounded work): they are asked about.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// Analyses `script` against `rules`. Precedence over the whole script: any deny ⇒ Deny;
/// else any ask-rule match ⇒ Ask with its rule; else anything unproven ⇒ Ask; else Allow.
pub fn evaluate(script: &str, rules: &BashRules, env: &BashEnv) -> BashAnalysis {
    if script.len() > MAX_SCRIPT_BYTES {
        return BashAnalysis {
            verdict: BashVerdict::Ask {
                rule: None,
                reason: format!(
                    "the command is {} bytes long; commands over {MAX_SCRIPT_BYTES} bytes are not analysed",
                    script.len()
                ),
            },
            commands: Vec::new(),
            writes: Vec::new(),
            named_writes: Vec::new(),
            unseen_writes: Vec::new(),
        };
    }
    let mut analyser = analyser::Analyser::new(rules, env);
    analyser.script(script, 0);
    analyser.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn rules() -> BashRules {
        let p = |s: &str, id| (CommandPattern::parse(s).unwrap(), id);
        BashRules {
            allow: vec![p("git status", 1), p("npm test:*", 2)],
            ask: vec![p("git push:*", 3)],
            deny: vec![p("rm:*", 4), p("git reset:*", 5)],
        }
    }

    fn run(script: &str) -> BashAnalysis {
        let roots = [PathBuf::from("/ws")];
        let identity = |p: &Path| p.to_path_buf();
        let env = BashEnv {
            cwd: Path::new("/ws"),
            workspace_roots: &roots,
            home: Some(Path::new("/home/u")),
            resolve: &identity,
        };
        evaluate(script, &rules(), &env)
    }

    #[test]
    fn deny_names_the_command_and_the_rule() {
        assert_eq!(
            run("npm test && rm -rf build").verdict,
            BashVerdict::Deny {
                rule: Some(4),
                reason: "`rm -rf build` is denied by rule Bash(rm:*)".to_owned()
            }
        );
    }

    #[test]
    fn deny_wins_over_ask_rules_and_parse_problems() {
        assert!(matches!(
            run("git push; rm x; echo $(").verdict,
            BashVerdict::Deny { rule: Some(4), .. }
        ));
        assert!(matches!(
            run("git push origin main").verdict,
            BashVerdict::Ask { rule: Some(3), .. }
        ));
        assert!(matches!(
            run("echo $(").verdict,
            BashVerdict::Ask { rule: None, .. }
        ));
    }

    #[test]
    fn an_unknown_word_that_could_complete_a_deny_rule_denies() {
        assert!(matches!(
            run("git $sub --hard").verdict,
            BashVerdict::Deny { rule: Some(5), .. }
        ));
    }

    #[test]
    fn writes_are_collected_for_the_caller() {
        let a = run("echo hi >> ~/.bashrc; cat <<EOF > src/out.txt\nx\nEOF\necho > /dev/null");
        assert_eq!(a.verdict, BashVerdict::Allow);
        assert_eq!(
            a.writes,
            vec![
                PathBuf::from("/home/u/.bashrc"),
                PathBuf::from("/ws/src/out.txt")
            ]
        );
    }

    #[test]
    fn reports_explain_every_command_in_order() {
        let a = run("git status && timeout 5 cat $(echo README.md)");
        let summary: Vec<(Vec<String>, CommandVerdict)> = a
            .commands
            .iter()
            .map(|r| (r.argv.clone(), r.verdict))
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    vec!["git".into(), "status".into()],
                    CommandVerdict::AllowedByRule(1)
                ),
                (
                    vec!["echo".into(), "README.md".into()],
                    CommandVerdict::ReadOnly
                ),
                (
                    vec!["cat".into(), "<dynamic $(echo README.md)>".into()],
                    CommandVerdict::Unproven
                ),
            ]
        );
        assert!(a.commands[2].why.contains("run through `timeout`"));
    }

    #[test]
    fn oversized_input_is_asked_about_without_analysis() {
        let big = "echo hi\n".repeat(MAX_SCRIPT_BYTES / 8 + 1);
        assert!(matches!(
            run(&big).verdict,
            BashVerdict::Ask { rule: None, .. }
        ));
    }

    #[test]
    fn path_qualified_programs_outside_system_folders_are_not_allowed_by_name() {
        assert!(matches!(
            run("./git status").verdict,
            BashVerdict::Ask { .. }
        ));
        assert_eq!(run("/usr/bin/git status").verdict, BashVerdict::Allow);
    }
}

//! Bash: runs a command with `bash -c` in the workdir, in its own process group (so a timeout
//! or an interrupt kills everything it started), with captured, bounded output.

use std::borrow::Cow;
use std::cell::RefCell;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use foldhash::{HashMap, HashMapExt};
use serde::Deserialize;
use serde_json::{Value, json};

use super::outcome::CommandRun;
use super::path::check_write;
use super::shell::{Confinement, ShellEnv, run_confined};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input};
use crate::base::{Frame, Reached, Unresolvable, resolve};
use crate::bash::{
    BashAnalysis, BashEnv, BashRules, BashVerdict, CommandVerdict, Script, evaluate_parsed,
};
use crate::ledger::{Allowance, GitWrites};
use crate::policy::{
    AllowBasis, AskCause, PermissionContext, RuleRef, RuleSet, ToolCheck, ToolName, Workspace,
    git_dir_write, read_refusal, write_guardrail,
};

/// The most a single call may ask for, whatever the model requests.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BashInput {
    command: String,
    /// Milliseconds.
    timeout: Option<u64>,
    /// Claude Code's schema has it and models trained there send it: accepted, not offered
    /// (its definition would cost bytes in every request for words nothing reads).
    description: Option<String>,
}

pub struct BashTool;

impl Tool for BashTool {
    fn name(&self) -> ToolName {
        ToolName::Bash
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed("Runs a command with bash in the workdir; returns its output and exit code.")
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds"}
            },
            "required": ["command"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let bash: BashInput = parse_input(&self.name(), input)?;
        // The model's own words about the command; nothing decides on them.
        let _ = bash.description;
        if bash.command.trim().is_empty() {
            return Err(ToolError::Invalid("command is empty".into()));
        }
        Ok(Box::new(PreparedBash {
            timeout: bash.timeout.map(Duration::from_millis),
            script: Script::new(bash.command),
            analysed: OnceLock::new(),
        }))
    }
}

/// A Bash call: its command parsed at most once and analysed once under the run's rules and
/// workspace, however many stages ask: scheduling, plan mode and an explore sub-agent's scope
/// (whether it only reads, whatever the rules allow), the gate, auto's fast path (the mode is
/// not an input of it), the read-only proof, `check --explain` and the classifier's rule
/// proposal all read that one analysis.
struct PreparedBash {
    timeout: Option<Duration>,
    script: Script,
    analysed: OnceLock<Analysed>,
}

/// The analysis kept with the context it was made under.
struct Analysed {
    under: Under,
    analysis: Arc<BashAnalysis>,
}

/// Which rules and workspace an analysis was made under, by address: a call is judged while
/// its run's policy lives, so the same address is the same rule set.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Under {
    rules: usize,
    workspace: usize,
}

impl Under {
    fn of(ctx: &PermissionContext) -> Under {
        Under {
            rules: std::ptr::from_ref::<RuleSet>(ctx.rules).addr(),
            workspace: std::ptr::from_ref::<Workspace>(ctx.workspace).addr(),
        }
    }
}

impl PreparedBash {
    /// The analysis under `ctx`, made on first need. A call judged under another rule set
    /// (a test deciding one call under two policies) is analysed afresh, never misread.
    fn analysis(&self, ctx: &PermissionContext) -> Arc<BashAnalysis> {
        let under = Under::of(ctx);
        let analyse_now = || Arc::new(analyse(&self.script, ctx.rules.bash_rules(), ctx));
        let kept = self.analysed.get_or_init(|| Analysed {
            under,
            analysis: analyse_now(),
        });
        if kept.under == under {
            kept.analysis.clone()
        } else {
            analyse_now()
        }
    }
}

impl ToolInput for PreparedBash {
    fn is_read_only(&self, ctx: &PermissionContext) -> bool {
        self.analysis(ctx).only_reads
    }

    fn is_concurrency_safe(&self, ctx: &PermissionContext) -> bool {
        self.is_read_only(ctx)
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_command(self.script.source(), &self.analysis(ctx), ctx)
    }

    fn allowed_by_read_only_proof(&self, ctx: &PermissionContext) -> bool {
        proven_read_only(&self.analysis(ctx))
    }

    fn bash_analysis(&self, ctx: &PermissionContext) -> Option<Arc<BashAnalysis>> {
        Some(self.analysis(ctx))
    }

    fn allowed_effects(&self, ctx: &PermissionContext, by_check: bool) -> Allowance {
        effects_allowed(&self.analysis(ctx), by_check)
    }

    fn explain_permissions(&self, ctx: &PermissionContext) -> Vec<String> {
        let analysis = self.analysis(ctx);
        let mut lines: Vec<String> = analysis
            .commands
            .iter()
            .map(|report| {
                format!(
                    "simple command `{}` → [{}]: {:?}, {}",
                    report.text,
                    report.argv.join(", "),
                    report.verdict,
                    report.why
                )
            })
            .collect();
        lines.extend(
            analysis
                .writes
                .iter()
                .map(|path| format!("writes {}", path.display())),
        );
        lines.extend(analysis.reads.iter().map(|read| {
            let below = if read.below {
                " and everything below it"
            } else {
                ""
            };
            format!("reads {}{below}", read.path.display())
        }));
        lines.extend(
            analysis
                .named_writes
                .iter()
                .map(|path| format!("names {} as a file it writes", path.display())),
        );
        lines.extend(analysis.unseen_writes.iter().cloned());
        lines.extend(analysis.link_escapes.iter().cloned());
        lines
    }

    fn stopped(&self, reason: String) -> ToolError {
        ToolError::Command(CommandRun::stopped(reason))
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let timeout = self
                .timeout
                .unwrap_or(ctx.limits.bash_timeout)
                .min(MAX_TIMEOUT);
            run(self.script.source(), ctx, timeout).await
        })
    }
}

/// The analyser's environment for this workspace: the model may read its roots and the
/// run's results; paths are resolved on disk, in the command's frame.
fn analyse(script: &Script, rules: &BashRules, ctx: &PermissionContext) -> BashAnalysis {
    let workspace = ctx.workspace;
    let readable: Cow<[PathBuf]> = if workspace.read_only_roots.is_empty() {
        Cow::Borrowed(&workspace.roots)
    } else {
        Cow::Owned(
            workspace
                .roots
                .iter()
                .chain(&workspace.read_only_roots)
                .cloned()
                .collect(),
        )
    };
    // A path is resolved once per decision, however many checks name it (`git checkout -b
    // x origin/main` names `origin` in three), keyed by the working directory it is looked up
    // from (which `/proc/self/cwd` and relative paths depend on) and the path's bytes: hashing
    // a `Path` hashes it component by component.
    let resolved = RefCell::new(HashMap::<Vec<u8>, Result<Reached, Unresolvable>>::new());
    let resolve = |path: &Path, frame: Frame<'_>| {
        let mut key = Vec::new();
        if let Frame::Command { cwd: Some(cwd) } = frame {
            key.extend_from_slice(cwd.as_os_str().as_bytes());
        }
        key.push(0);
        key.extend_from_slice(path.as_os_str().as_bytes());
        if let Some(known) = resolved.borrow().get(&key) {
            return known.clone();
        }
        let reached = resolve(path, frame, &workspace.roots, ctx.disk);
        resolved.borrow_mut().insert(key, reached.clone());
        reached
    };
    // A glob's folders are listed once per decision: the operand check and the check of
    // what Bash lists walk the same folders.
    let listed = RefCell::new(HashMap::<PathBuf, Option<Vec<String>>>::new());
    let list = |dir: &Path| {
        listed
            .borrow_mut()
            .entry(dir.to_path_buf())
            .or_insert_with(|| match ctx.disk {
                Some(disk) => disk.names(dir, list_dir),
                None => list_dir(dir),
            })
            .clone()
    };
    let env = BashEnv {
        cwd: &workspace.workdir,
        workspace_roots: &readable[..],
        home: workspace.home.as_deref(),
        resolve: &resolve,
        list_dir: &list,
        links_below: &crate::base::links_below,
    };
    evaluate_parsed(script, rules, &env)
}

/// What a command may change, for the effect ledger. A script that only reads may change
/// nothing (git's index refresh aside); one allowed by its own check may change the paths
/// the analysis named (its redirections, the files its arguments name), unless a command in
/// it is a program whose writes nobody named — a build or test runner or git an allow rule
/// lets run, or a command allowed unproven (the sandbox's auto-allow) — which may change the
/// workspace but its guarded paths; so may any command a rule, the mode, a hook or the
/// classifier allowed whole.
fn effects_allowed(analysis: &BashAnalysis, by_check: bool) -> Allowance {
    let is_git = |report: &&crate::bash::CommandReport| {
        report
            .argv
            .first()
            .is_some_and(|name| name.rsplit('/').next() == Some("git"))
    };
    let git = if analysis
        .commands
        .iter()
        .filter(is_git)
        .any(|r| !r.reads_only)
    {
        GitWrites::Repository
    } else if analysis.commands.iter().any(|r| is_git(&r)) {
        GitWrites::Index
    } else {
        GitWrites::None
    };
    if analysis.only_reads {
        return Allowance::nothing(git.min(GitWrites::Index));
    }
    let named: Vec<PathBuf> = analysis
        .writes
        .iter()
        .chain(&analysis.named_writes)
        .cloned()
        .collect();
    let program = !by_check
        || analysis.commands.iter().any(|report| {
            !report.reads_only
                && (report.verdict == CommandVerdict::Unproven
                    || report.runs_a_runner()
                    || is_git(&report))
        });
    if program {
        Allowance::workspace(named, git)
    } else {
        Allowance::named(named, git)
    }
}

/// Whether `check_command`'s allow of this analysis is the read-only proof's alone: every
/// simple command proven read-only (none allowed by a rule) and nothing written.
fn proven_read_only(analysis: &BashAnalysis) -> bool {
    analysis.verdict == BashVerdict::Allow
        && !analysis.commands.is_empty()
        && analysis
            .commands
            .iter()
            .all(|report| matches!(report.verdict, CommandVerdict::ReadOnly))
        && analysis.writes.is_empty()
        && analysis.named_writes.is_empty()
        && analysis.unseen_writes.is_empty()
        && analysis.link_escapes.is_empty()
}

/// More entries than this in one folder make a glob over it unproven (bounded work).
const MAX_LISTED: usize = 10_000;

/// The names in `dir`, for expanding a glob at decision time (the kernel's read-only domain
/// covers what changes before the command runs). `None` when it cannot be listed, a name is
/// not UTF-8, or there are too many.
fn list_dir(dir: &Path) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        names.push(entry.file_name().into_string().ok()?);
        if names.len() > MAX_LISTED {
            return None;
        }
    }
    Some(names)
}

/// Every simple command must be allowed (S5); a deny rule anywhere denies the whole, in every
/// mode. Redirections are writes, each checked like an Edit of its target: path rules,
/// workspace boundary, guardrails.
fn check_command(command: &str, analysis: &BashAnalysis, ctx: &PermissionContext) -> ToolCheck {
    let rule = |id: Option<usize>| id.and_then(|id| ctx.rules.rule_at(id)).map(RuleRef::from);
    if let BashVerdict::Deny { rule: id, reason } = &analysis.verdict {
        return ToolCheck::Deny {
            reason: reason.clone(),
            rule: rule(*id),
        };
    }
    // A command not proven safe that names a denied program is refused, in every mode: such
    // an ask is never appealed (to bypassPermissions, the auto-mode classifier, an allow rule).
    if matches!(analysis.verdict, BashVerdict::Ask { .. })
        && let Some((id, reason)) = &analysis.named_denied
    {
        return ToolCheck::Deny {
            reason: reason.clone(),
            rule: rule(Some(*id)),
        };
    }
    // What the script reads answers to Read rules and the read guardrails, in every mode.
    let mut reads = read_checks(analysis, ctx).into_iter().peekable();
    if let Some(refused) = reads.next_if(|check| {
        matches!(
            check,
            ToolCheck::Deny { .. }
                | ToolCheck::Ask {
                    cause: AskCause::Guardrail(_),
                    ..
                }
        )
    }) {
        return refused;
    }
    let writes: Vec<(&PathBuf, ToolCheck)> = analysis
        .writes
        .iter()
        .map(|path| (path, check_write(ctx, &ToolName::Edit, path)))
        .collect();
    // The strongest answer wins: a refused write, then a guardrail, then ask rules (the
    // analysis's first), then anything unproven; a write no rule allows is unproven.
    let write = |wanted: fn(&ToolCheck) -> bool| {
        let (path, check) = writes.iter().find(|(_, check)| wanted(check))?;
        let about = |reason: &str| format!("`{command}` writes {}: {reason}", path.display());
        Some(match check {
            ToolCheck::Deny { reason, rule } => ToolCheck::Deny {
                reason: about(reason),
                rule: rule.clone(),
            },
            ToolCheck::Ask { reason, cause } => ToolCheck::Ask {
                reason: about(reason),
                cause: cause.clone(),
            },
            ToolCheck::Passthrough { reason } | ToolCheck::Allow { reason, .. } => ToolCheck::Ask {
                reason: about(reason),
                cause: AskCause::Unproven,
            },
        })
    };
    if let Some(refused) = write(|check| matches!(check, ToolCheck::Deny { .. })) {
        return refused;
    }
    if let Some(guarded) = write(|check| {
        matches!(
            check,
            ToolCheck::Ask {
                cause: AskCause::Guardrail(_),
                ..
            }
        )
    }) {
        return guarded;
    }
    if let Some(guarded) = argument_guardrail(command, analysis, ctx) {
        return guarded;
    }
    if let BashVerdict::Ask {
        rule: Some(id),
        reason,
    } = &analysis.verdict
        && let Some(rule) = rule(Some(*id))
    {
        return ToolCheck::Ask {
            reason: reason.clone(),
            cause: AskCause::ContentRule(rule),
        };
    }
    if let Some(asked) = write(|check| {
        matches!(
            check,
            ToolCheck::Ask {
                cause: AskCause::ContentRule(_),
                ..
            }
        )
    }) {
        return asked;
    }
    if let Some(asked) = reads.next() {
        return asked;
    }
    if let BashVerdict::Ask { reason, .. } = &analysis.verdict {
        return ToolCheck::Ask {
            reason: reason.clone(),
            cause: AskCause::Unproven,
        };
    }
    if let Some(unproven) = write(|check| !matches!(check, ToolCheck::Allow { .. })) {
        return unproven;
    }
    let cited = analysis
        .commands
        .iter()
        .find_map(|report| match report.verdict {
            CommandVerdict::AllowedByRule(id) => rule(Some(id)),
            _ => None,
        });
    let reason = match &cited {
        Some(rule) if analysis.commands.len() == 1 => {
            format!("`{command}` is allowed by rule {}", rule.rule)
        }
        _ => format!("`{command}`: {}", summary(analysis)),
    };
    ToolCheck::Allow {
        reason,
        rule: cited,
        updated_input: None,
    }
}

/// The guardrail a command trips through its arguments (`cp x src/y/.git/config` under
/// `Bash(cp:*)`), or by making a repository or unpacking names nobody saw: an allow rule or
/// bypass cannot lift it, as for an Edit of the same path.
fn argument_guardrail(
    command: &str,
    analysis: &BashAnalysis,
    ctx: &PermissionContext,
) -> Option<ToolCheck> {
    const UNSEEN: &str = "creates a git repository or writes files whose names are not known (a committed link may lead such a write into .git or out of the workspace; a planted repository runs its config's programs)";
    const LINK_OUT: &str = "reaches outside the workspace through a link the repository holds (a name inside the workspace carries no authority over where its link leads)";
    if let Some(what) = analysis.unseen_writes.first() {
        return Some(ToolCheck::Ask {
            reason: format!("{what}: trips a safety guardrail: {UNSEEN}"),
            cause: AskCause::Guardrail(UNSEEN),
        });
    }
    if let Some(what) = analysis.link_escapes.first() {
        return Some(ToolCheck::Ask {
            reason: format!("{what}: trips a safety guardrail: {LINK_OUT}"),
            cause: AskCause::Guardrail(LINK_OUT),
        });
    }
    let home = ctx.workspace.home.as_deref();
    let holds_head = |dir: &Path| dir.join("HEAD").is_file();
    analysis.named_writes.iter().find_map(|path| {
        let guardrail = write_guardrail(path, home)
            .or_else(|| git_dir_write(path, &holds_head))
            .or_else(|| ctx.workspace.own_state_guard(path, true, false))?;
        Some(ToolCheck::Ask {
            reason: format!(
                "`{command}` writes {}: trips a safety guardrail: {guardrail}",
                path.display()
            ),
            cause: AskCause::Guardrail(guardrail),
        })
    })
}

/// What Read rules and the read guardrails say of what the script reads: denials first, then
/// guardrails, then ask rules.
fn read_checks(analysis: &BashAnalysis, ctx: &PermissionContext) -> Vec<ToolCheck> {
    let mut checks: Vec<ToolCheck> = analysis
        .reads
        .iter()
        .filter_map(|read| {
            read_refusal(
                ctx.rules,
                ctx.workspace,
                &ToolName::Bash,
                &read.path,
                read.below,
            )
        })
        .collect();
    checks.sort_by_key(|check| match check {
        ToolCheck::Deny { .. } => 0,
        ToolCheck::Ask {
            cause: AskCause::Guardrail(_),
            ..
        } => 1,
        _ => 2,
    });
    checks
}

/// "`git status` allowed by rule …; `cat README.md` read-only inside the workspace".
fn summary(analysis: &BashAnalysis) -> String {
    analysis
        .commands
        .iter()
        .map(|report| format!("`{}` {}", report.text, report.why))
        .collect::<Vec<_>>()
        .join("; ")
}

async fn run(command: &str, ctx: &ToolContext, timeout: Duration) -> Result<ToolOutput, ToolError> {
    let confinement = Confinement {
        sandbox: ctx.sandbox.as_deref(),
        read_only: match ctx.allow_basis {
            AllowBasis::ReadOnlyProof => ctx.read_only.as_deref(),
            AllowBasis::Granted => None,
        },
    };
    let run = run_confined(
        command,
        &ctx.workspace.workdir,
        timeout,
        &ctx.abort,
        ShellEnv::Model(&ctx.command_env),
        ctx.progress.as_ref(),
        confinement,
    )
    .await
    .unwrap_or_else(CommandRun::not_started);
    // Kept whole: the land step offloads a long output to a file with its head and tail
    // inline, so a build log's middle is never lost (S8).
    ToolOutput::of_command(run)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::base::AbortHandle;
    use crate::policy::{PermissionMode, Policy, RuleSet, Workspace};
    use crate::tools::{FileStateCache, ToolLimits};

    fn context(dir: &Path) -> (ToolContext, AbortHandle) {
        let (handle, abort) = AbortHandle::new();
        let ctx = ToolContext {
            resolver: Default::default(),
            workspace: Arc::new(Workspace::new(dir.to_path_buf(), vec![], None)),
            rules: Arc::default(),
            limits: ToolLimits::default(),
            abort,
            files: FileStateCache::default(),
            command_env: crate::exec::RunEnv::new(&Default::default()).model,
            progress: None,
            sandbox: None,
            read_only: None,
            allow_basis: AllowBasis::Granted,
            state: Default::default(),
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
        assert_eq!(failed.to_string(), "out\n[exit code 3]");
        let slow = run("sleep 5", &ctx, Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(
            slow.to_string().starts_with("[timed out after 0.2s"),
            "{slow}"
        );
    }

    /// Bash's own check of `command` under `rules` in `mode`, as a label.
    fn checked(
        command: &str,
        mode: PermissionMode,
        rules: &RuleSet,
        workspace: &Workspace,
    ) -> &'static str {
        let ctx = PermissionContext {
            disk: None,
            auto_allow_bash: false,
            mode,
            rules,
            workspace,
        };
        let analysis = analyse(&Script::new(command), ctx.rules.bash_rules(), &ctx);
        match check_command(command, &analysis, &ctx) {
            ToolCheck::Allow { .. } => "allow",
            ToolCheck::Deny { .. } => "deny",
            ToolCheck::Ask {
                cause: AskCause::ContentRule(_),
                ..
            } => "ask-rule",
            ToolCheck::Ask {
                cause: AskCause::Guardrail(_),
                ..
            } => "guardrail",
            ToolCheck::Ask { .. } => "ask",
            ToolCheck::Passthrough { .. } => "passthrough",
        }
    }

    /// A `cd` moves every later relative path, whatever let the `cd` through (an allow rule,
    /// bypassPermissions) and however it is spelt; where the script then is cannot be known,
    /// a relative read may be anywhere, so Read deny rules reach it.
    #[test]
    fn a_cd_moves_every_later_path_whatever_allowed_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        std::fs::write(root.join("ws/.env"), "KEY=1").unwrap();
        std::fs::write(root.join("ws/README"), "hi").unwrap();
        let policy = Policy::parse(
            "permissions:\n  allow: ['Bash(cd:*)', 'Bash(pushd:*)', 'Bash(cat:*)', 'Bash(echo:*)']\n  deny: ['Read(.env)']\n",
            crate::policy::PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let workspace = Workspace::new(root.join("ws"), vec![], None);
        let decide = |command: &str, mode| checked(command, mode, &rules, &workspace);
        use PermissionMode::{BypassPermissions, Default};
        let cases = [
            ("cd sub && cat README", Default, "allow"),
            ("cd sub && cat ../README", Default, "allow"),
            ("cd sub && cat ../.env", Default, "deny"),
            ("cd sub && cat ../.env", BypassPermissions, "deny"),
            ("cd sub; cat ../.env", BypassPermissions, "deny"),
            ("cd -P sub && cat ../.env", BypassPermissions, "deny"),
            ("pushd sub; cat ../.env", BypassPermissions, "deny"),
            ("builtin cd sub; cat ../.env", BypassPermissions, "deny"),
            ("command cd sub; cat ../.env", BypassPermissions, "deny"),
            ("cd sub; cd ..; cat .env", BypassPermissions, "deny"),
            ("cd sub/../sub && cat ../.env", BypassPermissions, "deny"),
            ("cd .. && cat ws/.env", BypassPermissions, "deny"),
            ("cd \"$X\" && cat .env", BypassPermissions, "deny"),
            ("cd \"$X\" && cat README", BypassPermissions, "deny"),
            ("cd; cat ws/.env", BypassPermissions, "deny"),
            ("cd sub; cd -; cat .env", BypassPermissions, "deny"),
            (
                "for d in sub; do cd $d; done; cat ../.env",
                BypassPermissions,
                "deny",
            ),
            ("d=sub; cd $d && cat ../.env", BypassPermissions, "deny"),
            (
                "v=$(cd \"$X\" && pwd); cat README",
                BypassPermissions,
                "allow",
            ),
            (
                "cd sub; v=$(cd \"$X\" && pwd); cat ../.env",
                BypassPermissions,
                "deny",
            ),
            ("sh -c 'cd sub'; cat ../.env", BypassPermissions, "deny"),
            // tree-sitter-bash hangs `&& …` on a pipeline of three or more; Bash runs it in
            // this shell, so the `cd` moves what follows.
            (
                "true | true | true && cd \"$X\"; cat README",
                BypassPermissions,
                "deny",
            ),
            (
                "true | true | true || cd \"$X\"; cat README",
                BypassPermissions,
                "deny",
            ),
            (
                "! true | true | true | true && cd \"$X\" && cat README",
                BypassPermissions,
                "deny",
            ),
            (
                "true | true | true && true | true | true && cd \"$X\"; cat README",
                BypassPermissions,
                "deny",
            ),
            (
                "true | true | cd \"$X\"; cat README",
                BypassPermissions,
                "allow",
            ),
            ("eval 'cd sub'; cat ../.env", BypassPermissions, "deny"),
            ("eval 'cd \"$X\"'; cat README", BypassPermissions, "deny"),
            (
                "cd() { echo; }; cd sub; cat ../.env",
                BypassPermissions,
                "deny",
            ),
            ("cd sub && echo ../.env", BypassPermissions, "allow"),
            ("cd sub && cat ../README", BypassPermissions, "allow"),
            // One command in a folder of its own.
            ("env -C sub cat ../.env", BypassPermissions, "deny"),
            ("env --chdir=sub cat ../.env", BypassPermissions, "deny"),
            ("env -Csub head ../.env", BypassPermissions, "deny"),
            ("sudo -D sub cat ../.env", BypassPermissions, "deny"),
            ("make -C sub -f ../.env", BypassPermissions, "deny"),
            (
                "tar --directory sub -cf /dev/null ../.env",
                BypassPermissions,
                "deny",
            ),
            ("make $FLAGS -f ../.env", BypassPermissions, "deny"),
            ("env -C sub true; cat README", BypassPermissions, "ask"),
            ("make -j$(nproc) -f README", BypassPermissions, "ask"),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(command, mode, want)| {
                let got = decide(command, *mode);
                (got != *want).then(|| format!("`{command}` in {mode}: {got}, want {want}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// tree-sitter-bash hangs a redirection written after the last command of a list or
    /// pipeline on the whole of it; Bash gives it to that command alone, after the commands
    /// before it have run. A `cd` before it moves the target, and words after the target are
    /// that command's arguments, held to Read rules.
    #[test]
    fn a_redirection_after_a_list_or_pipeline_belongs_to_its_last_command() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/.git")).unwrap();
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        std::fs::write(root.join("ws/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("ws/.env"), "KEY=1").unwrap();
        std::fs::write(root.join("ws/README"), "hi").unwrap();
        let policy = Policy::parse(
            "permissions:\n  deny: ['Read(.env)']\n",
            crate::policy::PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: Path::new("/"),
                home: None,
            },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let workspace = Workspace::new(root.join("ws"), vec![], None);
        let decide =
            |command: &str| checked(command, PermissionMode::AcceptEdits, &rules, &workspace);
        let cases = [
            // Controls: the target where Bash opens it without a list.
            ("echo x > config", "allow"),
            ("cd .git; echo x > config", "guardrail"),
            ("cd sub && echo x > out.txt", "allow"),
            // The `cd` runs before the redirection is performed.
            ("cd .git && echo x > config", "guardrail"),
            ("cd .git || echo x > config", "guardrail"),
            ("cd .git && echo x | cat > config", "guardrail"),
            ("cd .git && true | true | cat >> config 2>&1", "guardrail"),
            (
                "true && cd .git && echo a | cat | cat > config",
                "guardrail",
            ),
            ("cd .git && ! echo x > config", "guardrail"),
            ("! cd .git && echo x > config", "guardrail"),
            ("cd .git && cat <<< x > config", "guardrail"),
            ("cd .git && cat > config <<EOF\nx\nEOF", "guardrail"),
            ("cd .git && cat <<EOF > config\nx\nEOF", "guardrail"),
            ("cd .git && echo x > /dev/null > config", "guardrail"),
            ("cd .git && echo x 2> config # note", "guardrail"),
            ("cd .git && echo x >| config", "guardrail"),
            ("cd .git && echo x &> config", "guardrail"),
            // Words after the target are the last command's arguments.
            ("true && cat > out.txt .env", "deny"),
            ("true | cat > out.txt .env", "deny"),
            ("true && cat > out.txt README", "allow"),
            ("true || cat 2> err.txt .env README", "deny"),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter_map(|(command, want)| {
                let got = decide(command);
                (got != *want).then(|| format!("`{command}`: {got}, want {want}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn analysis_rules_and_writes_combine() {
        let policy = Policy::parse(
            "permissions:\n  allow: ['Bash(git status)', 'Bash(npm test:*)', 'Edit(out/**)']\n  deny: ['Bash(rm:*)', 'Edit(secret/**)', 'Read(.env)']\n  ask: ['Bash(git push:*)', 'Edit(review/**)']\n",
            crate::policy::PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let workspace = Workspace::new("/ws".into(), vec![], Some("/home/u".into()));
        let kind = |command: &str, mode| checked(command, mode, &rules, &workspace);
        use PermissionMode::{AcceptEdits, BypassPermissions, Default};
        let cases = [
            ("git status", Default, "allow"),
            ("npm test -- -x", Default, "allow"),
            ("npm testx", Default, "ask"),
            ("ls src", Default, "allow"),
            ("rm -rf build", Default, "deny"),
            ("\\rm -rf build", Default, "deny"),
            ("/bin/rm x", Default, "deny"),
            ("git status && rm -rf /", Default, "deny"),
            ("echo $(rm x)", Default, "deny"),
            ("git push origin main", Default, "ask-rule"),
            ("git status > out/s.txt", Default, "allow"),
            ("git status > notes.txt", Default, "ask"),
            ("git status > notes.txt", AcceptEdits, "allow"),
            ("git status > secret/s.txt", AcceptEdits, "deny"),
            ("git status > review/s.txt", AcceptEdits, "ask-rule"),
            ("git status >> .git/config", AcceptEdits, "guardrail"),
            ("echo x >> ~/.bashrc", AcceptEdits, "guardrail"),
            ("git status > /etc/x", AcceptEdits, "deny"),
            ("cat /etc/passwd", Default, "ask"),
            ("cat .env", Default, "deny"),
            ("cat .env", BypassPermissions, "deny"),
            ("FOO=1 head -n1 config/.env", BypassPermissions, "deny"),
            ("grep -r TOKEN .", Default, "deny"),
            ("grep -r TOKEN src", Default, "deny"),
            ("grep TOKEN src/a.rs", Default, "allow"),
            ("rg TOKEN", Default, "deny"),
            ("cat *", Default, "deny"),
            ("git show HEAD:.env", Default, "deny"),
            ("git log -p -- .env", Default, "deny"),
            (
                "git diff --no-index /dev/null .env",
                BypassPermissions,
                "deny",
            ),
            ("jq --rawfile s .env -n '$s'", Default, "deny"),
            ("sort --files0-from=list.txt", Default, "ask"),
            ("md5sum -c sums.txt", Default, "ask"),
            ("wc -l < .env", Default, "deny"),
            ("cat /proc/self/environ", BypassPermissions, "guardrail"),
            (
                "cat /proc/thread-self/environ",
                BypassPermissions,
                "guardrail",
            ),
            (
                "cat /proc/self/task/1/environ",
                BypassPermissions,
                "guardrail",
            ),
            (
                "cat /proc/self/../self/environ",
                BypassPermissions,
                "guardrail",
            ),
            ("grep -r PATH /proc/self", BypassPermissions, "guardrail"),
            ("xxd .env", BypassPermissions, "deny"),
            // A known reader whose check stops at a flag it does not know still reads its
            // operands: they are logged like any program's words.
            ("cat -Z .env", BypassPermissions, "deny"),
            ("head --bogus config/.env", BypassPermissions, "deny"),
            ("wc -l -Q src/a.rs .env", BypassPermissions, "deny"),
            ("cp .env /tmp/x", BypassPermissions, "deny"),
            ("xargs -a .env echo", Default, "deny"),
            ("xargs -a.env echo", Default, "deny"),
            ("source .env", BypassPermissions, "deny"),
            ("cd config && cat .env", Default, "deny"),
            ("timeout 5 cat .env", Default, "deny"),
            ("cat \"$F\"", Default, "deny"),
            ("git grep TOKEN", Default, "deny"),
            ("git cat-file -p HEAD:.env", Default, "deny"),
            ("cat /proc/$$/environ", BypassPermissions, "guardrail"),
            ("cat /proc/*/environ", BypassPermissions, "guardrail"),
            (
                "cat /proc/self/task/*/environ",
                BypassPermissions,
                "guardrail",
            ),
            ("mywrap 'rm -rf /'", BypassPermissions, "deny"),
            ("mywrap ok", BypassPermissions, "ask"),
            ("npm test -- HEAD", Default, "allow"),
            ("npm test > src/x/HEAD", AcceptEdits, "guardrail"),
            ("npm test > .Git/config", AcceptEdits, "guardrail"),
            ("npm test > .HUSKY/pre-commit", AcceptEdits, "guardrail"),
        ];
        for (command, mode, expected) in cases {
            assert_eq!(kind(command, mode), expected, "{command} in {mode}");
        }
    }

    /// Whether a command only reads is read from its one analysis under the run's rules:
    /// what a rule allows (`git status` under `Bash(git status)`) still only reads, a rule
    /// cannot make a writer read-only, and a read outside the workspace is not proven.
    #[test]
    fn read_only_is_read_from_the_one_analysis_whatever_the_rules() {
        let policy = Policy::parse(
            "permissions:\n  allow: ['Bash(git status)', 'Bash(touch:*)', 'Bash(cat:*)']\n  deny: ['Bash(rm:*)']\n",
            crate::policy::PolicyOrigin { file: Path::new("p.yaml"), dir: Path::new("/"), home: None },
        )
        .unwrap();
        let rules = RuleSet::from_policy(&policy);
        let workspace = Workspace::new("/ws".into(), vec![], None);
        let ctx = PermissionContext {
            disk: None,
            auto_allow_bash: false,
            mode: PermissionMode::Plan,
            rules: &rules,
            workspace: &workspace,
        };
        let prepared = |command: &str| BashTool.prepare(&json!({ "command": command })).unwrap();
        let read_only = |command: &str| prepared(command).is_read_only(&ctx);
        assert!(read_only("git status && cat README | wc -l"));
        assert!(read_only("git status"));
        assert!(!read_only("git status && cat /etc/hosts"));
        assert!(!read_only("echo x > file"));
        assert!(!read_only("touch x"));
        assert!(!read_only("rm x"));
        assert!(!read_only("npm test"));
        assert!(prepared("ls").is_concurrency_safe(&ctx));
        assert!(!prepared("touch x").is_concurrency_safe(&ctx));
    }

    /// An explore sub-agent runs Bash only where this says read-only: every way a command
    /// can write or start a program it does not name — redirections of every form,
    /// writing flags of readers, git subcommands and `-c` config, `find` actions, `xargs`,
    /// here-docs, wrappers, substitutions, a `cd` first, compound commands, variables that
    /// change what a later command runs — must come back not read-only.
    #[test]
    fn no_way_of_writing_passes_for_read_only() {
        let read_only = |command: &str| {
            let call = BashTool.prepare(&json!({ "command": command })).unwrap();
            crate::policy::with_test_context(|ctx| call.is_read_only(ctx))
        };
        let writes = [
            "echo x > f",
            "echo x >| f",
            "echo x >> f",
            "echo x &> f",
            "echo x 2> f",
            "exec > f",
            "exec 3>f",
            "ls 1<>f",
            "cat <>f",
            "tee f",
            "echo x | tee f",
            "sed -i s/a/b/ f",
            "sed --in-place s/a/b/ f",
            "sed -n 'w f' g",
            "sed 's/a/b/w f' g",
            "sed -e 's/x/y/e' f",
            "git branch x",
            "git branch -m x",
            "git branch -u x",
            "git tag t",
            "git tag -d x",
            "git checkout .",
            "git stash",
            "git config user.name x",
            "git commit -m x",
            "git reset --hard",
            "git clean -fd",
            "git log --output=f",
            "git diff --output=f",
            "git -c core.pager='touch p' log",
            "git -c alias.x='!touch p' x",
            "git -c core.fsmonitor=x status",
            "git remote add x y",
            "git worktree add ../w",
            "git grep -O x",
            "git status; git branch -D main",
            "find . -delete",
            "find . -exec rm {} \\;",
            "find . -execdir rm {} +",
            "find . -ok rm {} \\;",
            "find . -fprint f",
            "find . -fls f",
            "xargs rm",
            "ls | xargs -I{} touch {}",
            "cat <<EOF > f\nx\nEOF",
            "cat <<EOF\n$(touch p)\nEOF",
            "env rm f",
            "env X=1 touch f",
            "nice rm f",
            "timeout 1 rm f",
            "command rm f",
            "exec rm f",
            "time rm f",
            "cat <(touch p)",
            "diff <(ls) >(tee f)",
            "echo $(touch p)",
            "echo `touch p`",
            "cd /tmp && touch f",
            "cd .. && echo x > f",
            "ln -s /etc/passwd x",
            "sort -o f g",
            "sort --compress-program=touch f",
            "uniq a b",
            "tar xf x.tar",
            "awk 'BEGIN{system(\"touch p\")}'",
            "rg --pre=touch x",
            "xxd -r a b",
            "yq -i . f",
            "date -s 2020",
            "PATH=. ls",
            "declare PATH=.; ls",
            "declare -x GIT_EXTERNAL_DIFF='touch p'; git diff",
            "read PATH < f; ls",
            "read x < f; $x",
            "declare -x RIPGREP_CONFIG_PATH=f; rg x",
            "GIT_DIR=x git status",
            "unset PATH; ls",
            "declare -x BASH_ENV=f; ls",
            "echo ${PATH:=.}; ls",
            "[[ $(touch p) ]]",
            "(touch f)",
            "{ touch f; }",
            "ls && touch f",
            "ls || touch f",
            "if true; then touch f; fi",
            "for i in 1; do touch f; done",
            "f() { touch p; }; f",
            "eval touch f",
            "source x",
            "bash -c 'touch f'",
            "trap 'touch p' EXIT",
            "ls & touch f",
            "ls > /dev/tcp/127.0.0.1/80",
            "git log --help",
            "git status --help",
            "git diff --he",
            "git help log",
            "sed -f script f",
            "sed 'r f' g",
            "sed 's/a/b/3w f' g",
            "sed 's#a#b#e' g",
            "awk -f prog.awk f",
            "awk -i inplace '{print}' f",
            "awk '{print | \"sh\"}' f",
            "awk '{\"touch p\" | getline}' f",
            "git ls-remote --upload-pack='touch p' x",
            "git show --ext-diff HEAD",
            "git --config-env=core.pager=X log",
            "git submodule foreach 'touch p'",
            "tar tf x.tar -I 'touch p'",
            "env -S 'touch p'",
            "man -P 'touch p' ls",
        ];
        let passed: Vec<&str> = writes.into_iter().filter(|c| read_only(c)).collect();
        assert!(passed.is_empty(), "taken for read-only: {passed:?}");
        let reads = [
            "git status && cat README | wc -l",
            "ls > /dev/null",
            "ls 2>&1",
            "cat < f",
            "git log -p",
            "find . -name x",
            "rg -l x",
            "timeout 5 ls",
            "ls | xargs",
            "cd sub; ls",
            "git log -h",
            "awk '{print}' f",
            "sed -n '1!G;h;$p' f",
        ];
        let refused: Vec<&str> = reads.into_iter().filter(|c| !read_only(c)).collect();
        assert!(refused.is_empty(), "not taken for read-only: {refused:?}");
    }
}

//! Bash authorisation (S5): a command string, rules and a context in, an analysis out.
//! Pure: no file I/O, no processes, no environment reads; symlink resolution is injected.

mod analyser;
mod arg_writes;
mod bindings;
mod bounds;
mod brace;
mod chdir;
mod command;
mod evaluated;
mod follow;
mod git;
mod glob;
mod kind;
mod long_options;
mod made_links;
mod markdown;
mod paths;
mod pattern;
mod plain;
mod programs;
mod readonly;
mod runners;
mod sed;
mod syntax;
mod unproven;
mod word;
mod wrappers;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use foldhash::{HashMap, HashMapExt};

pub use pattern::{CommandPattern, PatternError};
pub use programs::{option_syntax_table, program_effects_table, read_only_table};
pub use runners::runner_hazards_table;

#[cfg(any(test, feature = "test-support"))]
thread_local! {
    static ANALYSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(any(test, feature = "test-support"))]
thread_local! {
    static PARSES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many scripts this thread has read (parsed or scanned), for tests that count analyses
/// per call.
#[cfg(any(test, feature = "test-support"))]
pub fn parses_on_this_thread() -> usize {
    PARSES.with(std::cell::Cell::get)
}

/// The items of `src`: a plain line (see `plain`) is scanned, any other script parsed; a
/// script nested past the bounds is refused before either (see `bounds`).
fn read(src: &str) -> Vec<syntax::Item> {
    #[cfg(any(test, feature = "test-support"))]
    PARSES.with(|count| count.set(count.get() + 1));
    if let Some(refusal) = bounds::bracket_depth_refusal(src) {
        return vec![syntax::Item::Refused(refusal)];
    }
    plain::items(src).unwrap_or_else(|| syntax::items(src))
}

/// How many analyses (walks of a parse against rules and an environment) this thread has
/// made, for tests that count them per call: a parse kept is not yet an analysis kept.
#[cfg(any(test, feature = "test-support"))]
pub fn analyses_on_this_thread() -> usize {
    ANALYSES.with(std::cell::Cell::get)
}

/// Rules as the gate hands them in: each pattern tagged with an opaque id the caller maps
/// back to its rule (file:line).
#[derive(Debug, Clone, Default)]
pub struct BashRules {
    pub allow: Vec<(CommandPattern, usize)>,
    pub ask: Vec<(CommandPattern, usize)>,
    pub deny: Vec<(CommandPattern, usize)>,
}

/// How the caller resolves a path for the command (see [`BashEnv::resolve`]).
pub type Resolve<'a> = dyn Fn(
        &Path,
        tollgate_base::Frame<'_>,
    ) -> Result<tollgate_base::Reached, tollgate_base::Unresolvable>
    + 'a;

/// What the analysis may know about the world, injected by the caller.
pub struct BashEnv<'a> {
    /// Absolute, canonical.
    pub cwd: &'a Path,
    /// Absolute, canonical: workdir + additional_directories.
    pub workspace_roots: &'a [PathBuf],
    pub home: Option<&'a Path>,
    /// Where a path (absolute, or relative to the frame's working directory) leads for the
    /// command, as `base::resolve` says: links followed, dangling ones too, and a process's own
    /// names taken as the command's. Analyses that must not touch the disk pass
    /// `base::resolve_without_disk`.
    pub resolve: &'a Resolve<'a>,
    /// The names in a folder (absolute), for expanding globs; `None` when it cannot be
    /// listed (a glob there is then unproven). Called only for words that hold a glob.
    pub list_dir: &'a dyn Fn(&Path) -> Option<Vec<String>>,
    /// The symbolic links at any depth below a folder (absolute, canonical), none followed,
    /// for commands that follow links as they walk (`ls -LR`, `grep -R`); bounded, an error
    /// past the bounds. Analyses that must not touch the disk find none.
    pub links_below: &'a dyn Fn(&Path) -> Result<Vec<PathBuf>, tollgate_base::LinkWalkError>,
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
    /// Every file or folder the script's known readers read (cat, grep -r, `git show REV:path`,
    /// `<` redirections…), inside the workspace or not, whatever the verdict: the caller checks
    /// each against Read rules and the read guardrails, which reach every mode.
    pub reads: Vec<ReadAccess>,
    /// Rules whose words an unproven command names (`mywrap rm -rf x` for `Bash(rm:*)`): where
    /// nobody reviews what runs (bypassPermissions), such a command is denied, conservatively.
    pub named_denied: Option<(usize, String)>,
    /// Every path a command that is not proven read-only (so runs by a rule or the mode)
    /// names as a file it creates, changes or removes (`cp a b`, `mkdir -p d`, `sed -i … f`),
    /// located like `writes`. The caller holds each against the write guardrails only: the
    /// rule that allowed the command has decided the rest.
    pub named_writes: Vec<PathBuf>,
    /// Such commands that create a git repository (`git init`, `git clone`, `--bare`) or
    /// write files whose names only their input knows (`tar -x`, `unzip`, `patch`): the
    /// caller treats each as a guardrail, since a planted `.git` can hide in them.
    pub unseen_writes: Vec<String>,
    /// Writes and link-following walks that a link the repository holds leads out of the
    /// workspace (`echo x > src/dang` with `src/dang -> /elsewhere/x`, `ls -LR src` over
    /// `src/p1 -> /proc/1`), or that cannot be followed to the end: the caller treats each as
    /// a guardrail, since a name inside the workspace carries no authority over where its
    /// link leads.
    pub link_escapes: Vec<String>,
    /// The whole script only reads, whatever the rules allow or deny: every command proven
    /// read-only, nothing redirected to a file, no script-level problem.
    pub only_reads: bool,
}

/// A path a command reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadAccess {
    /// Absolute, normalised, symlinks resolved. For a glob, the folder before its first
    /// wildcard (with `below` set).
    pub path: PathBuf,
    /// Everything below `path` may be read (`grep -r`, `rg`, a glob).
    pub below: bool,
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
    /// Proven to only read, whatever the rules said of it (`git status` allowed by a rule
    /// still only reads); what plan mode, an explore sub-agent and scheduling ask.
    pub reads_only: bool,
}

impl CommandReport {
    /// Whether it starts a build or test runner of the hazard tables (`cargo`, `npm`, `make`,
    /// `go`, `pytest`, …): a program whose writes its build file, not its arguments, name.
    pub fn runs_a_runner(&self) -> bool {
        runners::is_runner(&self.argv)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandVerdict {
    AllowedByRule(usize),
    ReadOnly,
    Denied(usize),
    AskRule(usize),
    Unproven,
}

/// Scripts longer than this are not analysed (bounded work): they are refused.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

/// A command as a call carries it: its source, parsed by tree-sitter at most once, together
/// with every script found inside it (`sh -c '…'`, hidden substitutions). Judging it again —
/// against rules, for read-only-ness, in another mode — walks the kept parse.
#[derive(Debug)]
pub struct Script {
    source: String,
    /// The script's own items, parsed on first need.
    top: OnceLock<Arc<[syntax::Item]>>,
    /// The scripts found inside it (`sh -c '…'`, hidden substitutions), by source.
    parses: Mutex<HashMap<String, Arc<[syntax::Item]>>>,
}

impl Script {
    pub fn new(source: impl Into<String>) -> Script {
        Script {
            source: source.into(),
            top: OnceLock::new(),
            parses: Mutex::new(HashMap::new()),
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The items of `src` (this script or one found inside it), parsed on first need.
    fn items(&self, src: &str) -> Arc<[syntax::Item]> {
        if std::ptr::eq(src, self.source.as_str()) {
            return self.top.get_or_init(|| read(src).into()).clone();
        }
        let mut parses = self.parses.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(items) = parses.get(src) {
            return items.clone();
        }
        let items: Arc<[syntax::Item]> = read(src).into();
        parses.insert(src.to_owned(), items.clone());
        items
    }
}

/// Whether the words after `git SUB` (as a rule writes them: `git stash list`) pick one of
/// the subcommand's listing forms, which change nothing whatever follows (see `git`'s table).
pub fn git_listing_action(sub: &str, action: Option<&str>) -> bool {
    git::listing_action(sub, action)
}

/// Parses `script` and analyses it against `rules` (see [`evaluate_parsed`]).
pub fn evaluate(script: &str, rules: &BashRules, env: &BashEnv) -> BashAnalysis {
    evaluate_parsed(&Script::new(script), rules, env)
}

/// `script` analysed in `/ws` (the workspace), home `/home/u`, paths as written: the unit
/// tests' one fixture for an analysis.
#[cfg(any(test, feature = "test-support"))]
pub fn evaluate_in_test_workspace(script: &str, rules: &BashRules) -> BashAnalysis {
    let roots = [PathBuf::from("/ws")];
    let env = BashEnv {
        cwd: Path::new("/ws"),
        workspace_roots: &roots,
        home: Some(Path::new("/home/u")),
        resolve: &tollgate_base::resolve_without_disk,
        list_dir: &|_| Some(Vec::new()),
        links_below: &|_| Ok(Vec::new()),
    };
    evaluate(script, rules, &env)
}

/// `script` analysed against `rules` in the workspace `ws` on the real disk, links and all,
/// with no home folder.
#[cfg(any(test, feature = "test-support"))]
pub fn evaluate_on_disk_in_test(script: &str, ws: &Path, rules: &BashRules) -> BashAnalysis {
    let roots = [ws.to_path_buf()];
    let resolve =
        |p: &Path, frame: tollgate_base::Frame<'_>| tollgate_base::resolve(p, frame, &roots, None);
    let list = |dir: &Path| {
        let names = std::fs::read_dir(dir).ok()?;
        Some(
            names
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect(),
        )
    };
    let env = BashEnv {
        cwd: &roots[0],
        workspace_roots: &roots,
        home: None,
        resolve: &resolve,
        list_dir: &list,
        links_below: &tollgate_base::links_below,
    };
    evaluate(script, rules, &env)
}

/// Analyses `script` against `rules`. Precedence over the whole script: any deny ⇒ Deny;
/// else any ask-rule match ⇒ Ask with its rule; else anything unproven ⇒ Ask; else Allow.
pub fn evaluate_parsed(parsed: &Script, rules: &BashRules, env: &BashEnv) -> BashAnalysis {
    #[cfg(any(test, feature = "test-support"))]
    ANALYSES.with(|count| count.set(count.get() + 1));
    let script = parsed.source();
    // Refused in every mode: what is not analysed, no deny rule reaches.
    if script.len() > MAX_SCRIPT_BYTES {
        return BashAnalysis {
            verdict: BashVerdict::Deny {
                rule: None,
                reason: format!(
                    "the command is {} bytes long; commands over {MAX_SCRIPT_BYTES} bytes are not analysed",
                    script.len()
                ),
            },
            commands: Vec::new(),
            writes: Vec::new(),
            reads: Vec::new(),
            named_denied: None,
            named_writes: Vec::new(),
            unseen_writes: Vec::new(),
            link_escapes: Vec::new(),
            only_reads: false,
        };
    }
    let mut analyser = analyser::Analyser::new(rules, env, parsed);
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
        run_with(script, &rules())
    }

    fn run_with(script: &str, rules: &BashRules) -> BashAnalysis {
        evaluate_in_test_workspace(script, rules)
    }

    /// A `*` in a rule stands for words of one simple command only: a compound, a pipe, a
    /// newline or a substitution is judged part by part, so the wildcard never carries an
    /// allow across to the next command, and a deny glob still finds a command wherever it is.
    #[test]
    fn wildcard_rules_never_reach_across_commands() {
        let p = |s: &str, id| (CommandPattern::parse(s).unwrap(), id);
        let rules = BashRules {
            allow: vec![p("ls*", 1), p("* --version", 2), p("scripts/*", 3)],
            ask: vec![],
            deny: vec![p("rm -rf /*", 4)],
        };
        #[derive(Debug, PartialEq)]
        enum Want {
            Allow,
            Ask,
            Deny,
        }
        let cases: &[(&str, Want)] = &[
            ("lsof -i", Want::Allow),
            ("node --version", Want::Allow),
            ("scripts/build.sh --all", Want::Allow),
            ("ls; touch x", Want::Ask),
            ("ls && touch x", Want::Ask),
            ("ls || touch x", Want::Ask),
            ("ls | sh", Want::Ask),
            ("ls\ntouch x", Want::Ask),
            ("ls & touch x", Want::Ask),
            ("ls $(touch x)", Want::Ask),
            ("ls `touch x`", Want::Ask),
            ("ls <(touch x)", Want::Ask),
            ("touch x; node --version", Want::Ask),
            ("scripts/a.sh; touch x", Want::Ask),
            ("(ls; touch x)", Want::Ask),
            ("rm -rf /", Want::Deny),
            ("rm -rf /home", Want::Deny),
            ("ls; rm -rf /tmp", Want::Deny),
            ("echo $(rm -rf /etc)", Want::Deny),
            ("ls | xargs rm -rf /x", Want::Deny),
            ("rm -rf $dir", Want::Deny),
            ("rm -rf ./build", Want::Ask),
        ];
        for (script, want) in cases {
            let got = match run_with(script, &rules).verdict {
                BashVerdict::Allow => Want::Allow,
                BashVerdict::Ask { .. } => Want::Ask,
                BashVerdict::Deny { .. } => Want::Deny,
            };
            assert_eq!(&got, want, "{script}");
        }
    }

    /// Options are sliced after their dash and letter; a letter outside ASCII (`-é`, Latin-1
    /// `-\u{82}`) once panicked on a byte index (found by the fuzz target). Every program
    /// family with its own option reader is tried.
    #[test]
    fn options_with_non_ascii_letters_never_panic() {
        let programs = [
            "xxd",
            "cp",
            "cat",
            "grep",
            "sed -n",
            "git",
            "git -c",
            "cargo test",
            "npm test",
            "make",
            "pytest",
            "go test",
            "env",
            "env -S",
            "timeout 1",
            "nice",
            "parallel",
            "xargs",
            "find .",
            "script",
            "flock x",
            "watch",
            "unshare",
            "sudo",
            "jq",
            "tar",
        ];
        let options = [
            "-é",
            "-\u{82}",
            "-éx",
            "--é",
            "-é=x",
            "-\u{82}é",
            "-aé",
            "-é é",
        ];
        for program in programs {
            for option in options {
                let _ = run(&format!("{program} {option} x"));
            }
        }
        let _ = run("\u{1}\0-\u{82}\0\0\0\u{1}\0\0\0\u{7}<");
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
    fn deny_rules_reach_past_git_global_options() {
        for script in [
            "git -C . reset --hard",
            "git -C/ws reset",
            "git --git-dir=.git --work-tree . reset",
            "git --no-pager -c color.ui=never reset",
            "git --unknown-opt value reset",
            "git -c alias.r=reset r --hard",
            "git -c 'alias.x=!rm -rf src' x",
            "git -c core.pager='rm x' log",
        ] {
            assert!(
                matches!(run(script).verdict, BashVerdict::Deny { .. }),
                "{script}: {:?}",
                run(script).verdict
            );
        }
        assert!(matches!(
            run("git -C . push").verdict,
            BashVerdict::Ask { rule: Some(3), .. }
        ));
    }

    #[test]
    fn a_rule_that_spells_out_a_hazardous_option_allows_it() {
        let p = |s: &str, id| (CommandPattern::parse(s).unwrap(), id);
        let rules = BashRules {
            allow: vec![p("cargo test --config ci.toml:*", 1), p("npm test:*", 2)],
            ..BashRules::default()
        };
        let roots = [PathBuf::from("/ws")];
        let env = BashEnv {
            cwd: Path::new("/ws"),
            workspace_roots: &roots,
            home: None,
            resolve: &tollgate_base::resolve_without_disk,
            list_dir: &|_| Some(Vec::new()),
            links_below: &|_| Ok(Vec::new()),
        };
        let verdict = |script: &str| evaluate(script, &rules, &env).verdict;
        assert_eq!(
            verdict("cargo test --config ci.toml --lib"),
            BashVerdict::Allow
        );
        assert!(matches!(
            verdict("cargo test --config ci.toml --config x.toml"),
            BashVerdict::Ask { .. }
        ));
        assert!(matches!(
            verdict("npm test --prefix=/tmp"),
            BashVerdict::Ask { .. }
        ));
    }

    #[test]
    fn reads_are_reported_for_the_caller() {
        let a = run("cat README.md < in.txt; grep -r x src; git show HEAD:a/b; cat /etc/hosts");
        let reads: Vec<(String, bool)> = a
            .reads
            .iter()
            .map(|r| (r.path.display().to_string(), r.below))
            .collect();
        for expected in [
            ("/ws/in.txt", false),
            ("/ws/README.md", false),
            ("/ws/src", true),
            ("/ws/a/b", false),
            ("/etc/hosts", false),
        ] {
            assert!(
                reads.contains(&(expected.0.to_owned(), expected.1)),
                "{expected:?} not in {reads:?}"
            );
        }
    }

    #[test]
    fn an_unproven_command_naming_a_denied_program_is_flagged() {
        assert_eq!(
            run("mywrap 'rm -rf /'").named_denied.map(|(id, _)| id),
            Some(4)
        );
        assert_eq!(run("mywrap ls").named_denied, None);
        assert_eq!(run("git status").named_denied, None);
    }

    #[test]
    fn oversized_input_is_refused_without_analysis() {
        let big = "echo hi\n".repeat(MAX_SCRIPT_BYTES / 8 + 1);
        assert!(matches!(
            run(&big).verdict,
            BashVerdict::Deny { rule: None, .. }
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

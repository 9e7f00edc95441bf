//! What a command writes through its arguments rather than its redirections: the paths file
//! utilities create, change or remove, and the commands that make a git repository or unpack
//! files whose names only an archive or a patch knows. Only commands that run by a rule (or by
//! the mode) get here; the caller holds these against the write guardrails, which an allow
//! rule cannot lift (`Bash(cp:*)` must not plant `src/x/.git/config`). Which program writes
//! what is its definition's (`programs`, `Writes`); this module reads the arguments so.

use std::path::PathBuf;

use super::analyser::Analyser;
use super::git;
use super::long_options::{LongOptions, any_of};
use super::paths::{escape_through_link, locate};
use super::pattern::base;
use super::programs::{self, Effects, NO_WRITES, Script, Unpacks};
use super::word::Word;

impl Analyser<'_> {
    /// Records what `argv` writes through its arguments (see the module comment).
    pub(crate) fn argument_writes(&mut self, text: &str, argv: &[Word]) {
        let Some(name) = argv.first().and_then(Word::fixed).map(base) else {
            return;
        };
        let args = &argv[1..];
        let effects = programs::effects(name);
        let syntax = effects.map_or(LongOptions::Prefix, |e| e.long_options);
        // A program the analyser knows nothing of names no write it can see (a runner's output
        // options are the runner's table's, below).
        let writes = effects.map_or(&NO_WRITES, |e: &Effects| &e.writes);
        self.output_option_writes(text, writes.output_options, args);
        if let Some(why) = writes
            .script
            .and_then(|script| program_writes(script, args))
        {
            self.unseen_writes.push(format!("`{text}` {why}"));
        }
        if writes.repositories {
            match git_makes_repository(args, syntax) {
                Some(why) => self.unseen_writes.push(format!("`{text}` {why}")),
                None => self.git_pathspecs(args),
            }
        } else if let Some(why) = unpacks_unseen_names(&writes.unpacks, syntax, args) {
            self.unseen_writes.push(format!("`{text}` {why}"));
        } else if writes.operands {
            self.operand_writes(text, args);
            self.made_links(text, name, args);
        } else {
            for value in super::runners::path_values(argv) {
                self.link_escape(text, &value);
                // A value that is not known, or outside, is the hazard table's to refuse.
                if let Ok(paths) = locate(&value, self.env, &self.cwds) {
                    self.add_named_writes(paths);
                }
            }
        }
    }

    /// The files a program's output options name (`Writes::output_options`): each is held to
    /// the write guardrails, a committed link leading it out of the workspace is a link escape,
    /// and a value not known statically an unseen write.
    fn output_option_writes(&mut self, text: &str, options: &[&str], args: &[Word]) {
        if options.is_empty() {
            return;
        }
        let mut values: Vec<Word> = Vec::new();
        let mut words = args.iter();
        while let Some(word) = words.next() {
            let Some(v) = word.fixed() else { continue };
            if v == "--" {
                break;
            }
            for option in options.iter() {
                if let Some(long) = option.strip_prefix("--") {
                    if v == *option {
                        values.extend(words.clone().next().cloned());
                    } else if let Some(value) = v
                        .strip_prefix("--")
                        .and_then(|rest| rest.strip_prefix(long))
                        .and_then(|rest| rest.strip_prefix('='))
                    {
                        values.push(Word::literal(value));
                    }
                } else if let Some(letter) = option.chars().nth(1)
                    && !v.starts_with("--")
                    && let Some(cluster) = v.strip_prefix('-')
                    && let Some(at) = cluster.find(letter)
                {
                    // `-o FILE`, `-sSo FILE`, `-oFILE`.
                    let rest = &cluster[at + letter.len_utf8()..];
                    if rest.is_empty() {
                        values.extend(words.clone().next().cloned());
                    } else {
                        values.push(Word::literal(rest));
                    }
                }
            }
        }
        for value in values {
            if value.value.is_none() {
                self.unseen_writes.push(format!(
                    "`{text}` writes to `{}`, which is not known statically",
                    value.raw
                ));
                continue;
            }
            self.link_escape(text, &value);
            if let Ok(paths) = locate(&value, self.env, &self.cwds) {
                self.add_named_writes(paths);
            }
        }
    }

    /// Every operand may be a path written (`cp a b` writes `b/a` when `b` is a folder, so
    /// sources count as names too); `--opt=value` and `of=value` name one after the `=`.
    fn operand_writes(&mut self, text: &str, args: &[Word]) {
        for word in args {
            if word
                .fixed()
                .is_some_and(|v| v.starts_with('-') && !v.contains('='))
            {
                continue;
            }
            // A name not known here may be led anywhere by a committed link: no mode's
            // say-so reaches it (see `unseen_writes`).
            let Some(value) = word.value.as_deref() else {
                let why = format!(
                    "`{text}` writes to `{}`, which is not known statically",
                    word.raw
                );
                self.unseen_writes.push(why.clone());
                self.problems.push(why);
                continue;
            };
            let mut names = vec![word.clone()];
            if !word.glob
                && let Some((_, after)) = value.split_once('=')
            {
                names.push(Word::literal(after));
            }
            for name in names {
                self.link_escape(text, &name);
                match locate(&name, self.env, &self.cwds) {
                    Ok(paths) => self.add_named_writes(paths),
                    Err(e) => {
                        let why = format!("`{text}` writes to a path not known statically: {e}");
                        self.unseen_writes.push(why.clone());
                        self.problems.push(why);
                    }
                }
            }
        }
    }

    /// Git run by a rule writes the work tree from its own content (`git checkout main --
    /// .husky/pre-commit`, `git restore`, `git apply`): a word that looks like a path (it
    /// holds a `/` or starts with `.`) is held to the guardrails. Revisions (`HEAD`, `main`,
    /// `origin/main`) name nothing guarded, and messages are not paths, so nothing else is
    /// asked about.
    fn git_pathspecs(&mut self, args: &[Word]) {
        for word in args {
            let Some(value) = word.fixed() else { continue };
            let looks_like_path = value.contains('/') || value.starts_with('.');
            if value.starts_with('-') || !looks_like_path {
                continue;
            }
            if let Ok(paths) = locate(word, self.env, &self.cwds) {
                self.add_named_writes(paths);
            }
        }
    }

    /// A name in the workspace that a committed link leads out of it (`touch src/dang`).
    pub(crate) fn link_escape(&mut self, text: &str, word: &Word) {
        if let Some(escape) = escape_through_link(word, self.env, &self.cwds) {
            self.link_escapes.push(format!("`{text}` writes {escape}"));
        }
    }

    pub(crate) fn add_named_writes(&mut self, paths: Vec<PathBuf>) {
        for path in paths {
            if !self.named_writes.contains(&path) {
                self.named_writes.push(path);
            }
        }
    }
}

/// Why this git invocation makes a repository, if it does.
fn git_makes_repository(args: &[Word], syntax: LongOptions) -> Option<&'static str> {
    let fixed: Vec<&str> = args.iter().filter_map(Word::fixed).collect();
    // `git clone --mirr`, `git init --separate-git=…`: parse-options takes prefixes.
    if fixed
        .iter()
        .any(|v| any_of(v, git::REPOSITORY_OPTIONS, syntax, ""))
    {
        return Some("creates a git repository or moves a git directory");
    }
    let mut words = fixed.iter();
    while let Some(word) = words.next() {
        if git::GLOBAL_OPTIONS_WITH_VALUE.contains(word) {
            words.next();
        } else if !word.starts_with('-') {
            return git::REPOSITORY_MAKERS
                .contains(word)
                .then_some("creates a git repository");
        }
    }
    None
}

/// Why a sed or awk program in `args` writes files only it names (sed's `w`, `s///w`, awk's
/// `>`), if one does: a committed link may lead such a file anywhere.
fn program_writes(script: Script, args: &[Word]) -> Option<&'static str> {
    use super::sed::{ProgramRefused, check_awk_program, check_sed_script};
    let check: fn(&str) -> Result<(), ProgramRefused> = match script {
        Script::Sed => check_sed_script,
        Script::Awk => check_awk_program,
    };
    let writes = args.iter().filter_map(Word::fixed).any(|v| {
        let program = v.strip_prefix("--expression=").unwrap_or(v);
        !program.starts_with('-')
            && matches!(
                check(program),
                Err(ProgramRefused::SedWrites
                    | ProgramRefused::SubstituteWrites
                    | ProgramRefused::AwkRedirect)
            )
    });
    writes.then_some("writes to files its program names (sed `w`, awk `>`)")
}

/// Why this command writes files whose names the analyser cannot see, if it does: when
/// `unpacks` says so of its arguments, long options read as `syntax`.
fn unpacks_unseen_names(
    unpacks: &Unpacks,
    syntax: LongOptions,
    args: &[Word],
) -> Option<&'static str> {
    let fixed: Vec<&str> = args.iter().filter_map(Word::fixed).collect();
    let unpacks = match unpacks {
        Unpacks::Never => false,
        Unpacks::Always => true,
        Unpacks::Unless(listing) => !fixed.iter().any(|v| listing.contains(v)),
        Unpacks::Mode {
            long,
            letters,
            bundled,
        } => fixed.iter().enumerate().any(|(i, v)| {
            any_of(v, long, syntax, "")
                || (v.starts_with('-') && !v.starts_with("--") && v.contains(*letters))
                // Old-style bundled letters: `tar xzf a.tgz`.
                || (*bundled && i == 0 && !v.starts_with('-') && v.contains(*letters))
        }),
        Unpacks::Command(commands) => fixed.first().is_some_and(|v| commands.contains(v)),
        Unpacks::Key(letter) => fixed
            .first()
            .is_some_and(|v| v.trim_start_matches('-').contains(*letter)),
    };
    unpacks.then_some("writes files whose names only its input knows")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use pretty_assertions::assert_eq;

    use crate::{BashRules, CommandPattern, evaluate_in_test_workspace};

    /// (command, named writes, whether it makes or unpacks something unseen, asks)
    #[test]
    fn argument_writes_table() {
        let rules = BashRules {
            allow: [
                "cp:*",
                "mv:*",
                "mkdir:*",
                "touch:*",
                "git:*",
                "tar:*",
                "unzip:*",
                "dd:*",
                "ln:*",
                "sed:*",
                "npm test:*",
                "cargo test:*",
                "go test:*",
                "pytest:*",
            ]
            .iter()
            .enumerate()
            .map(|(id, p)| (CommandPattern::parse(p).unwrap(), id))
            .collect(),
            ..BashRules::default()
        };
        let cases: &[(&str, &[&str], bool, bool)] = &[
            (
                "mkdir -p src/x/.git/hooks",
                &["/ws/src/x/.git/hooks"],
                false,
                false,
            ),
            (
                "cp cfg src/x/HEAD",
                &["/ws/cfg", "/ws/src/x/HEAD"],
                false,
                false,
            ),
            ("mv -t src/x HEAD", &["/ws/src/x", "/ws/HEAD"], false, false),
            (
                "ln -s ../cfg src/x/.GIT",
                // The target from the working directory, as written, and from the link's
                // folder (`src/x/.GIT` may be a folder), as the kernel resolves it.
                &["/cfg", "/ws/src/x/.GIT", "/ws/src/x/cfg", "/ws/src/cfg"],
                false,
                false,
            ),
            ("touch ~/.bashrc", &["/home/u/.bashrc"], false, false),
            (
                "dd if=a of=.husky/pre-commit",
                &[
                    "/ws/if=a",
                    "/ws/a",
                    "/ws/of=.husky/pre-commit",
                    "/ws/.husky/pre-commit",
                ],
                false,
                false,
            ),
            (
                "sed -i s/a/b/ .npmrc",
                &["/ws/s/a/b", "/ws/.npmrc"],
                false,
                true,
            ),
            ("cp a \"$DEST\"", &["/ws/a"], true, true),
            // A written name not known statically, whatever the writer.
            ("touch \"$f\"", &[], true, true),
            ("tee -a \"$(cat n)\"", &[], true, true),
            ("mkdir -p \"$d\"/x", &[], true, true),
            ("dd if=a of=\"$f\"", &["/ws/if=a", "/ws/a"], true, true),
            ("sed -i s/a/b/ \"$f\"", &["/ws/s/a/b"], true, true),
            ("truncate -s0 $F", &[], true, true),
            ("ln -s x \"$f\"", &["/ws/x"], true, true),
            ("install a `cat d`", &["/ws/a"], true, true),
            ("mv -t \"${d}\" a", &["/ws/a"], true, true),
            ("git init src/x", &[], true, false),
            (
                "git -C src clone https://example.org/r.git",
                &[],
                true,
                false,
            ),
            ("git --bare status", &[], true, false),
            ("git worktree add ../w", &[], true, false),
            ("git -c x=y commit -m init", &[], false, true),
            ("git log HEAD", &[], false, false),
            (
                "git checkout main -- .husky/pre-commit",
                &["/ws/.husky/pre-commit"],
                false,
                false,
            ),
            ("git commit -m \"$msg\"", &[], false, false),
            ("tar xzf a.tgz", &[], true, false),
            ("tar -C out -xf a.tar", &[], true, false),
            ("tar -czf out.tgz .github", &[], false, false),
            ("unzip a.zip", &[], true, false),
            ("unzip -l a.zip", &[], false, false),
            ("npm test -- HEAD", &[], false, false),
            ("cat .git/config", &[], false, false),
            // A runner's output options write where they point, inside the workspace too.
            (
                "cargo test -- --logfile=.git/config",
                &["/ws/.git/config"],
                false,
                false,
            ),
            (
                "cargo test -- --logfile .git/config",
                &["/ws/.git/config"],
                false,
                false,
            ),
            (
                "cargo test --target-dir .git/t",
                &["/ws/.git/t"],
                false,
                false,
            ),
            (
                "go test -coverprofile=.git/hooks/pre-commit ./...",
                &["/ws/.git/hooks/pre-commit"],
                false,
                false,
            ),
            (
                "pytest --junitxml=.github/workflows/x.yml",
                &["/ws/.github/workflows/x.yml"],
                false,
                false,
            ),
            (
                "pytest --junit=.github/workflows/x.yml",
                &["/ws/.github/workflows/x.yml"],
                false,
                false,
            ),
            ("cargo test -- --nocapture", &[], false, false),
            // Programs that name the files they write.
            ("sed -n 'w src/x' a", &["/ws/w src/x", "/ws/a"], true, false),
            (
                "sed 's/a/b/w out' a",
                &["/ws/s/a/b/w out", "/ws/a"],
                true,
                false,
            ),
            ("awk '{print > \"x\"}' a", &[], true, true),
            ("awk '{print $1}' a", &[], false, false),
            // Output options of programs that are no file utility.
            ("sort -o .npmrc a", &["/ws/.npmrc"], false, true),
            ("sort -o.npmrc a", &["/ws/.npmrc"], false, true),
            ("sort --output=.git/x a", &["/ws/.git/x"], false, true),
            (
                "curl -sSo .git/hooks/pre-commit u",
                &["/ws/.git/hooks/pre-commit"],
                false,
                true,
            ),
            ("wget -O \"$f\" u", &[], true, true),
            (
                "git diff --output=.husky/pre-commit",
                &["/ws/.husky/pre-commit"],
                false,
                true,
            ),
            ("git diff --output \"$f\"", &[], true, true),
        ];
        for (command, named, unseen, asks) in cases {
            let analysis = evaluate_in_test_workspace(command, &rules);
            let named: Vec<PathBuf> = named.iter().map(PathBuf::from).collect();
            assert_eq!(analysis.named_writes, named, "{command}");
            assert_eq!(!analysis.unseen_writes.is_empty(), *unseen, "{command}");
            assert_eq!(
                matches!(analysis.verdict, crate::BashVerdict::Ask { .. }),
                *asks,
                "{command}"
            );
        }
    }
}

//! Recursive commands that follow symbolic links as they walk (`ls -LR`, `grep -R`,
//! `find -L`, `du -L`, `cp -rL`, `tar -h`, `rsync -L`, `zip -r`, `chmod -RL`): the folder
//! they name is not all they reach. Every link below a named folder inside the workspace
//! (found by a bounded walk of the disk that follows none) is looked up in the command's
//! frame and judged as what it leads to, as if the command had named it: a read of its
//! target, everything below a folder included, so Read rules and the guardrails reach a
//! `.env` or a `/proc/1` behind a link in every mode (for the `chmod` family also a write,
//! held to the write guardrails). A target outside the workspace is a guardrail, as for a
//! plain read or write through such a link (`paths::escape_through_link`): a name inside the
//! workspace carries no authority over where the repository's link leads. A link that
//! cannot be read, or a walk past its bounds, is a guardrail too: what it would reach is not
//! known. A link to a folder inside the workspace is walked in turn.

use std::path::PathBuf;

use super::analyser::Analyser;
use super::long_options::any_of;
use super::paths::{inside_workspace, locate};
use super::pattern::base;
use super::programs::{self, Access};
use super::word::Word;
use tollgate_base::{Frame, Reached, Unresolvable};

/// Folders (named ones and link targets inside the workspace) one command's walk visits.
const MAX_FOLDERS: usize = 64;

/// Whether `name` run with `args` follows links below its folder operands, and how: its
/// definition's options (`programs`, `Follow`), read as the program reads them.
fn follows(name: &str, args: &[&str]) -> Option<Access> {
    let effects = programs::effects(name)?;
    let follow = effects.follows.as_ref()?;
    let has = |table: &[&str]| {
        args.iter()
            .any(|a| any_of(a, table, effects.long_options, ""))
    };
    let bundled = follow.bundled.is_some_and(|letter| {
        args.first()
            .is_some_and(|a| !a.starts_with('-') && a.contains(letter))
    });
    let given = follow.all_of.iter().all(|table| has(table)) && !has(follow.unless);
    (given || bundled).then_some(follow.access)
}

impl Analyser<'_> {
    /// Judges what a link-following walk of `argv` reaches below its folder operands (see
    /// the module comment). Operands not known statically are judged as reads elsewhere.
    pub(crate) fn followed_links(&mut self, text: &str, argv: &[Word]) {
        let Some(name) = argv.first().and_then(Word::fixed).map(base) else {
            return;
        };
        let fixed: Vec<&str> = argv[1..].iter().filter_map(Word::fixed).collect();
        let Some(how) = follows(name, &fixed) else {
            return;
        };
        let mut folders: Vec<PathBuf> = Vec::new();
        for word in &argv[1..] {
            if word.value.is_none() || word.fixed().is_some_and(|v| v.starts_with('-')) {
                continue;
            }
            for path in locate(word, self.env, &self.cwds).unwrap_or_default() {
                if inside_workspace(&path, self.env) && !folders.contains(&path) {
                    folders.push(path);
                }
            }
        }
        let cwd = match &self.cwds {
            super::paths::Cwds::Known(list) => list.first().cloned(),
            super::paths::Cwds::Unknown => None,
        };
        let frame = Frame::Command {
            cwd: cwd.as_deref(),
        };
        let mut walked = 0;
        while walked < folders.len() {
            if walked == MAX_FOLDERS {
                self.link_escapes.push(format!(
                    "`{text}` follows links into more than {MAX_FOLDERS} folders"
                ));
                return;
            }
            let folder = folders[walked].clone();
            walked += 1;
            let links = match (self.env.links_below)(&folder) {
                Ok(links) => links,
                Err(e) => {
                    self.link_escapes
                        .push(format!("`{text}` follows links below a folder: {e}"));
                    continue;
                }
            };
            for link in links {
                self.judge_followed(text, how, &link, frame, &mut folders);
            }
        }
    }

    /// What following `link` reaches: a read (or write) of its target, everything below a
    /// folder included; a target outside the workspace is an ask like any read outside (a
    /// write there is a guardrail: see the module comment).
    fn judge_followed(
        &mut self,
        text: &str,
        how: Access,
        link: &std::path::Path,
        frame: Frame<'_>,
        folders: &mut Vec<PathBuf>,
    ) {
        let outside = |what: &str| {
            format!(
                "`{text}` follows the link {} to {what} outside the workspace",
                link.display()
            )
        };
        match (self.env.resolve)(link, frame) {
            Ok(Reached::Path(target)) => {
                // A folder is read whole; a file (or nothing yet) is one read.
                let folder = (self.env.list_dir)(&target).is_some();
                self.reads.record(target.clone(), folder);
                let inside = inside_workspace(&target, self.env);
                if how == Access::Writes {
                    self.add_named_writes(vec![target.clone()]);
                }
                if !inside {
                    let why = outside(&target.display().to_string());
                    self.link_escapes.push(why);
                }
                if inside
                    && !folders
                        .iter()
                        .any(|f| tollgate_base::has_prefix(&target, f))
                {
                    folders.push(target);
                }
            }
            Ok(Reached::ProcessFile(file)) => {
                // The read guardrails refuse a process's files, in every mode.
                self.reads.record(file.clone(), true);
                let why = outside(&format!("the process file {}", file.display()));
                self.link_escapes.push(why);
            }
            Ok(Reached::Stream(_)) | Err(Unresolvable::Loop(_)) => {}
            Err(e) => self
                .link_escapes
                .push(format!("`{text}` follows the link {}: {e}", link.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BashAnalysis, BashRules};
    use std::path::Path;

    /// `script` analysed in `root/ws` on the real disk, links and all.
    fn on_disk(root: &Path, script: &str) -> BashAnalysis {
        crate::evaluate_on_disk_in_test(script, &root.join("ws"), &BashRules::default())
    }

    /// Committed links judged by where they lead: writes through one out of the workspace
    /// and walks that follow one out are link escapes; a walk that does not follow, a write
    /// inside, and a name outside as written are not; a link to `.env` or into `.git` is a
    /// read or write of that path.
    #[test]
    fn committed_links_are_judged_by_where_they_lead() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("src/a/b")).unwrap();
        std::fs::create_dir_all(ws.join("lib")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        let link = |target: &Path, name: &str| std::os::unix::fs::symlink(target, ws.join(name));
        link(&root.join("outside/X"), "src/dang").unwrap();
        link(&root.join("outside"), "src/a/b/out").unwrap();
        link(Path::new("/proc/1"), "lib/p1").unwrap();
        link(Path::new("../.env"), "lib/envlink").unwrap();
        let escapes = |script: &str| on_disk(&root, script).link_escapes;
        for script in [
            "touch src/dang",
            "tee -a src/dang",
            "cp x src/dang",
            "echo x > src/dang",
            "cd src && echo x >> dang",
            "mkdir -p src/a/b/out/new",
            "touch src/d*ng",
            "chmod -RL u+w src",
        ] {
            assert!(!escapes(script).is_empty(), "{script}: no escape found");
        }
        // Walks that follow a link out, and plain reads through one.
        for script in [
            "ls -LR src",
            "grep -R x .",
            "find -L src/a",
            "du -L lib",
            "tar -chf t.tar lib",
            "cat src/a/b/out/secret",
            "wc -l src/dang",
            "cd src && head a/b/out/x",
        ] {
            assert!(!escapes(script).is_empty(), "{script}: no escape found");
        }
        for script in [
            "echo x > src/d*ng",
            "f=src/dang; echo x > \"$f\"",
            "tee \"$(cat n)\"",
        ] {
            assert!(
                !on_disk(&root, script).unseen_writes.is_empty(),
                "{script}: the write not known statically is not a guardrail"
            );
        }
        // A walk past its bounds is refused with the reason, never judged on part of the tree.
        let mut deep = ws.join("deep");
        for _ in 0..=tollgate_base::MAX_WALK_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        assert!(
            escapes("grep -R x deep")
                .iter()
                .any(|why| why.contains("folders more than")),
            "{:?}",
            escapes("grep -R x deep")
        );
        assert_eq!(escapes("grep -r x deep"), Vec::<String>::new());
        let ls = on_disk(&root, "ls -LR lib");
        assert!(ls.reads.iter().any(|r| r.path == Path::new("/proc/1")));
        assert!(ls.reads.iter().any(|r| r.path == ws.join(".env")));
        // The link is named in the reason.
        assert!(
            escapes("touch src/a/b/out/x")[0].contains(&format!(
                "through the link {}",
                ws.join("src/a/b/out").display()
            )),
            "{:?}",
            escapes("touch src/a/b/out/x")
        );
    }

    #[test]
    fn which_commands_follow_links_below_their_folders() {
        let cases: &[(&str, Option<Access>)] = &[
            ("ls -LR src", Some(Access::Reads)),
            ("ls -R -L src", Some(Access::Reads)),
            ("ls --recursive --dereference src", Some(Access::Reads)),
            ("ls -R src", None),
            ("ls -lL src", None),
            ("grep -R x src", Some(Access::Reads)),
            ("grep -rn x src", None),
            ("grep --dereference-recursive x .", Some(Access::Reads)),
            ("rg -L x", Some(Access::Reads)),
            ("rg --follow x", Some(Access::Reads)),
            ("find -L src", Some(Access::Reads)),
            ("find src -follow -name x", Some(Access::Reads)),
            ("find src -name x", None),
            ("du -L src", Some(Access::Reads)),
            ("du -sh src", None),
            ("cp -rL src out", Some(Access::Reads)),
            ("cp -a --dereference src out", Some(Access::Reads)),
            ("cp -r src out", None),
            ("tar -czhf a.tgz src", Some(Access::Reads)),
            ("tar --dereference -cf a.tar src", Some(Access::Reads)),
            ("tar chf a.tar src", Some(Access::Reads)),
            ("tar -czf a.tgz src", None),
            ("rsync -aL src out", Some(Access::Reads)),
            ("rsync -a src out", None),
            ("zip -r a.zip src", Some(Access::Reads)),
            ("zip -ry a.zip src", None),
            ("chmod -RL u+w src", Some(Access::Writes)),
            ("chown -R -L u src", Some(Access::Writes)),
            ("chmod -R u+w src", None),
            ("rm -rf src", None),
        ];
        for (command, want) in cases {
            let words: Vec<&str> = command.split_whitespace().collect();
            assert_eq!(follows(words[0], &words[1..]), *want, "{command}");
        }
    }
}

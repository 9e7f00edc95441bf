//! Links a command makes (`ln`, `link`, `cp -s`, `cp -l`). The disk cannot tell the gate
//! about a link the script itself makes before using it (`ln -s /x/f src/l && echo hi >
//! src/l`, `ln -s ../.env src/e && cat src/e`): every later name through it is judged before
//! the link exists. So the link's target is judged when the link is made, in the frame the
//! kernel resolves it in (a symbolic link's relative target from the link's own folder, a
//! hard link's and `ln -r`'s from the working directory): a target outside the workspace is
//! a link escape (a guardrail, as a committed link leading out is), and a target inside is
//! both a write (a link into `.git/` is a write there) and a read of it — of all below it when
//! it is a folder (a link to `.env` reads `.env`, so `Read` deny rules hold).

use std::path::{Path, PathBuf};

use super::analyser::Analyser;
use super::paths::{Cwds, inside_workspace, locate, reach};
use super::word::Word;

/// How one command makes links, as its options say.
struct LinkCommand<'w> {
    symbolic: bool,
    /// `ln -r`: the target is written relative to the working directory.
    relative: bool,
    /// `-t DIR` / `--target-directory=DIR`.
    target_dir: Option<Word>,
    operands: Vec<&'w Word>,
}

impl Analyser<'_> {
    /// Judges the targets of the links `name` makes (see the module comment).
    pub(crate) fn made_links(&mut self, text: &str, name: &str, args: &[Word]) {
        let Some(command) = link_command(name, args) else {
            return;
        };
        // Where the links are made: `-t DIR`; else the last operand, a folder or the link
        // itself (whether it is a folder may only be known once the script ran, so both);
        // a lone operand makes its link in the working directory.
        let (targets, folders): (&[&Word], Vec<PathBuf>) =
            match (&command.target_dir, &command.operands[..]) {
                (_, []) => return,
                (Some(dir), all) => (all, self.located(dir)),
                (None, [only]) => (
                    std::slice::from_ref(only),
                    match &self.cwds {
                        Cwds::Known(list) => list.clone(),
                        Cwds::Unknown => Vec::new(),
                    },
                ),
                (None, [targets @ .., last]) => (
                    targets,
                    self.located(last)
                        .into_iter()
                        .flat_map(|link| {
                            let parent = link.parent().map(Path::to_path_buf);
                            std::iter::once(link).chain(parent)
                        })
                        .collect(),
                ),
            };
        for target in targets {
            let Some(value) = target.value.as_deref() else {
                // Already an unseen write (`operand_writes`).
                continue;
            };
            let from_cwd = !command.symbolic || command.relative || Path::new(value).is_absolute();
            let reached: Vec<Result<PathBuf, String>> = if from_cwd || target.tilde {
                match locate(target, self.env, &self.cwds) {
                    Ok(paths) => paths.into_iter().map(Ok).collect(),
                    Err(err) => vec![Err(err.to_string())],
                }
            } else {
                folders
                    .iter()
                    .map(|folder| {
                        reach(target, &folder.join(value), Some(folder), self.env)
                            .map_err(|err| err.to_string())
                    })
                    .collect()
            };
            if reached.is_empty() {
                self.unseen_writes.push(format!(
                    "`{text}` makes a link in a folder not known statically"
                ));
            }
            for place in reached {
                match place {
                    Ok(place) if inside_workspace(&place, self.env) => {
                        // A link to a folder reads all below it; to a file (or nothing yet),
                        // that one name.
                        let folder = (self.env.list_dir)(&place).is_some();
                        self.reads.record(place.clone(), folder);
                        self.add_named_writes(vec![place]);
                    }
                    Ok(place) => self.link_escapes.push(format!(
                        "`{text}` makes a link to {}, outside the workspace",
                        place.display()
                    )),
                    Err(err) => self.unseen_writes.push(format!(
                        "`{text}` makes a link whose target cannot be resolved: {err}"
                    )),
                }
            }
        }
    }

    /// Every place `word` may name; none when it is not known (judged elsewhere).
    fn located(&self, word: &Word) -> Vec<PathBuf> {
        locate(word, self.env, &self.cwds).unwrap_or_default()
    }
}

/// The links `name` with `args` makes, if it makes any.
fn link_command<'w>(name: &str, args: &'w [Word]) -> Option<LinkCommand<'w>> {
    let (mut symbolic, mut makes_links) = match name {
        "ln" => (false, true),
        "link" => (false, true),
        "cp" => (false, false),
        _ => return None,
    };
    let mut command = LinkCommand {
        symbolic: false,
        relative: false,
        target_dir: None,
        operands: Vec::new(),
    };
    let mut options_done = name == "link";
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let Some(v) = word.fixed() else {
            command.operands.push(word);
            continue;
        };
        if options_done || !v.starts_with('-') || v == "-" {
            command.operands.push(word);
            continue;
        }
        if v == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = v.strip_prefix("--") {
            let (key, value) = long
                .split_once('=')
                .map_or((long, None), |(k, v)| (k, Some(v)));
            // GNU takes any unambiguous prefix of a long option.
            let spells = |full: &str| key.len() >= 2 && full.starts_with(key);
            if spells("symbolic") || spells("symbolic-link") {
                symbolic = true;
                makes_links = true;
            } else if name == "cp" && spells("link") {
                makes_links = true;
            } else if name == "ln" && spells("relative") {
                command.relative = true;
            } else if spells("target-directory") {
                command.target_dir = match value {
                    Some(dir) => Some(Word::literal(dir)),
                    None => words.next().cloned(),
                };
            } else if spells("suffix") && value.is_none() {
                words.next();
            }
            continue;
        }
        for (at, letter) in v[1..].char_indices() {
            match letter {
                's' => {
                    symbolic = true;
                    makes_links = true;
                }
                'l' if name == "cp" => makes_links = true,
                'r' if name == "ln" => command.relative = true,
                't' | 'S' => {
                    let rest = &v[1 + at + 1..];
                    let value = if rest.is_empty() {
                        words.next().cloned()
                    } else {
                        Some(Word::literal(rest))
                    };
                    if letter == 't' {
                        command.target_dir = value;
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    command.symbolic = symbolic;
    makes_links.then_some(command)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::Path;

    use crate::{BashAnalysis, BashRules, CommandPattern, evaluate_on_disk_in_test};

    /// Whether the analysis holds the script to something a rule cannot lift: a link
    /// escape, an unseen write, a write under `.git/`, or a read of `.env` (a deny rule's).
    fn held(analysis: &BashAnalysis, ws: &Path) -> bool {
        !analysis.link_escapes.is_empty()
            || !analysis.unseen_writes.is_empty()
            || analysis
                .named_writes
                .iter()
                .any(|p| p.starts_with(ws.join(".git")))
            || analysis.reads.iter().any(|read| {
                ws.join(".env").starts_with(&read.path)
                    && (read.below || read.path == ws.join(".env"))
            })
    }

    #[test]
    fn a_link_the_script_makes_is_judged_by_its_target() {
        let outside = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join("src/deep")).unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::write(ws.join(".env"), "K=v").unwrap();
        std::fs::write(ws.join("a.txt"), "a").unwrap();
        symlink(outside.path(), ws.join("src/out")).unwrap();
        let out = outside.path().canonicalize().unwrap();
        let rules = BashRules {
            allow: ["ln:*", "cp:*", "cat:*", "echo:*", "link:*"]
                .iter()
                .enumerate()
                .map(|(id, p)| (CommandPattern::parse(p).unwrap(), id))
                .collect(),
            ..BashRules::default()
        };
        let refused = [
            format!("ln -s {}/f src/l && echo x > src/l", out.display()),
            format!("ln -sf {} src/d; echo x > src/d/f", out.display()),
            "ln -s ../../../ src/deep/up".into(),
            "cd src && ln -s ../../ up".into(),
            "ln -s ../.env src/e && cat src/e".into(),
            "ln -s .env e; cat e".into(),
            "cd src/deep && ln -s ../../.env e && cat e".into(),
            "ln -s ../.git/hooks src/h && echo x > src/h/pre-commit".into(),
            "ln -st src ../.env".into(),
            "ln --symbolic --target-directory=src ../.env".into(),
            "ln -s -t src ../.git".into(),
            "cp -s /etc/passwd src/p".into(),
            format!("cp -l {}/f src/h", out.display()),
            format!("link {}/f src/h2", out.display()),
            format!("ln {}/f src/h3", out.display()),
            "ln -s out/f src/o".into(),
            "ln -rs src/out/f src/r".into(),
            "ln -s \"$T\" src/v".into(),
            "ln -s .. src/up && cat src/up/.env".into(),
            // Through a wrapper, a variable, a function, after `--`.
            "command ln -s ../.env src/e && cat src/e".into(),
            "l=../.env; ln -s \"$l\" src/e && cat src/e".into(),
            "f() { ln -s ../.env src/e; }; f; cat src/e".into(),
            "ln -s -- ../.env src/e; cat src/e".into(),
        ];
        for command in &refused {
            let analysis = evaluate_on_disk_in_test(command, &ws, &rules);
            assert!(held(&analysis, &ws), "{command} is not held: {analysis:?}");
        }
        let allowed = [
            "ln -s a.txt src/a && cat src/a",
            "ln -s ../a.txt src/a",
            "ln -s ../../a.txt src/deep/b",
            "ln -sf deep src/d2",
            "cp -r src/deep src2",
            "cp a.txt src/",
        ];
        for command in allowed {
            let analysis = evaluate_on_disk_in_test(command, &ws, &rules);
            assert!(!held(&analysis, &ws), "{command} is held: {analysis:?}");
        }
    }
}

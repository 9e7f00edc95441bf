//! Recursive commands that follow symbolic links as they walk (`ls -LR`, `grep -R`,
//! `find -L`, `du -L`, `cp -rL`, `tar -h`, `rsync -L`, `zip -r`, `chmod -RL`): the folder
//! they name is not all they reach. Every link below a named folder inside the workspace
//! (found by a bounded walk of the disk that follows none) is looked up in the command's
//! frame and judged as what it leads to: a read of its target, everything below it included
//! (a write for the `chmod` family), so Read rules and the guardrails reach a `.env` or a
//! `/proc/1` behind a link; a target outside the workspace, a link that cannot be read, or a
//! walk past its bounds is a guardrail, since a name inside the workspace carries no
//! authority over where the repository's link leads. A link to a folder inside the
//! workspace is walked in turn.

use std::path::PathBuf;

use super::analyser::Analyser;
use super::long_options::{LongOptions, any_of};
use super::paths::{inside_workspace, locate};
use super::pattern::base;
use super::word::Word;
use crate::base::{Frame, Reached, Unresolvable};

/// Folders (named ones and link targets inside the workspace) one command's walk visits.
const MAX_FOLDERS: usize = 64;

/// What a link-following walk does to what it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Follows {
    Reads,
    /// Changes what it reaches (`chmod -R -L`).
    Writes,
}

/// Whether `name` run with `args` follows links below its folder operands, and how.
fn follows(name: &str, args: &[&str]) -> Option<Follows> {
    let has = |table: &[&str]| {
        args.iter()
            .any(|a| any_of(a, table, LongOptions::Prefix, ""))
    };
    let recursive = || has(&["-r", "-R", "--recursive"]);
    let follows = match name {
        "ls" | "dir" | "vdir" => recursive() && has(&["-L", "--dereference"]),
        "grep" | "egrep" | "fgrep" => has(&["-R", "--dereference-recursive"]),
        "rg" | "fd" | "fdfind" => has(&["-L", "--follow"]),
        "find" => args.iter().any(|a| matches!(*a, "-L" | "-follow")),
        "du" => has(&["-L", "--dereference"]),
        "cp" => (recursive() || has(&["-a", "--archive"])) && has(&["-L", "--dereference"]),
        "tar" | "bsdtar" | "gtar" => {
            has(&["-h", "--dereference"])
                || args
                    .first()
                    .is_some_and(|a| !a.starts_with('-') && a.contains('h'))
        }
        "rsync" => has(&[
            "-L",
            "-k",
            "--copy-links",
            "--copy-unsafe-links",
            "--copy-dirlinks",
        ]),
        "tree" => has(&["-l"]),
        "zip" => has(&["-r", "-R", "--recurse-paths"]) && !has(&["-y", "--symlinks"]),
        "scp" => has(&["-r"]),
        "chmod" | "chown" | "chgrp" => {
            return (recursive() && has(&["-L"])).then_some(Follows::Writes);
        }
        _ => false,
    };
    follows.then_some(Follows::Reads)
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
                match (self.env.resolve)(&link, frame) {
                    Ok(Reached::Path(target)) => {
                        // A folder is read whole; a file (or nothing yet) is one read.
                        let folder = (self.env.list_dir)(&target).is_some();
                        self.reads.record(target.clone(), folder);
                        if how == Follows::Writes {
                            self.add_named_writes(vec![target.clone()]);
                        }
                        if !inside_workspace(&target, self.env) {
                            self.link_escapes.push(format!(
                                "`{text}` follows the link {} to {} outside the workspace",
                                link.display(),
                                target.display()
                            ));
                        } else if !folders.iter().any(|f| crate::base::has_prefix(&target, f)) {
                            folders.push(target);
                        }
                    }
                    Ok(Reached::ProcessFile(file)) => {
                        self.reads.record(file.clone(), true);
                        self.link_escapes.push(format!(
                            "`{text}` follows the link {} to the process file {}",
                            link.display(),
                            file.display()
                        ));
                    }
                    Ok(Reached::Stream(_)) | Err(Unresolvable::Loop(_)) => {}
                    Err(e) => self
                        .link_escapes
                        .push(format!("`{text}` follows the link {}: {e}", link.display())),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_commands_follow_links_below_their_folders() {
        let cases: &[(&str, Option<Follows>)] = &[
            ("ls -LR src", Some(Follows::Reads)),
            ("ls -R -L src", Some(Follows::Reads)),
            ("ls --recursive --dereference src", Some(Follows::Reads)),
            ("ls -R src", None),
            ("ls -lL src", None),
            ("grep -R x src", Some(Follows::Reads)),
            ("grep -rn x src", None),
            ("grep --dereference-recursive x .", Some(Follows::Reads)),
            ("rg -L x", Some(Follows::Reads)),
            ("rg --follow x", Some(Follows::Reads)),
            ("find -L src", Some(Follows::Reads)),
            ("find src -follow -name x", Some(Follows::Reads)),
            ("find src -name x", None),
            ("du -L src", Some(Follows::Reads)),
            ("du -sh src", None),
            ("cp -rL src out", Some(Follows::Reads)),
            ("cp -a --dereference src out", Some(Follows::Reads)),
            ("cp -r src out", None),
            ("tar -czhf a.tgz src", Some(Follows::Reads)),
            ("tar --dereference -cf a.tar src", Some(Follows::Reads)),
            ("tar chf a.tar src", Some(Follows::Reads)),
            ("tar -czf a.tgz src", None),
            ("rsync -aL src out", Some(Follows::Reads)),
            ("rsync -a src out", None),
            ("zip -r a.zip src", Some(Follows::Reads)),
            ("zip -ry a.zip src", None),
            ("chmod -RL u+w src", Some(Follows::Writes)),
            ("chown -R -L u src", Some(Follows::Writes)),
            ("chmod -R u+w src", None),
            ("rm -rf src", None),
        ];
        for (command, want) in cases {
            let words: Vec<&str> = command.split_whitespace().collect();
            assert_eq!(follows(words[0], &words[1..]), *want, "{command}");
        }
    }
}

//! Skills (S9): folders holding a `SKILL.md` — a name, a one-line description, instructions —
//! found under `skills/` in the workdir and under the task's `skills:` paths. Owns finding and
//! parsing them; the Skill tool offers them and the agent loop runs agent-mode ones.
//! Skills in the workdir are repository content: they are text for the model, never a grant.

mod parse;
mod tool;

use std::path::{Path, PathBuf};

pub use parse::parse;
pub(crate) use parse::split_front_matter;
pub use tool::SkillTool;

use crate::base::normalize_lexically;
use crate::config::ConfigError;
use crate::tools::SubagentKind;

/// How the Skill tool uses a skill's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillMode {
    /// Returned as the Skill call's result: the caller follows them in its own context.
    Inject,
    /// Run by a sub-agent of that kind, whose final message is the result.
    Agent(SubagentKind),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub mode: SkillMode,
    pub instructions: String,
    /// The `SKILL.md` it came from, as found (`Read` rules on it gate loading it too).
    pub file: PathBuf,
    /// The same file with every symlink resolved: Read rules and guardrails are checked on
    /// both, so a skill folder that is a link cannot carry a denied file past them.
    pub resolved: PathBuf,
}

/// The file every skill folder holds.
pub const SKILL_FILE: &str = "SKILL.md";

/// Largest `SKILL.md` read: a skill's instructions are a page of text, and a repository's
/// multi-gigabyte (or sparse) file must not be read into memory.
pub const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// The skills under `roots`, sorted by name. A root that is itself a skill folder is one
/// skill; otherwise each of its folders holding a `SKILL.md` is. A root that does not exist
/// holds none. Any unreadable or malformed `SKILL.md`, or two skills of one name, is an error
/// naming the file: a run never starts with a skill silently missing. A root inside
/// `workdir` is repository content: a `SKILL.md` under it that resolves outside the workdir
/// (a linked folder or file) is refused, as Read would refuse it.
pub fn discover(roots: &[PathBuf], workdir: &Path) -> Result<Vec<Skill>, ConfigError> {
    let workdir_real = std::fs::canonicalize(workdir).unwrap_or_else(|_| workdir.to_path_buf());
    let mut skills: Vec<Skill> = Vec::new();
    for root in roots {
        let confined = normalize_lexically(root).starts_with(normalize_lexically(workdir));
        for file in skill_files(root)? {
            let resolved = resolve_confined(&file, confined.then_some(&workdir_real), "skills")?;
            let text = read_bounded(&file)?;
            let mut skill = parse(&text, &file)?;
            skill.resolved = resolved;
            if let Some(first) = skills.iter().find(|seen| seen.name == skill.name) {
                return Err(ConfigError::whole_file(
                    &file,
                    format!(
                        "a second skill named `{}` (the first is {})",
                        skill.name,
                        first.file.display()
                    ),
                ));
            }
            skills.push(skill);
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

/// Where `file` really is; under `inside` (a root in the workdir: repository content), a file
/// that resolves outside it is refused, as Read would refuse it.
pub(crate) fn resolve_confined(
    file: &Path,
    inside: Option<&PathBuf>,
    what: &str,
) -> Result<PathBuf, ConfigError> {
    let resolved = std::fs::canonicalize(file)
        .map_err(|err| ConfigError::whole_file(file, format!("cannot read: {err}")))?;
    match inside {
        Some(workdir) if !resolved.starts_with(workdir) => Err(ConfigError::whole_file(
            file,
            format!(
                "resolves to {} outside the workdir: a repository's {what} stay in the repository",
                resolved.display()
            ),
        )),
        _ => Ok(resolved),
    }
}

/// The text of a regular `file` of at most [`MAX_SKILL_BYTES`] (a skill, an agent, a
/// plugin's manifest, hooks or servers file): a FIFO or a device named by a manifest is
/// refused at once rather than waited on (`input_file`).
pub(crate) fn read_bounded(file: &Path) -> Result<String, ConfigError> {
    let input = crate::input_file::Input {
        what: "file",
        cap: MAX_SKILL_BYTES,
        stdin_flag: false,
    };
    crate::input_file::read_text(file, input)
        .map_err(|err| ConfigError::whole_file(file, err.to_string()))
}

/// The `SKILL.md` files of one root, in name order. A `SKILL.md` that is there but is not a
/// regular file (a FIFO, a device, a folder) is an error, not a skill skipped unseen — and
/// never opened, since opening a FIFO would hang the run before it starts.
fn skill_files(root: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let own = root.join(SKILL_FILE);
    if let Some(file) = regular(&own)? {
        return Ok(vec![file]);
    }
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => {
            return Err(ConfigError::whole_file(
                root,
                format!("cannot list skills: {err}"),
            ));
        }
    };
    let mut files = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        if let Some(file) = regular(&entry.path().join(SKILL_FILE))? {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

/// `Some(file)` for a regular file (through symlinks), `None` where there is nothing, an
/// error for anything else that is there.
fn regular(file: &Path) -> Result<Option<PathBuf>, ConfigError> {
    match std::fs::metadata(file) {
        Ok(meta) if meta.is_file() => Ok(Some(file.to_path_buf())),
        Ok(_) => Err(ConfigError::whole_file(
            file,
            "not a regular file: a SKILL.md is a text file".to_string(),
        )),
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(err) => Err(ConfigError::whole_file(file, format!("cannot read: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skills_are_found_in_folders_and_a_duplicate_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let write = |folder: &str, name: &str| {
            let path = dir.path().join(folder);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(
                path.join(SKILL_FILE),
                format!("---\nname: {name}\ndescription: d\n---\nDo it.\n"),
            )
            .unwrap();
        };
        write("skills/b", "bee");
        write("skills/a", "ay");
        std::fs::create_dir_all(dir.path().join("skills/empty")).unwrap();
        write("extra", "extra");
        let roots = [dir.path().join("skills"), dir.path().join("extra")];
        let names: Vec<String> = discover(&roots, dir.path())
            .unwrap()
            .into_iter()
            .map(|skill| skill.name)
            .collect();
        assert_eq!(names, ["ay", "bee", "extra"]);
        assert!(
            discover(&[dir.path().join("missing")], dir.path())
                .unwrap()
                .is_empty()
        );
        write("again/c", "bee");
        let err = discover(
            &[dir.path().join("skills"), dir.path().join("again")],
            dir.path(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("a second skill named `bee`"),
            "{err}"
        );
    }

    /// A repository's skills folder cannot reach a file outside the workdir through a link,
    /// hang the run on a FIFO, or fill memory with a huge file; each is an error naming the
    /// file. A link that stays inside the workdir is fine, and its resolved path is kept for
    /// the Read rules.
    #[test]
    fn a_repository_skill_cannot_reach_out_hang_or_fill_memory() {
        use std::os::unix::fs::symlink;
        let skill_text = "---\nname: x\ndescription: d\n---\nDo it.\n";
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("folder")).unwrap();
        std::fs::write(outside.path().join("folder/SKILL.md"), skill_text).unwrap();
        type Plant = fn(&Path, &Path);
        let cases: [(&str, Plant, &str); 8] = [
            (
                "a skill folder linked outside",
                |ws, out| symlink(out.join("folder"), ws.join("skills/x")).unwrap(),
                "outside the workdir",
            ),
            (
                "a SKILL.md linked outside",
                |ws, out| {
                    std::fs::create_dir_all(ws.join("skills/x")).unwrap();
                    symlink(out.join("folder/SKILL.md"), ws.join("skills/x/SKILL.md")).unwrap()
                },
                "outside the workdir",
            ),
            (
                "a skill folder linked through ..",
                |ws, out| {
                    symlink(
                        Path::new("../../..")
                            .join(out.strip_prefix("/").unwrap())
                            .join("folder"),
                        ws.join("skills/x"),
                    )
                    .unwrap()
                },
                "outside the workdir",
            ),
            (
                "a SKILL.md that is a FIFO",
                |ws, _| {
                    std::fs::create_dir_all(ws.join("skills/x")).unwrap();
                    let made = std::process::Command::new("mkfifo")
                        .arg(ws.join("skills/x/SKILL.md"))
                        .status()
                        .unwrap();
                    assert!(made.success());
                },
                "not a regular file",
            ),
            (
                "a SKILL.md linked to a device",
                |ws, _| {
                    std::fs::create_dir_all(ws.join("skills/x")).unwrap();
                    symlink("/dev/zero", ws.join("skills/x/SKILL.md")).unwrap()
                },
                "not a regular file",
            ),
            (
                "a SKILL.md that is a folder",
                |ws, _| std::fs::create_dir_all(ws.join("skills/x/SKILL.md")).unwrap(),
                "not a regular file",
            ),
            (
                "a SKILL.md over the size limit",
                |ws, _| {
                    std::fs::create_dir_all(ws.join("skills/x")).unwrap();
                    let file = std::fs::File::create(ws.join("skills/x/SKILL.md")).unwrap();
                    file.set_len(MAX_SKILL_BYTES + 1).unwrap();
                },
                "larger than",
            ),
            (
                "a SKILL.md that is not UTF-8",
                |ws, _| {
                    std::fs::create_dir_all(ws.join("skills/x")).unwrap();
                    std::fs::write(ws.join("skills/x/SKILL.md"), b"---\nname: \xff\n---\n")
                        .unwrap();
                },
                "not UTF-8",
            ),
        ];
        for (what, plant, expected) in cases {
            let ws = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(ws.path().join("skills")).unwrap();
            plant(ws.path(), outside.path());
            let err = discover(&[ws.path().join("skills")], ws.path())
                .err()
                .unwrap_or_else(|| panic!("{what}: accepted"));
            assert!(err.to_string().contains(expected), "{what}: {err}");
        }
        // The skills root itself linked outside is the same escape.
        let ws = tempfile::tempdir().unwrap();
        symlink(outside.path(), ws.path().join("skills")).unwrap();
        let err = discover(&[ws.path().join("skills")], ws.path()).unwrap_err();
        assert!(err.to_string().contains("outside the workdir"), "{err}");
        // A task's own path outside the workdir is the task author's choice.
        let named = discover(&[outside.path().join("folder")], ws.path()).unwrap();
        assert_eq!(named.len(), 1);
        // A link inside the workdir loads, with its resolved path kept.
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("docs/x")).unwrap();
        std::fs::create_dir_all(ws.path().join("skills")).unwrap();
        std::fs::write(ws.path().join("docs/x/SKILL.md"), skill_text).unwrap();
        symlink(ws.path().join("docs/x"), ws.path().join("skills/x")).unwrap();
        let found = discover(&[ws.path().join("skills")], ws.path()).unwrap();
        assert_eq!(found[0].file, ws.path().join("skills/x/SKILL.md"));
        assert_eq!(
            found[0].resolved,
            std::fs::canonicalize(ws.path().join("docs/x/SKILL.md")).unwrap()
        );
    }
}

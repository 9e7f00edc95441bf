//! Skills (S9): folders holding a `SKILL.md` — a name, a one-line description, instructions —
//! found under `skills/` in the workdir and under the task's `skills:` paths. Owns finding and
//! parsing them; the Skill tool offers them and the agent loop runs agent-mode ones.
//! Skills in the workdir are repository content: they are text for the model, never a grant.

mod parse;
mod tool;

use std::path::{Path, PathBuf};

pub use parse::parse;
pub use tool::SkillTool;

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
    /// The `SKILL.md` it came from (`Read` rules on it gate loading it too).
    pub file: PathBuf,
}

/// The file every skill folder holds.
pub const SKILL_FILE: &str = "SKILL.md";

/// The skills under `roots`, sorted by name. A root that is itself a skill folder is one
/// skill; otherwise each of its folders holding a `SKILL.md` is. A root that does not exist
/// holds none. Any unreadable or malformed `SKILL.md`, or two skills of one name, is an error
/// naming the file: a run never starts with a skill silently missing.
pub fn discover(roots: &[PathBuf]) -> Result<Vec<Skill>, ConfigError> {
    let mut skills: Vec<Skill> = Vec::new();
    for root in roots {
        for file in skill_files(root)? {
            let text = std::fs::read_to_string(&file)
                .map_err(|err| ConfigError::whole_file(&file, format!("cannot read: {err}")))?;
            let skill = parse(&text, &file)?;
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

/// The `SKILL.md` files of one root, in name order.
fn skill_files(root: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let own = root.join(SKILL_FILE);
    if own.is_file() {
        return Ok(vec![own]);
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
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(SKILL_FILE))
        .filter(|file| file.is_file())
        .collect();
    files.sort();
    Ok(files)
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
        let names: Vec<String> = discover(&roots)
            .unwrap()
            .into_iter()
            .map(|skill| skill.name)
            .collect();
        assert_eq!(names, ["ay", "bee", "extra"]);
        assert!(discover(&[dir.path().join("missing")]).unwrap().is_empty());
        write("again/c", "bee");
        let err = discover(&[dir.path().join("skills"), dir.path().join("again")]).unwrap_err();
        assert!(
            err.to_string().contains("a second skill named `bee`"),
            "{err}"
        );
    }
}

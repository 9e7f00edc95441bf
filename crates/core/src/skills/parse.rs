//! One `SKILL.md`: YAML front matter between `---` lines, then the instructions. Pure: takes
//! the text and its path, returns the skill or an error at file:line:column.

use std::path::Path;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use super::{Skill, SkillMode};
use crate::config::{self, ConfigError};
use crate::tools::SubagentKind;

/// Longest name and description accepted: the list of skills is in every request.
const MAX_NAME_CHARS: usize = 64;
const MAX_DESCRIPTION_CHARS: usize = 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: Spanned<String>,
    description: Spanned<String>,
    mode: Option<Spanned<String>>,
    /// For `mode: agent`: which sub-agent runs it (default general).
    agent: Option<Spanned<String>>,
    /// Claude Code's key for tools a skill may use without asking. Read so such skills
    /// load, and never honoured: repository content grants no permission.
    #[serde(rename = "allowed-tools")]
    _allowed_tools: Option<IgnoredAny>,
    #[serde(rename = "license")]
    _license: Option<IgnoredAny>,
}

/// Parses `text`, the content of `file`.
pub fn parse(text: &str, file: &Path) -> Result<Skill, ConfigError> {
    parse_text(text, file).map_err(|err| err.with_source(file, text))
}

fn parse_text(text: &str, file: &Path) -> Result<Skill, ConfigError> {
    let at = |line: u64, column: u64, message: &str| ConfigError::new(file, line, column, message);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err(at(
            1,
            1,
            "a SKILL.md starts with a `---` line, then YAML front matter (name, description), then `---`",
        ));
    };
    let (yaml, body) = split_front_matter(rest).ok_or_else(|| {
        at(
            1,
            1,
            "the front matter is not closed: add a `---` line after it",
        )
    })?;
    // Lines in the front matter are one below the YAML's own count (the opening `---`).
    let raw: FrontMatter = config::parse(yaml, file).map_err(|err| ConfigError {
        line: if err.line == 0 { 0 } else { err.line + 1 },
        ..err
    })?;
    let located = |spanned: &Spanned<String>, message: String| {
        at(
            spanned.referenced.line() + 1,
            spanned.referenced.column(),
            &message,
        )
    };
    let name = raw.name.value.trim();
    let well_formed = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !well_formed {
        return Err(located(
            &raw.name,
            format!(
                "skill name `{}` must be 1–{MAX_NAME_CHARS} characters of a-z, 0-9 and -",
                raw.name.value
            ),
        ));
    }
    let description = raw.description.value.trim();
    if description.is_empty() || description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(located(
            &raw.description,
            format!("description must be 1–{MAX_DESCRIPTION_CHARS} characters"),
        ));
    }
    let agent = match &raw.agent {
        None => None,
        Some(spanned) => Some(SubagentKind::parse(&spanned.value).ok_or_else(|| {
            located(
                spanned,
                format!("agent `{}`: use explore or general", spanned.value),
            )
        })?),
    };
    let mode = match raw.mode.as_ref().map(|mode| (mode, mode.value.trim())) {
        None | Some((_, "inject")) => {
            if let Some(spanned) = &raw.agent {
                return Err(located(
                    spanned,
                    "`agent:` is for `mode: agent`; an injected skill runs in the caller's context"
                        .into(),
                ));
            }
            SkillMode::Inject
        }
        Some((_, "agent")) => SkillMode::Agent(agent.unwrap_or(SubagentKind::General)),
        Some((spanned, other)) => {
            return Err(located(
                spanned,
                format!("mode `{other}`: use inject or agent"),
            ));
        }
    };
    let instructions = body.trim().to_string();
    if instructions.is_empty() {
        return Err(at(
            0,
            0,
            "the skill has no instructions after its front matter",
        ));
    }
    Ok(Skill {
        name: name.to_string(),
        description: description.to_string(),
        mode,
        instructions,
        file: file.to_path_buf(),
        resolved: file.to_path_buf(),
    })
}

/// The front matter (up to the closing `---` line) and what follows it.
pub(crate) fn split_front_matter(rest: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<Skill, String> {
        parse(text, Path::new("skills/x/SKILL.md")).map_err(|err| err.to_string())
    }

    #[test]
    fn a_skill_has_its_name_description_mode_and_instructions() {
        let skill = parse_text(
            "---\nname: release-notes\ndescription: Writes release notes.\nmode: agent\nagent: explore\n---\n\nRead CHANGELOG.md.\n",
        )
        .unwrap();
        assert_eq!(skill.name, "release-notes");
        assert_eq!(skill.description, "Writes release notes.");
        assert_eq!(skill.mode, SkillMode::Agent(SubagentKind::Explore));
        assert_eq!(skill.instructions, "Read CHANGELOG.md.");
        let injected =
            parse_text("---\nname: a\ndescription: b\nallowed-tools: [Bash]\n---\nDo c.\n")
                .unwrap();
        assert_eq!(injected.mode, SkillMode::Inject);
    }

    #[test]
    fn bad_front_matter_is_located_in_the_file() {
        let cases = [
            ("name: a\n", "skills/x/SKILL.md:1:1: a SKILL.md starts with"),
            (
                "---\nname: a\n",
                "skills/x/SKILL.md:1:1: the front matter is not closed",
            ),
            (
                "---\nname: a\ndescription: b\nmode: fork\n---\nx\n",
                "skills/x/SKILL.md:4:7: mode `fork`",
            ),
            (
                "---\nname: A b\ndescription: b\n---\nx\n",
                "skills/x/SKILL.md:2:7: skill name `A b`",
            ),
            (
                "---\nname: a\ndescription: b\ncolour: red\n---\nx\n",
                "skills/x/SKILL.md:4:1: unknown field `colour`",
            ),
            (
                "---\nname: a\n---\nx\n",
                "skills/x/SKILL.md:2:1: missing field `description`",
            ),
            (
                "---\nname: a\ndescription: b\n---\n\n",
                "skills/x/SKILL.md: the skill has no instructions",
            ),
        ];
        for (text, want) in cases {
            let got = parse_text(text).unwrap_err();
            assert!(got.starts_with(want), "{text:?}: {got}");
        }
    }
}

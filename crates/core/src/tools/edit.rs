//! Edit: replaces an exact, unique string in a file (or every occurrence with `replace_all`).
//! Like Write, it needs a prior Read of the file's current version, and acts on the one
//! descriptor it opened beneath the file's root, through no link.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::path::{check_file_access_keeping, shown};
use super::place::{Intent, Judged, place};
use super::regular_file::{self, RegularFileError};
use super::{Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input};
use crate::ledger::Allowance;
use crate::policy::{Access, PermissionContext, ToolCheck, ToolName};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditInput {
    file_path: String,
    /// The path the decision judged, for the run.
    #[serde(skip)]
    judged: Judged,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

pub struct EditTool;

impl Tool for EditTool {
    fn name(&self) -> ToolName {
        ToolName::Edit
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Replaces old_string with new_string in a file. old_string must occur exactly once unless replace_all is true. Read the file first.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string", "description": "Exact text to replace"},
                "new_string": {"type": "string"},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"}
            },
            "required": ["file_path", "old_string", "new_string"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let edit: EditInput = parse_input(&self.name(), input)?;
        if edit.old_string.is_empty() {
            return Err(ToolError::Invalid(
                "old_string is empty; use Write to create a file".into(),
            ));
        }
        if edit.old_string == edit.new_string {
            return Err(ToolError::Invalid(
                "old_string and new_string are the same; nothing to change".into(),
            ));
        }
        Ok(Box::new(edit))
    }
}

impl ToolInput for EditInput {
    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_file_access_keeping(
            ctx,
            &ToolName::Edit,
            &self.file_path,
            Access::Write,
            |path| self.judged.keep(path),
        )
    }

    fn allowed_effects(&self, ctx: &PermissionContext, _by_check: bool) -> Allowance {
        super::write::the_file(&self.file_path, ctx)
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let edit = self;
            let path = edit.judged.path(&edit.file_path, &ctx.workspace);
            let (workspace, files, target) =
                (ctx.workspace.clone(), ctx.files.clone(), path.clone());
            let (old, new, all) = (
                edit.old_string.clone(),
                edit.new_string.clone(),
                edit.replace_all,
            );
            // Opened once, beneath its root and through no link: the file read, checked for
            // staleness and rewritten is the one descriptor.
            let updated = ctx
                .on_disk(move || {
                    let failed = |err: RegularFileError| match err {
                        RegularFileError::Io { path, error, .. } => {
                            ToolError::Failed(format!("cannot edit {}: {error}", path.display()))
                        }
                        other => ToolError::Failed(other.to_string()),
                    };
                    let place = place(&workspace, &target, Intent::Write)
                        .map_err(|err| ToolError::Failed(err.to_string()))?;
                    let (mut file, metadata) =
                        regular_file::open_for_editing(&place).map_err(failed)?;
                    let bytes = regular_file::read_all(&place, &mut file, metadata.len())
                        .map_err(failed)?;
                    let text = String::from_utf8(bytes).map_err(|_| {
                        ToolError::Failed(format!(
                            "cannot edit {}: it is not UTF-8 text",
                            target.display()
                        ))
                    })?;
                    files.check_fresh(&target, Some(&metadata))?;
                    let updated = apply_edit(&text, &old, &new, all)?;
                    let after = regular_file::replace(&place, &mut file, updated.text.as_bytes())
                        .map_err(|err| ToolError::Failed(err.to_string()))?;
                    files.record(&target, &after);
                    Ok(updated)
                })
                .await?;
            Ok(ToolOutput::new(format!(
                "Edited {}: {}",
                shown(&path, &ctx.workspace.workdir),
                crate::base::counted(updated.replacements, "replacement")
            )))
        })
    }
}

#[derive(Debug)]
struct Edited {
    text: String,
    replacements: usize,
}

fn apply_edit(text: &str, old: &str, new: &str, replace_all: bool) -> Result<Edited, ToolError> {
    let count = text.matches(old).count();
    match (count, replace_all) {
        (0, _) => Err(ToolError::Failed(
            "old_string was not found in the file; Read it again and copy the text exactly".into(),
        )),
        (1, _) | (_, true) => Ok(Edited {
            text: text.replace(old, new),
            replacements: count,
        }),
        (n, false) => Err(ToolError::Failed(format!(
            "old_string occurs {n} times; add surrounding context to make it unique, or set replace_all"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_need_a_unique_match_unless_replace_all() {
        assert_eq!(apply_edit("a b a", "b", "c", false).unwrap().text, "a c a");
        assert!(
            apply_edit("a b a", "a", "c", false)
                .unwrap_err()
                .to_string()
                .contains("2 times")
        );
        let all = apply_edit("a b a", "a", "c", true).unwrap();
        assert_eq!((all.text.as_str(), all.replacements), ("c b c", 2));
        assert!(
            apply_edit("a", "z", "c", true)
                .unwrap_err()
                .to_string()
                .contains("not found")
        );
    }

    #[test]
    fn validation_rejects_no_op_edits() {
        let tool = EditTool;
        assert!(
            tool.prepare(&json!({"file_path": "a", "old_string": "x", "new_string": "x"}))
                .is_err()
        );
        assert!(
            tool.prepare(&json!({"file_path": "a", "old_string": "", "new_string": "x"}))
                .is_err()
        );
        assert!(
            tool.prepare(&json!({"file_path": "a", "old_string": "x"}))
                .is_err()
        );
        assert!(
            tool.prepare(&json!({"file_path": "a", "old_string": "x", "new_string": "y"}))
                .is_ok()
        );
    }
}

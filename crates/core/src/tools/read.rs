//! Read: a text file's lines, numbered, within a range and a size cap; binary files refused.

use std::borrow::Cow;
use std::fs::Metadata;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::path::check_file_access_keeping;
use super::place::{Intent, Judged, place};
use super::regular_file::{self, RegularFileError};
use super::text::{clip_line, looks_binary};
use super::{
    InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input,
};
use crate::policy::{Access, PermissionContext, ToolCheck, ToolName, Workspace};

const DEFAULT_LINE_LIMIT: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadInput {
    file_path: String,
    /// The path the decision judged, for the run.
    #[serde(skip)]
    judged: Judged,
    /// 1-based first line.
    offset: Option<usize>,
    limit: Option<usize>,
}

pub struct ReadTool;

impl Tool for ReadTool {
    fn name(&self) -> ToolName {
        ToolName::Read
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Reads a text file; returns its lines numbered like `cat -n`. Use offset and limit for \
             large files. Binary files are refused.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read (default 2000)"}
            },
            "required": ["file_path"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let read: ReadInput = parse_input(&self.name(), input)?;
        Ok(Box::new(read))
    }

    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }

    /// Read results are never offloaded (S8): offloading would make the model read the
    /// offloaded file, forever. Its own caps bound it instead.
    fn max_result_chars(&self) -> usize {
        usize::MAX
    }
}

impl ToolInput for ReadInput {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_file_access_keeping(
            ctx,
            &ToolName::Read,
            &self.file_path,
            Access::Read,
            |path| self.judged.keep(path),
        )
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let read = self;
            let path = read.judged.path(&read.file_path, &ctx.workspace);
            let ranged = read.offset.is_some() || read.limit.is_some();
            let cap = ctx.limits.max_read_bytes;
            let (workspace, target) = (ctx.workspace.clone(), path.clone());
            let (bytes, metadata) = ctx
                .on_disk(move || read_file(&workspace, &target, cap, ranged))
                .await?;
            if looks_binary(&bytes) {
                return Err(ToolError::Failed(format!(
                    "{} is a binary file; Read only shows text",
                    path.display()
                )));
            }
            let text = String::from_utf8_lossy(&bytes);
            ctx.files.record(&path, &metadata);
            Ok(ToolOutput::new(number_lines(
                &text,
                read.offset.unwrap_or(1),
                read.limit.unwrap_or(DEFAULT_LINE_LIMIT),
            )))
        })
    }
}

/// The bytes of the regular file `path`, opened beneath the root that holds it, if they fit
/// the read cap (sixteen times it for a ranged read), with its metadata as opened.
fn read_file(
    workspace: &Workspace,
    path: &Path,
    cap: u64,
    ranged: bool,
) -> Result<(Vec<u8>, Metadata), ToolError> {
    let place =
        place(workspace, path, Intent::Read).map_err(|err| ToolError::Failed(err.to_string()))?;
    let (mut file, metadata) = regular_file::open_for_reading(&place).map_err(|err| match err {
        RegularFileError::Directory { path } => ToolError::Failed(format!(
            "{} is a directory; use Glob to list it",
            path.display()
        )),
        other => ToolError::Failed(other.to_string()),
    })?;
    if metadata.len() > cap.saturating_mul(if ranged { 16 } else { 1 }) {
        return Err(ToolError::Failed(format!(
            "{} is {} bytes, over the {cap}-byte read limit; read a range with offset and limit, or search it with Grep",
            path.display(),
            metadata.len()
        )));
    }
    let bytes = regular_file::read_all(&place, &mut file, metadata.len())
        .map_err(|err| ToolError::Failed(err.to_string()))?;
    Ok((bytes, metadata))
}

fn number_lines(text: &str, first: usize, limit: usize) -> String {
    if text.is_empty() {
        return "(the file is empty)".into();
    }
    let first = first.max(1);
    let total = text.lines().count();
    if first > total {
        return format!("(the file has {total} lines; offset {first} is past the end)");
    }
    let mut out = String::new();
    for (index, line) in text.lines().enumerate().skip(first - 1).take(limit) {
        out.push_str(&format!(
            "{:>6}\t{}\n",
            index + 1,
            clip_line(line, MAX_LINE_CHARS)
        ));
    }
    let last = (first - 1 + limit).min(total);
    if last < total {
        out.push_str(&format!(
            "(lines {first}-{last} of {total}; use offset {} to read on)\n",
            last + 1
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_lines_within_a_range() {
        let text = "a\nb\nc\nd\n";
        assert_eq!(
            number_lines(text, 1, 2000),
            "     1\ta\n     2\tb\n     3\tc\n     4\td\n"
        );
        assert_eq!(
            number_lines(text, 2, 2),
            "     2\tb\n     3\tc\n(lines 2-3 of 4; use offset 4 to read on)\n"
        );
        assert!(number_lines(text, 9, 1).contains("past the end"));
        assert_eq!(number_lines("", 1, 5), "(the file is empty)");
    }
}

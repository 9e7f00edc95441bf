//! Grep: a regex search over files below a folder, gitignore-aware, with content,
//! files-with-matches and count output modes.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::path::{check_file_access_keeping, shown};
use super::place::{Intent, Judged, Place, place};
use super::regular_file;
use super::walk::files_under;
use super::{
    InterruptBehavior, Tool, ToolContext, ToolError, ToolFuture, ToolInput, ToolOutput, parse_input,
};
use crate::policy::{Access, PermissionContext, ToolCheck, ToolName};

const DEFAULT_HEAD_LIMIT: usize = 500;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    Content,
    #[default]
    FilesWithMatches,
    Count,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepInput {
    pattern: String,
    path: Option<String>,
    /// The folder the decision judged, for the run.
    #[serde(skip)]
    judged: Judged,
    /// Only files whose path (relative to `path`) or name matches this glob.
    glob: Option<String>,
    #[serde(default)]
    output_mode: OutputMode,
    #[serde(default, rename = "-i")]
    case_insensitive: bool,
    #[serde(rename = "-n")]
    line_numbers: Option<bool>,
    head_limit: Option<usize>,
}

pub struct GrepTool;

impl Tool for GrepTool {
    fn name(&self) -> ToolName {
        ToolName::Grep
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(
            "Searches file contents with a regular expression (Rust regex syntax). output_mode: \
             files_with_matches (default), content or count. Honours .gitignore.",
        )
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "path": {"type": "string", "description": "File or folder to search (default: the workdir)"},
                "glob": {"type": "string", "description": "Only files matching this glob, e.g. `*.rs`"},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
                "-i": {"type": "boolean", "description": "Case-insensitive"},
                "-n": {"type": "boolean", "description": "Line numbers in content mode (default true)"},
                "head_limit": {"type": "integer", "minimum": 1, "description": "At most this many output lines (default 500)"}
            },
            "required": ["pattern"]
        })
    }

    fn prepare(&self, input: &Value) -> Result<Box<dyn ToolInput>, ToolError> {
        let grep: GrepInput = parse_input(&self.name(), input)?;
        check_syntax(&grep)?;
        grep.glob.as_deref().map(parse_glob).transpose()?;
        Ok(Box::new(grep))
    }

    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }
}

impl ToolInput for GrepInput {
    fn is_read_only(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn is_concurrency_safe(&self, _ctx: &PermissionContext) -> bool {
        true
    }

    fn check_permissions(&self, ctx: &PermissionContext) -> ToolCheck {
        check_file_access_keeping(
            ctx,
            &ToolName::Grep,
            self.path.as_deref().unwrap_or("."),
            Access::Read,
            |path| self.judged.keep(path),
        )
    }

    fn run<'a>(&'a self, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let grep = self.clone();
            let base = grep
                .judged
                .path(grep.path.as_deref().unwrap_or("."), &ctx.workspace);
            let screen = ctx.clone();
            ctx.on_disk(move || {
                let place = place(&screen.workspace, &base, Intent::Read)
                    .map_err(|err| ToolError::Failed(err.to_string()))?;
                let metadata = match place.root.metadata(&place.rel) {
                    Ok(metadata) => metadata,
                    Err(err) if err.is_not_found() => {
                        return Err(ToolError::Failed(format!(
                            "{} does not exist",
                            base.display()
                        )));
                    }
                    Err(err) => return Err(ToolError::Failed(err.to_string())),
                };
                if !metadata.is_dir() {
                    // A FIFO or a device is refused here with a sentence rather than found
                    // empty.
                    regular_file::open_for_reading(&place)
                        .map_err(|err| ToolError::Failed(err.to_string()))?;
                }
                let files = files_under(&base)
                    .into_iter()
                    .filter(|path| screen.may_read(&ToolName::Grep, path))
                    .collect();
                search(&grep, &place, &screen.workspace.workdir, files)
            })
            .await
        })
    }
}

/// A malformed pattern is the model's error, told before the call is decided; only its syntax
/// is read here, since deciding a call (`check` decides many) never needs the matcher, which
/// is compiled when the call runs (and reports what only compiling finds: an unknown Unicode
/// class, a pattern over the size limit).
fn check_syntax(grep: &GrepInput) -> Result<(), ToolError> {
    // A pattern without a single meta character is a literal: nothing to parse.
    if !grep.pattern.chars().any(regex_syntax::is_meta_character) {
        return Ok(());
    }
    regex_syntax::ast::parse::Parser::new()
        .parse(&grep.pattern)
        .map(drop)
        .map_err(|err| ToolError::Invalid(format!("invalid regular expression: {err}")))
}

fn matcher(grep: &GrepInput) -> Result<grep_regex::RegexMatcher, ToolError> {
    RegexMatcherBuilder::new()
        .case_insensitive(grep.case_insensitive)
        .build(&grep.pattern)
        .map_err(|err| ToolError::Invalid(format!("invalid regular expression: {err}")))
}

/// The `glob` filter, read as a glob (its matcher is compiled only when the call runs).
fn parse_glob(glob: &str) -> Result<globset::Glob, ToolError> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|err| ToolError::Invalid(format!("invalid glob `{glob}`: {}", err.kind())))
}

/// Searches `files` (found below `base`, already screened by the policy), each opened beneath
/// `base`'s root through no link; names them as [`shown`] does.
fn search(
    grep: &GrepInput,
    base: &Place,
    workdir: &Path,
    files: Vec<PathBuf>,
) -> Result<ToolOutput, ToolError> {
    let matcher = matcher(grep)?;
    let filter = grep
        .glob
        .as_deref()
        .map(parse_glob)
        .transpose()?
        .map(|glob| glob.compile_matcher());
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let show_numbers = grep.line_numbers.unwrap_or(true);
    let limit = grep.head_limit.unwrap_or(DEFAULT_HEAD_LIMIT);
    let mut lines: Vec<String> = Vec::new();
    let mut total = 0usize;
    for path in files {
        let relative = path.strip_prefix(&base.path).unwrap_or(&path);
        if let Some(filter) = &filter {
            let name_matches = path.file_name().is_some_and(|name| filter.is_match(name));
            if !name_matches && !filter.is_match(relative) {
                continue;
            }
        }
        let name = shown(&path, workdir);
        let mut hits: Vec<(u64, String)> = Vec::new();
        let sink = UTF8(|number, line| {
            hits.push((number, line.trim_end_matches(['\n', '\r']).to_string()));
            Ok(true)
        });
        // Opened beneath the root through no link, without waiting, and checked to be a
        // regular file: one swapped for a FIFO or reached through a link since the walk is
        // skipped, not waited on or followed.
        let Some(Ok((file, _))) = base
            .child(&path)
            .map(|at| regular_file::open_for_reading(&at))
        else {
            continue;
        };
        if searcher.search_file(&matcher, &file, sink).is_err() || hits.is_empty() {
            continue;
        }
        match grep.output_mode {
            OutputMode::FilesWithMatches => {
                total += 1;
                lines.push(name);
            }
            OutputMode::Count => {
                total += 1;
                lines.push(format!("{name}:{}", hits.len()));
            }
            OutputMode::Content => {
                total += hits.len();
                lines.extend(hits.into_iter().map(|(number, line)| {
                    if show_numbers {
                        format!("{name}:{number}:{line}")
                    } else {
                        format!("{name}:{line}")
                    }
                }));
            }
        }
    }
    if lines.is_empty() {
        return Ok(ToolOutput::new(format!(
            "No matches for /{}/",
            grep.pattern
        )));
    }
    let omitted = lines.len().saturating_sub(limit);
    lines.truncate(limit);
    if omitted > 0 {
        lines.push(format!(
            "({omitted} more lines not shown of {total}; raise head_limit or narrow the search)"
        ));
    }
    Ok(ToolOutput::new(lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::AbortHandle;
    use crate::policy::{Policy, PolicyOrigin, RuleSet, Workspace};
    use crate::tools::{FileStateCache, GlobTool, ToolLimits};
    use std::sync::Arc;

    /// A workspace holding a secret under two names and an ordinary file, with `Read(.env)`
    /// and `Read(secrets/**)` denied.
    fn screened() -> (tempfile::TempDir, ToolContext, AbortHandle) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (file, text) in [
            (".env", "TOKEN=s3cret"),
            ("config/.env", "TOKEN=s3cret"),
            ("secrets/key.txt", "TOKEN=s3cret"),
            ("src/a.rs", "// TOKEN is read from the environment"),
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let policy = Policy::parse(
            "permissions:\n  deny: ['Read(.env)', 'Read(secrets/**)']\n",
            PolicyOrigin {
                file: Path::new("p.yaml"),
                dir: &root,
                home: None,
            },
        )
        .unwrap();
        let (handle, abort) = AbortHandle::new();
        let ctx = ToolContext {
            resolver: Default::default(),
            workspace: Arc::new(Workspace::new(root, vec![], None)),
            rules: Arc::new(RuleSet::from_policy(&policy)),
            limits: ToolLimits::default(),
            abort,
            files: FileStateCache::default(),
            command_env: crate::exec::RunEnv::new(&Default::default()).model,
            progress: None,
            sandbox: None,
            read_only: None,
            allow_basis: Default::default(),
            state: Default::default(),
        };
        (dir, ctx, handle)
    }

    #[tokio::test]
    async fn read_denied_files_are_neither_searched_nor_listed() {
        let (_dir, ctx, _handle) = screened();
        let found = GrepTool
            .prepare(&json!({"pattern": "TOKEN", "output_mode": "content"}))
            .unwrap()
            .run(&ctx)
            .await
            .unwrap()
            .content;
        assert_eq!(found, "src/a.rs:1:// TOKEN is read from the environment");
        let listed = GlobTool
            .prepare(&json!({"pattern": "**/*"}))
            .unwrap()
            .run(&ctx)
            .await
            .unwrap()
            .content;
        assert_eq!(listed, "src/a.rs");
    }

    /// A pattern that does not parse is refused before the call is decided; one that parses
    /// but cannot be compiled is refused when it runs, with the same kind of message.
    #[test]
    fn malformed_patterns_are_the_models_error() {
        for literal in ["fn name", "TODO: x", "a-b_c", "é"] {
            assert!(
                GrepTool.prepare(&json!({"pattern": literal})).is_ok(),
                "{literal}"
            );
        }
        for pattern in ["fn (", "a{2,1}", "[z-a]", "a)", "x\\", "(?x"] {
            let refused = GrepTool.prepare(&json!({"pattern": pattern})).err();
            assert!(
                matches!(&refused, Some(ToolError::Invalid(m)) if m.starts_with("invalid regular expression")),
                "{pattern}: {refused:?}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let grep: GrepInput =
            serde_json::from_value(json!({"pattern": "\\p{NoSuchClass}"})).unwrap();
        assert!(
            GrepTool
                .prepare(&json!({"pattern": "\\p{NoSuchClass}"}))
                .is_ok()
        );
        let at_run = search(
            &grep,
            &placed(dir.path(), dir.path()),
            dir.path(),
            Vec::new(),
        )
        .err();
        assert!(
            matches!(&at_run, Some(ToolError::Invalid(m)) if m.starts_with("invalid regular expression")),
            "{at_run:?}"
        );
    }

    /// `base` placed for reading in a workspace of `root`.
    fn placed(root: &Path, base: &Path) -> Place {
        let workspace = Workspace::new(root.to_path_buf(), vec![], None);
        place(&workspace, base, Intent::Read).unwrap()
    }

    fn grep(input: Value, base: &Path) -> String {
        let grep: GrepInput = serde_json::from_value(input).unwrap();
        search(&grep, &placed(base, base), base, files_under(base))
            .unwrap()
            .content
    }

    #[test]
    fn matches_below_a_folder_or_in_one_file_are_named_as_the_model_would_pass_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn main() {}\n").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("c.rs"), "fn c() {}\n").unwrap();
        let run = |base: &Path, mode: &str| {
            let grep: GrepInput =
                serde_json::from_value(json!({"pattern": "fn", "output_mode": mode})).unwrap();
            search(&grep, &placed(root, base), root, files_under(base))
                .unwrap()
                .content
        };
        let src = root.join("src");
        assert_eq!(run(&src, "files_with_matches"), "src/a.rs");
        assert_eq!(run(&src.join("a.rs"), "content"), "src/a.rs:1:fn main() {}");
        let outside = elsewhere.path().join("c.rs");
        assert_eq!(
            run(elsewhere.path(), "count"),
            format!("{}:1", outside.display())
        );
    }

    #[test]
    fn output_modes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn main() {}\nfn helper() {}\n").unwrap();
        std::fs::write(root.join("b.txt"), "FN upper\n").unwrap();
        std::fs::write(root.join("bin.dat"), b"fn\0binary").unwrap();
        assert_eq!(grep(json!({"pattern": "fn "}), root), "src/a.rs");
        assert_eq!(
            grep(json!({"pattern": "fn ", "-i": true}), root),
            "b.txt\nsrc/a.rs"
        );
        assert_eq!(
            grep(json!({"pattern": "fn", "output_mode": "count"}), root),
            "src/a.rs:2"
        );
        assert_eq!(
            grep(json!({"pattern": "helper", "output_mode": "content"}), root),
            "src/a.rs:2:fn helper() {}"
        );
        assert_eq!(
            grep(json!({"pattern": "fn", "glob": "*.txt", "-i": true}), root),
            "b.txt"
        );
        assert_eq!(
            grep(
                json!({"pattern": "fn", "output_mode": "content", "head_limit": 1}),
                root
            ),
            "src/a.rs:1:fn main() {}\n(1 more lines not shown of 2; raise head_limit or narrow the search)"
        );
        assert!(grep(json!({"pattern": "zzz"}), root).starts_with("No matches"));
    }
}

//! Structured output: the JSON Schema a run's final answer is checked against
//! (`output_schema:`, `--output-schema`), compiled once at load.

use super::{At, located};
use crate::base::normalize_lexically;
use crate::config::{self, ConfigError};
use serde_saphyr::Spanned;
use std::path::Path;

/// The JSON Schema the final answer must satisfy, checked to compile at load.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSchema {
    pub schema: serde_json::Value,
    /// `inline` or the file it came from, for the transcript.
    pub source: String,
}

impl OutputSchema {
    /// Reads and compiles a schema file (`--output-schema`).
    pub fn from_file(path: &Path) -> Result<OutputSchema, ConfigError> {
        let text =
            crate::input_file::read_text(path, crate::input_file::Input::config("output schema"))
                .map_err(|err| ConfigError::whole_file(path, err.to_string()))?;
        let schema: serde_json::Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(&text).map_err(|err| {
                ConfigError::new(
                    path,
                    err.line() as u64,
                    err.column() as u64,
                    format!("the output schema is not JSON: {err}"),
                )
                .with_source(path, &text)
            })?
        } else {
            config::parse(&text, path).map_err(|err| err.with_source(path, &text))?
        };
        Self::compiled(schema, path.display().to_string())
            .map_err(|why| ConfigError::whole_file(path, why))
    }

    /// The schema, once it is known to compile.
    pub fn compiled(schema: serde_json::Value, source: String) -> Result<OutputSchema, String> {
        if !schema.is_object() && !schema.is_boolean() {
            return Err("an output schema is a JSON Schema object".into());
        }
        jsonschema::validator_for(&schema)
            .map_err(|err| format!("the output schema is not a valid JSON Schema: {err}"))?;
        Ok(OutputSchema { schema, source })
    }
}

/// Answers the model may give before one is valid against `output_schema` (the first and
/// the retries after the validator's errors were fed back).
pub const DEFAULT_OUTPUT_SCHEMA_ATTEMPTS: u32 = 3;

/// The most `output_schema_attempts` may be.
pub const MAX_OUTPUT_SCHEMA_ATTEMPTS: u32 = 10;

/// `output_schema:`: a mapping is the schema itself, a string is a file (JSON or YAML)
/// relative to the task's folder.
pub(super) fn output_schema(
    spanned: Spanned<serde_json::Value>,
    dir: &Path,
    at: At<'_>,
) -> Result<OutputSchema, ConfigError> {
    match &spanned.value {
        serde_json::Value::String(path) => {
            let path = normalize_lexically(&dir.join(path));
            OutputSchema::from_file(&path)
        }
        schema => OutputSchema::compiled(schema.clone(), "inline".into())
            .map_err(|why| located(&spanned, at, format!("output_schema: {why}"))),
    }
}

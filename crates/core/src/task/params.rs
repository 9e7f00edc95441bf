//! A task's `params:`: the placeholders its prompt may name, their types and defaults.

use super::{At, located};
use crate::config::ConfigError;
use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ParamFile {
    #[serde(rename = "type", default)]
    kind: ParamType,
    default: Option<serde_json::Value>,
    required: Option<bool>,
    #[serde(default)]
    description: Option<String>,
}

/// What a parameter's value must be; every value reaches the prompt as text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    #[default]
    String,
    Integer,
    Number,
    Boolean,
}

impl ParamType {
    /// Whether `value` is one of this type, as it would be written on the command line.
    pub fn accepts(self, value: &str) -> bool {
        match self {
            ParamType::String => true,
            ParamType::Integer => value.trim().parse::<i64>().is_ok(),
            ParamType::Number => value.trim().parse::<f64>().is_ok_and(f64::is_finite),
            ParamType::Boolean => matches!(value.trim(), "true" | "false"),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Number => "number",
            ParamType::Boolean => "boolean",
        }
    }
}

/// A declared parameter of the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamType,
    /// The default, as text.
    pub default: Option<String>,
    /// A required parameter has no default and must be given.
    pub required: bool,
    pub description: Option<String>,
    /// Where the parameter is declared (line, column).
    pub at: (u64, u64),
}

/// `params:`: each name valid, each default of its type; a parameter with a default is
/// optional unless it says otherwise.
pub(super) fn params(
    raw: std::collections::BTreeMap<String, Spanned<ParamFile>>,
    at: At<'_>,
) -> Result<Vec<Param>, ConfigError> {
    let mut params = Vec::new();
    for (name, spanned) in raw {
        crate::template::check_param_name(&name)
            .map_err(|why| located(&spanned, at, format!("params: {why}")))?;
        let at_param = (spanned.referenced.line(), spanned.referenced.column());
        let located = |message: String| at(at_param.0, at_param.1, message);
        let param = spanned.value;
        let default = match param.default {
            None => None,
            Some(serde_json::Value::String(text)) => Some(text),
            Some(value @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => {
                Some(value.to_string())
            }
            Some(_) => {
                return Err(located(format!(
                    "params.{name}.default must be a string, a number or a boolean"
                )));
            }
        };
        if let Some(value) = &default
            && !param.kind.accepts(value)
        {
            return Err(located(format!(
                "params.{name}.default `{value}` is not a {}",
                param.kind.as_str()
            )));
        }
        params.push(Param {
            required: param.required.unwrap_or(default.is_none()),
            name,
            kind: param.kind,
            default,
            description: param.description,
            at: at_param,
        });
    }
    Ok(params)
}

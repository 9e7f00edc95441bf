//! Structured output (`output_schema:`): the final answer must be one JSON value valid
//! against the task's schema. An invalid answer goes back to the model with the validator's
//! errors, up to the task's bounded number of answers; the loop owns the counting.

use serde_json::Value;

/// At most this many validator errors are fed back, so one answer cannot flood the history.
const MAX_ERRORS_SHOWN: usize = 10;

/// The answer's JSON value, or what is wrong with it. A single code fence around the value
/// is tolerated (models add one despite the instruction); any other text is not.
pub fn check(schema: &Value, answer: &str) -> Result<Value, Vec<String>> {
    let text = unfenced(answer.trim());
    let value: Value = serde_json::from_str(text)
        .map_err(|err| vec![format!("the answer is not one JSON value: {err}")])?;
    let validator = jsonschema::validator_for(schema)
        .map_err(|err| vec![format!("the output schema does not compile: {err}")])?;
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|error| {
            let at = error.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("at {at}: {error}")
        })
        .collect();
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

fn unfenced(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return text;
    };
    // The info string (`json`) ends at the first newline.
    body.split_once('\n').map_or(body, |(_, body)| body).trim()
}

/// The message that asks for a valid answer again.
pub fn feedback(errors: &[String], attempt: u32, max_attempts: u32) -> String {
    let mut text = format!(
        "Your final answer is not valid against the output schema (answer {attempt} of {max_attempts}):\n"
    );
    for error in errors.iter().take(MAX_ERRORS_SHOWN) {
        text.push_str("- ");
        text.push_str(error);
        text.push('\n');
    }
    if errors.len() > MAX_ERRORS_SHOWN {
        text.push_str(&format!(
            "- … and {} more\n",
            errors.len() - MAX_ERRORS_SHOWN
        ));
    }
    text.push_str("Reply with the corrected JSON value only.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_valid_value_passes_and_an_invalid_one_says_where() {
        let schema = json!({"type": "object", "required": ["label"], "properties": {"label": {"enum": ["bug", "feature"]}}, "additionalProperties": false});
        assert_eq!(
            check(&schema, " {\"label\": \"bug\"} ").unwrap(),
            json!({"label": "bug"})
        );
        assert_eq!(
            check(&schema, "```json\n{\"label\": \"bug\"}\n```").unwrap(),
            json!({"label": "bug"})
        );
        let errors = check(&schema, "{\"label\": \"question\"}").unwrap_err();
        assert!(errors[0].starts_with("at /label:"), "{errors:?}");
        assert!(
            check(&schema, "Sure! {\"label\": \"bug\"}").unwrap_err()[0]
                .contains("not one JSON value")
        );
        assert!(check(&schema, "{}").unwrap_err()[0].contains("label"));
        let text = feedback(&errors, 1, 3);
        assert!(
            text.contains("answer 1 of 3") && text.contains("/label"),
            "{text}"
        );
    }
}

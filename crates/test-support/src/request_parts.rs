//! What each part of a recorded Messages request costs, in bytes as sent, and the budget kept
//! in `benches/request-budget.toml` that the parts must stay within. Shared by the `economy`
//! bench (which prints the parts) and the suite's budget test (which fails past the budget),
//! so a request that grows is a decision written into that file, not drift.

use serde_json::Value;

/// The budget file, kept with the benches that print the parts.
pub const BUDGET: &str = include_str!("../../../benches/request-budget.toml");

/// A part's name and its size in bytes.
pub type Part = (String, usize);

/// The parts of a run's first request: the system prompt (its workdir path counted as the
/// 10 bytes of `/work/repo`, so the figure does not depend on where the run was), the
/// deferred catalogue at its end, each tool's definition, the messages and the rest of the
/// body; then the total, with the workdir counted the same way.
pub fn first_request(body: &Value) -> Vec<Part> {
    let whole = body.to_string().len();
    let system = body["system"][0]["text"].as_str().unwrap_or_default();
    let workdir = system
        .split_once("Work inside ")
        .and_then(|(_, rest)| rest.split_once("; relative paths"))
        .map_or("", |(path, _)| path);
    let shown = Value::String(workdir.into()).to_string().len() - 2;
    let path_delta = |bytes: usize| bytes + "/work/repo".len() - shown;
    let (prompt, catalogue) = match system.find("\nDeferred tools") {
        Some(at) => (&system[..at], &system[at..]),
        None => (system, ""),
    };
    let mut parts = vec![
        (
            "system prompt".to_string(),
            path_delta(Value::String(prompt.into()).to_string().len() - 2),
        ),
        (
            "deferred catalogue".to_string(),
            Value::String(catalogue.into()).to_string().len() - 2,
        ),
    ];
    let mut counted = parts[0].1 + parts[1].1;
    for definition in body["tools"].as_array().into_iter().flatten() {
        let bytes = definition.to_string().len();
        counted += bytes;
        parts.push((
            format!("tool {}", definition["name"].as_str().unwrap_or("?")),
            bytes,
        ));
    }
    let messages = body["messages"].to_string().len();
    counted += messages;
    parts.push(("messages".into(), messages));
    let total = path_delta(whole);
    parts.push((
        "the rest (model, limits, breakpoints, framing)".into(),
        total - counted,
    ));
    parts.push(("total".into(), total));
    parts
}

/// The `<system-reminder>` text blocks of a request's newest message, by size.
pub fn reminders(body: &Value) -> Vec<usize> {
    let newest = body["messages"].as_array().and_then(|all| all.last());
    newest
        .and_then(|message| message["content"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .filter(|text| text.starts_with("<system-reminder>"))
        .map(|text| Value::String(text.into()).to_string().len() - 2)
        .collect()
}

/// `name = bytes` lines of the budget file (`#` starts a comment; quoted names allowed).
pub fn budget() -> Vec<Part> {
    BUDGET
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .filter(|line| !line.is_empty())
        .map(|line| {
            let (name, bytes) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("request-budget.toml: not `name = bytes`: {line}"));
            let bytes = bytes.trim().parse().unwrap_or_else(|_| {
                panic!("request-budget.toml: {line}: the budget is a number of bytes")
            });
            (name.trim().trim_matches('"').to_string(), bytes)
        })
        .collect()
}

/// Every part over its budget (and every measured part the budget does not name), as lines
/// that say which and by how much; empty when all fit.
pub fn over_budget(measured: &[Part]) -> Vec<String> {
    let budget = budget();
    let mut problems = Vec::new();
    for (name, bytes) in measured {
        match budget.iter().find(|(allowed, _)| allowed == name) {
            Some((_, limit)) if bytes > limit => problems.push(format!(
                "{name}: {bytes} bytes, over its budget of {limit} by {}",
                bytes - limit
            )),
            Some(_) => {}
            None => problems.push(format!(
                "{name}: {bytes} bytes, and request-budget.toml has no budget for it"
            )),
        }
    }
    problems
}

//! Reading what a run left in its output folder, apart from the binary that wrote it: the
//! transcript's events, S2's invariant over them (every tool use answered once, in order), and
//! the JUnit report.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// Every event of a transcript, parsed.
pub fn transcript(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("bad transcript line {line}: {err}"))
        })
        .collect()
}

pub fn events<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["type"] == kind)
        .collect()
}

/// S2's invariant: every tool_use of every assistant message has exactly one tool_result,
/// and results come in call order.
pub fn assert_every_tool_use_answered_once(all: &[Value]) {
    let uses: Vec<String> = events(all, "assistant_message")
        .iter()
        .flat_map(|event| event["content"].as_array().unwrap().iter())
        .filter(|block| block["type"] == "tool_use")
        .map(|block| block["id"].as_str().unwrap().to_string())
        .collect();
    let results: Vec<String> = events(all, "tool_result")
        .iter()
        .map(|event| event["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(uses, results, "tool_use ids vs tool_result ids");
    let mut seen = HashMap::new();
    for id in &results {
        *seen.entry(id).or_insert(0) += 1;
    }
    assert!(
        seen.values().all(|count| *count == 1),
        "a tool_use was answered twice: {seen:?}"
    );
}

/// The transcript's conversations in order of appearance, each with its events: the run's
/// own and each sub-agent's (an event carries the `agent_id` of the one it belongs to).
pub fn conversations(all: &[Value]) -> Vec<Vec<Value>> {
    let mut agents: Vec<&Value> = Vec::new();
    for event in all {
        if !agents.contains(&&event["agent_id"]) {
            agents.push(&event["agent_id"]);
        }
    }
    agents
        .into_iter()
        .map(|agent| {
            all.iter()
                .filter(|event| event["agent_id"] == *agent)
                .cloned()
                .collect()
        })
        .collect()
}

/// S2 within each conversation: the run's own and each sub-agent's (a sub-agent's calls are
/// answered before the Agent call that started it, so they are checked apart).
pub fn assert_each_conversation_answers_every_tool_use_once(all: &[Value]) {
    for conversation in conversations(all) {
        assert_every_tool_use_answered_once(&conversation);
    }
}

/// A parsed JUnit report: (tests, failures) of the first suite, and its properties.
pub struct Junit {
    pub tests: usize,
    pub failures: usize,
    pub testcases: Vec<(String, bool)>,
    pub properties: HashMap<String, String>,
    pub system_out: String,
}

pub fn junit(path: &Path) -> Junit {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let suite = doc
        .descendants()
        .find(|node| node.has_tag_name("testsuite"))
        .unwrap();
    let number = |name: &str| suite.attribute(name).unwrap().parse::<usize>().unwrap();
    let testcases = suite
        .children()
        .filter(|node| node.has_tag_name("testcase"))
        .map(|case| {
            let failed = case
                .children()
                .any(|c| c.has_tag_name("failure") || c.has_tag_name("error"));
            (case.attribute("name").unwrap().to_string(), failed)
        })
        .collect();
    let properties = suite
        .descendants()
        .filter(|node| node.has_tag_name("property"))
        .map(|p| {
            (
                p.attribute("name").unwrap().to_string(),
                p.attribute("value").unwrap().to_string(),
            )
        })
        .collect();
    let system_out = suite
        .children()
        .find(|node| node.has_tag_name("system-out"))
        .and_then(|node| node.text())
        .unwrap_or_default()
        .to_string();
    Junit {
        tests: number("tests"),
        failures: number("failures"),
        testcases,
        properties,
        system_out,
    }
}

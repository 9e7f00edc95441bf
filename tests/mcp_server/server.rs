#![expect(
    clippy::unwrap_used,
    reason = "a test fixture: a broken pipe or a bad write ends it"
)]

//! A small MCP server over stdio for the end-to-end tests, written against the protocol text
//! (newline-delimited JSON-RPC) rather than the SDK tollgate uses, so the two sides are
//! independent. Tools: `echo`, `peek` (annotated read-only), `slow`, `crash` (exits mid-call),
//! `fail` (an `isError` result), `flood` (a 20 MiB line without end), `hang` (starts a grandchild and never answers) and `notify`
//! (a log message and `tools/list_changed`, after which `added` is listed), and
//! `write_file` (writes `path`; the OS error is an `isError` result — the sandbox test's probe).
//! Each call runs on a thread of its own, so a hanging call does not block the others.
//! Flags: `--exit-at-start` (exits before answering), `--silent-at-start` (never answers),
//! `--endless-pages` (a tool listing whose every page names a next one).

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

type Out = Arc<Mutex<std::io::Stdout>>;

fn send(out: &Out, message: serde_json::Value) {
    let mut line = message.to_string();
    line.push('\n');
    let mut out = out.lock().unwrap();
    out.write_all(line.as_bytes()).unwrap();
    out.flush().unwrap();
}

fn text(id: &serde_json::Value, text: &str, is_error: bool) -> serde_json::Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": text}], "isError": is_error
    }})
}

fn tools(added: bool) -> serde_json::Value {
    let tool = |name: &str, description: &str, properties: serde_json::Value| {
        serde_json::json!({"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": properties}})
    };
    let mut list = vec![
        tool(
            "echo",
            "Echoes the text back. Use it to test.",
            serde_json::json!({"text": {"type": "string"}}),
        ),
        tool(
            "slow",
            "Sleeps for some seconds, then answers.",
            serde_json::json!({"seconds": {"type": "number"}}),
        ),
        tool(
            "crash",
            "Exits in the middle of the call.",
            serde_json::json!({}),
        ),
        tool(
            "fail",
            "Returns a result marked isError.",
            serde_json::json!({}),
        ),
        tool(
            "flood",
            "Sends one line of 20 MiB without a newline.",
            serde_json::json!({}),
        ),
        tool(
            "hang",
            "Starts a grandchild and never answers.",
            serde_json::json!({}),
        ),
        tool(
            "notify",
            "Sends a log message and says the tool list changed.",
            serde_json::json!({}),
        ),
    ];
    list.push(tool(
        "write_file",
        "Writes a line to a file.",
        serde_json::json!({"path": {"type": "string"}}),
    ));
    let mut peek = tool(
        "peek",
        "Reads nothing, changes nothing.",
        serde_json::json!({}),
    );
    peek["annotations"] = serde_json::json!({"readOnlyHint": true});
    list.push(peek);
    if added {
        list.push(tool("added", "Listed after notify.", serde_json::json!({})));
    }
    serde_json::Value::Array(list)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--exit-at-start") {
        eprintln!("refusing to start on purpose");
        std::process::exit(9);
    }
    let silent = args.iter().any(|a| a == "--silent-at-start");
    let endless = args.iter().any(|a| a == "--endless-pages");
    let stdin = std::io::stdin();
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let added = Arc::new(AtomicBool::new(false));
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id").cloned() else {
            continue; // a notification
        };
        let method = message["method"].as_str().unwrap_or_default();
        match method {
            "initialize" if silent => {}
            "initialize" => send(
                &out,
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {"listChanged": true}, "logging": {}},
                    "serverInfo": {"name": "tollgate-mcp-test-server", "version": "1"}
                }}),
            ),
            "tools/list" if endless => {
                // Pages without end, 50 tools each with a 10 000-character description.
                let page = message["params"]["cursor"]
                    .as_str()
                    .and_then(|c| c.parse::<usize>().ok())
                    .unwrap_or(0);
                let tools: Vec<serde_json::Value> = (0..50)
                    .map(|n| {
                        serde_json::json!({"name": format!("t{page}_{n}"),
                            "description": "Many. ".repeat(2000),
                            "inputSchema": {"type": "object", "properties": {}}})
                    })
                    .collect();
                send(
                    &out,
                    serde_json::json!({"jsonrpc": "2.0", "id": id,
                        "result": {"tools": tools, "nextCursor": (page + 1).to_string()}}),
                );
            }
            "tools/list" => send(
                &out,
                serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "result": {"tools": tools(added.load(Ordering::SeqCst))}}),
            ),
            "tools/call" => {
                let (out, added) = (out.clone(), added.clone());
                std::thread::spawn(move || tool_call(&out, &added, &id, &message["params"]));
            }
            "ping" => send(
                &out,
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            ),
            other => send(
                &out,
                serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": format!("no method {other}")}}),
            ),
        }
    }
}

fn tool_call(out: &Out, added: &AtomicBool, id: &serde_json::Value, params: &serde_json::Value) {
    let arguments = &params["arguments"];
    match params["name"].as_str().unwrap_or_default() {
        "echo" | "peek" | "added" => {
            let said = arguments["text"].as_str().unwrap_or("nothing");
            send(out, text(id, &format!("echo: {said}"), false));
        }
        "slow" => {
            let seconds = arguments["seconds"].as_f64().unwrap_or(1.0);
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
            send(out, text(id, "slept", false));
        }
        "crash" => {
            eprintln!("crashing on purpose");
            std::process::exit(3);
        }
        "fail" => send(out, text(id, "it failed on purpose", true)),
        "flood" => {
            // One line without end, past the client's 16 MiB cap: a broken pipe ends it.
            let chunk = vec![b'x'; 1024 * 1024];
            let mut out = out.lock().unwrap();
            for _ in 0..20 {
                if out.write_all(&chunk).is_err() {
                    return;
                }
            }
            let _ = out.flush();
        }
        "write_file" => {
            let path = arguments["path"].as_str().unwrap_or_default();
            match std::fs::write(path, "written by the MCP test server\n") {
                Ok(()) => send(out, text(id, &format!("wrote {path}"), false)),
                Err(err) => send(out, text(id, &format!("cannot write {path}: {err}"), true)),
            }
        }
        "hang" => {
            let mut child = std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .unwrap();
            std::fs::write("grandchild.pid", child.id().to_string()).unwrap();
            // Never answers: waits on the grandchild, which outlives any test.
            let _ = child.wait();
        }
        "notify" => {
            added.store(true, Ordering::SeqCst);
            send(
                out,
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "logger": "test", "data": "hello from the server"}}),
            );
            send(
                out,
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            );
            send(out, text(id, "notified", false));
        }
        other => send(
            out,
            serde_json::json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32602, "message": format!("unknown tool {other}")}}),
        ),
    }
}

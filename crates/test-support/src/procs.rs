//! Processes as `/proc` shows them: for the tests that kill tollgate and look for what it
//! started.

/// Pids of processes whose command line contains `needle`. A zombie has an empty command
/// line: it is gone in every sense that matters.
pub fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .contains(needle)
        {
            found.push(pid);
        }
    }
    found
}

/// The parent of `pid` (the field after the state in `/proc/<pid>/stat`).
pub fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

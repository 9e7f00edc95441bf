//! scripts/install-release.sh against a release server on 127.0.0.1 that serves any path
//! (as a hostile redirect target would): the version and the repository become parts of the
//! download URL, so only `latest`, MAJOR.MINOR.PATCH and a plain owner/name may reach it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use crate::support::repo_root;

const ASSET: &[u8] = b"#!/bin/sh\necho served\n";

/// A server that answers every `…/SHA256SUMS` with the checksum of [`ASSET`] for every
/// target, and every other path with [`ASSET`]: whatever URL the installer builds "verifies".
/// Returns its base URL and the paths requested.
fn release_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let digest = ring::digest::digest(&ring::digest::SHA256, ASSET);
    let sum: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let sums = ["x86_64", "aarch64"]
        .iter()
        .map(|arch| format!("{sum}  tollgate-{arch}-unknown-linux-gnu\n"))
        .collect::<String>();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) <= 2 {
                    break;
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let body: &[u8] = if path.ends_with("/SHA256SUMS") {
                sums.as_bytes()
            } else {
                ASSET
            };
            log.lock().unwrap().push(path);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(body);
        }
    });
    (base, seen)
}

/// Runs the installer; returns its exit code, stderr, and whether it installed a binary.
fn install(server: &str, repository: &str, version: &str) -> (i32, String, bool) {
    let dest = tempfile::tempdir().unwrap();
    let run = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/install-release.sh"))
        .arg(version)
        .arg(dest.path())
        .env("GITHUB_SERVER_URL", server)
        .env("TOLLGATE_REPOSITORY", repository)
        .output()
        .unwrap();
    (
        run.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&run.stderr).into_owned(),
        dest.path().join("tollgate").exists(),
    )
}

/// A machine the installer can be tried on: one with a release target, and curl, which
/// `install-release.sh` downloads with (as on GitHub's runners).
fn supported_machine() -> bool {
    if crate::support::skip::need_program("curl", "Debian: apt-get install curl").is_none() {
        return false;
    }
    let arch = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .unwrap();
    let arch = String::from_utf8_lossy(&arch.stdout);
    let supported = matches!(arch.trim(), "x86_64" | "aarch64" | "arm64");
    if !supported {
        crate::support::skip::skip(&format!(
            "no release target for this machine ({})",
            arch.trim()
        ));
    }
    supported
}

#[test]
fn only_a_plain_version_and_repository_reach_the_download_url() {
    if !supported_machine() {
        return;
    }
    let (server, seen) = release_server();
    // What a release looks like: the control that shows the server is reachable.
    for (version, path) in [
        ("0.1.0", "/owner/tool/releases/download/v0.1.0/SHA256SUMS"),
        (
            "v12.0.3",
            "/owner/tool/releases/download/v12.0.3/SHA256SUMS",
        ),
        ("latest", "/owner/tool/releases/latest/download/SHA256SUMS"),
    ] {
        seen.lock().unwrap().clear();
        let (code, stderr, installed) = install(&server, "owner/tool", version);
        assert_eq!((code, installed), (0, true), "{version}: {stderr}");
        assert_eq!(seen.lock().unwrap().first().map(String::as_str), Some(path));
    }
    let versions = [
        "0.1.0/../../../../../evil/tool/releases/download/v6.6.6",
        "v0.1.0/../../../../evil/tool/releases/download/v6.6.6",
        "../../evil/tool/releases/download/v6.6.6",
        "0.1.0%2F..%2F..%2Fevil",
        "0.1.0?x=/evil",
        "0.1.0#",
        "0.1.0\n",
        " 0.1.0",
        "0.1",
        "0.1.0.1",
        "01.1.0",
        "0.1.0-rc.1/../x",
        "vv0.1.0",
        "LATEST",
        "latest/../../evil",
        "",
        "１.2.3",
    ];
    let repositories = [
        "evil/tool/releases/download/v6.6.6/../../../../owner/tool",
        "owner/tool/../evil",
        "owner/..",
        "owner/.",
        "owner",
        "/owner/tool",
        "owner/tool/",
        "owner//tool",
        "-owner/tool",
        "owner/tool?x",
        "owner/tool\nx",
        "ow ner/tool",
    ];
    let cases = versions
        .iter()
        .map(|version| ("owner/tool", *version))
        .chain(repositories.iter().map(|repository| (*repository, "0.1.0")));
    for (repository, version) in cases {
        seen.lock().unwrap().clear();
        let (code, stderr, installed) = install(&server, repository, version);
        assert_eq!(
            (code, installed),
            (1, false),
            "{repository:?} {version:?}: {stderr}"
        );
        assert!(stderr.contains("must be"), "{version:?}: {stderr}");
        assert!(
            seen.lock().unwrap().is_empty(),
            "{repository:?} {version:?} reached the server: {:?}",
            seen.lock().unwrap()
        );
    }
    // The server itself: a scheme and a host, no path to climb out of.
    for server_url in [format!("{server}/evil/tool/x/../.."), "file:///etc".into()] {
        let (code, stderr, installed) = install(&server_url, "owner/tool", "0.1.0");
        assert_eq!((code, installed), (1, false), "{server_url}: {stderr}");
    }
}

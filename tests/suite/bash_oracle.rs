//! A differential oracle: Bash itself. Generated commands, each hiding a harmless marker
//! (`touch "$MARK"`) in some structural position, run under the real `/usr/bin/bash` in a
//! throw-away folder; when Bash created the marker, the analyser must have seen a `touch`.
//!
//! Generation is seeded and deterministic: `TOLLGATE_ORACLE_CASES` (default 300) sets how many
//! commands are tried, `TOLLGATE_ORACLE_SEED` (default 1) the seed; a failure prints both and
//! the case. Safety: the environment is cleared, `PATH` holds only a few harmless tools, the
//! working directory and `HOME` are a temp folder, each run is killed after 5 s, and corpus
//! seeds run only when the analyser alone proves them read-only and a word screen passes.

#![allow(
    clippy::unwrap_used,
    reason = "test and bench support: a failure should panic"
)]

use std::path::Path;
use std::process::{Command, Stdio};

use tollgate::bash::{BashAnalysis, BashVerdict, CommandVerdict};

use crate::support::bash::{analyse, rules};

const BASH: &str = "/usr/bin/bash";

/// The marker command, spelled as an attacker would: quoting, escapes, wrappers, shells.
pub(crate) const MARKERS: &[&str] = &[
    r#"touch "$MARK""#,
    r#"touch $MARK"#,
    r#"\touch "$MARK""#,
    r#"t\ouch "$MARK""#,
    r#""touch" "$MARK""#,
    r#"t""ouch "$MARK""#,
    r#"$'\x74ouch' "$MARK""#,
    r#"$'\164ouch' "$MARK""#,
    r#"command touch "$MARK""#,
    r#"builtin command touch "$MARK""#,
    r#"env touch "$MARK""#,
    r#"env LANG=C touch "$MARK""#,
    r#"timeout 5 touch "$MARK""#,
    r#"nice -n 1 touch "$MARK""#,
    r#"nohup touch "$MARK""#,
    r#"exec touch "$MARK""#,
    r#"xargs touch <<< "$MARK""#,
    r#"find . -maxdepth 0 -exec touch "$MARK" \;"#,
    r#"sh -c "touch \"\$MARK\"""#,
    r#"bash -c "touch \$MARK""#,
    r#"eval "touch \$MARK""#,
    r#"{ touch "$MARK"; }"#,
    r#"(touch "$MARK")"#,
    r#"true && touch "$MARK""#,
    r#"false || touch "$MARK""#,
    r#"echo x | touch "$MARK""#,
    r#"touch "$MARK" 2>/dev/null"#,
    r#"LANG=C touch "$MARK""#,
];

/// Structural positions; `@` stands for the marker. Several of them make Bash evaluate data
/// (arithmetic, subscripts, `${!x}`, `${x@P}`) or end a here-document early.
pub(crate) const CONTEXTS: &[&str] = &[
    "@",
    "echo $(@)",
    "echo `@`",
    "x=$(@)",
    "echo \"$(@)\"",
    "echo ${u:-$(@)}",
    "echo \"${u:-`@`}\"",
    "cat <(@)",
    "echo hi > >(@); wait",
    "f() { @; }; f",
    "function g { @; }; g",
    "f() ( @ ); f",
    "if true; then @; fi",
    "if false; then :; else @; fi",
    "for i in 1; do @; done",
    "while true; do @; break; done",
    "until false; do @; break; done",
    "case a in a) @;; esac",
    "@ &\nwait",
    "! @",
    "echo hi; @",
    "echo hi\n@",
    "echo hi && @",
    "echo hi | @",
    "echo hi |& @",
    "# comment\n@",
    "echo 'a;b' # ;\n@",
    "echo hi \\\n; @",
    "echo hi\r\n@",
    "(( a[$(@)] ))",
    "echo $(( 0 * $(@) 1 ))",
    "echo $[ $(@) 1 ]",
    "[[ $(@) ]]",
    "[ -n \"$(@)\" ]",
    "a=([$(@)]=1)",
    "echo ${s:$(@)0}",
    "cat <<< \"$(@)\"",
    "cat <<EOF\n$(@)\nEOF",
    "cat <<EOF\n`@`\nEOF",
    "cat <<-EOF\n\t$(@)\n\tEOF",
    "cat <<EOF | cat\n$(@)\nEOF",
    "x='a[$(@)]'; echo $((x))",
    "x='a[$(@)]'; (( x ))",
    "x='a[$(@)]'; [[ x -eq 0 ]]",
    "x='a[$(@)]'; [[ $x -lt 1 ]]",
    "x='a[$(@)]'; let y=x",
    "x='a[$(@)]'; declare -i n; n=x",
    "x='a[$(@)]'; b=([x]=1)",
    "x='a[$(@)]'; b[x]=1",
    "x='a[$(@)]'; echo ${b[x]}",
    "s=abc; x='a[$(@)]'; echo ${s:x}",
    "set -- a b; x='a[$(@)]'; echo ${@:x}",
    "a=(1); x='a[$(@)]'; echo ${!x}",
    "a=(1); x='a[$(@)]'; test -v \"$x\"",
    "a=(1); x='a[$(@)]'; [ -v \"$x\" ]",
    "a=(1); x='a[$(@)]'; [[ -v $x ]]",
    "x='$(@)'; echo ${x@P}",
    "x=\"a[\\$(@)]\"; echo $((x + 1))",
    "declare -a d='([$(@)]=1)'",
    "let 'y=a[$(@)]'",
    "cat <<E\"O\"F\nhi\nEOF\n@\nE\"O\"F",
    "cat <<E'O'F\nhi\nEOF\n@\nE'O'F",
    "cat <<\\EOF\nhi\nEOF\n@",
    "cat <<E\\OF\nhi\nEOF\n@\nE\\OF",
    "cat <<$'EOF'\nhi\nEOF\n@",
    "cat <<$\"EOF\"\nhi\nEOF\n@\n$\"EOF\"",
    "cat <<'E'\"O\"F\nhi\nEOF\n@\n'E'\"O\"F",
    "cat <<-EOF\nhi\n\tEOF\n@\nEOF",
    "cat <<A <<B\na\nA\nb\nB\n@",
    "sh -c '@'",
    "bash -c '@'",
    "eval '@'",
    "env sh -c '@'",
];

/// Words that keep a corpus seed from being run at all, whatever the analyser says.
const UNSAFE_WORDS: &[&str] = &[
    "rm", "dd", "mkfs", "shred", "chmod", "chown", "mv", "cp", "kill", "curl", "wget", "ssh",
    "scp", "nc", "git", "cargo", "npm", "make", "go", "pytest", "sudo", "su", "doas", "/dev",
    "/proc", ">", "tee", "truncate", "ln", "mkdir", "rmdir", "unlink", "install", "reboot",
    "shutdown", "exec", "trap", "ulimit", "sleep", "read", "yes", "while", "until", "for", "tail",
    "wait", "source", ".", "eval", "sh", "bash", "python", "perl", "ruby", "node", "xargs", "find",
    "env", "nohup", "timeout", "~", "..", "$",
];

/// The tools the generated commands may find on `PATH`.
const TOOLS: &[&str] = &[
    "touch", "echo", "cat", "true", "false", "printf", "sh", "bash", "env", "timeout", "nice",
    "nohup", "xargs", "find", "grep", "sed", "head", "wc", "sort", "ls", "tr", "cut", "test", "[",
    "basename", "dirname", "uniq", "seq", "awk", "date", "uname", "pwd",
];

/// splitmix64: small, seeded, the same on every machine.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(crate) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

pub(crate) fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Places `inner` in `context`; `None` when the result could not be what Bash reads (a single
/// quote inside single quotes, a backquote inside backquotes).
pub(crate) fn place(context: &str, inner: &str) -> Option<String> {
    let at = context.find('@')?;
    let before = &context[..at];
    let in_single = before.matches('\'').count() % 2 == 1;
    let in_backquote = before.matches('`').count() % 2 == 1;
    if (in_single && inner.contains('\'')) || (in_backquote && inner.contains('`')) {
        return None;
    }
    Some(context.replacen('@', inner, 1))
}

fn generate(rng: &mut Rng, seeds: &[String]) -> String {
    loop {
        let mut script = rng.pick(MARKERS).to_owned();
        let levels = 1 + rng.next() % 2;
        let mut ok = true;
        for _ in 0..levels {
            match place(rng.pick(CONTEXTS), &script) {
                Some(s) => script = s,
                None => ok = false,
            }
        }
        if !ok {
            continue;
        }
        if !seeds.is_empty() && rng.chance(30) {
            let seed = &seeds[(rng.next() % seeds.len() as u64) as usize];
            script = if rng.chance(50) {
                format!("{seed}\n{script}")
            } else {
                format!("{script}\n{seed}")
            };
        }
        return script;
    }
}

/// Corpus commands safe to run: the analyser alone proves every command read-only, nothing
/// is written, and no word of the screen appears.
pub(crate) fn seeds() -> Vec<String> {
    let rules = rules();
    let mut candidates: Vec<String> = super::bash_corpus::CORPUS
        .iter()
        .map(|(cmd, _, _)| (*cmd).to_owned())
        .collect();
    candidates.extend(
        super::bash_sweep::snippets(&super::bash_sweep::corpus_dir())
            .into_iter()
            .map(|(_, s)| s),
    );
    candidates
        .into_iter()
        .filter(|seed| seed.len() < 300 && !seed.contains("touch"))
        .filter(|seed| {
            let words = seed.split(|c: char| {
                c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '`' | '\'' | '"')
            });
            let screened = words.into_iter().any(|w| {
                UNSAFE_WORDS.iter().any(|u| {
                    w == *u
                        || (u.len() > 1 && !u.chars().all(char::is_alphanumeric) && w.contains(u))
                })
            }) || seed.contains(['>', '$', '~', '`', '\\', '*', '?', '{']);
            !screened
        })
        .filter(|seed| {
            let a = analyse(seed, &rules);
            a.verdict == BashVerdict::Allow
                && a.writes.is_empty()
                && a.commands
                    .iter()
                    .all(|c| c.verdict == CommandVerdict::ReadOnly)
        })
        .collect()
}

/// A temp folder with `bin/` (symlinks to the few tools) and an empty `work/`.
fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    for tool in TOOLS {
        for folder in ["/usr/bin", "/bin"] {
            let target = Path::new(folder).join(tool);
            if target.exists() {
                std::os::unix::fs::symlink(&target, bin.join(tool)).unwrap();
                break;
            }
        }
    }
    dir
}

/// Runs `script` under Bash in a fresh `work/` folder; true when the marker was created.
fn bash_runs_marker(root: &Path, script: &str) -> bool {
    let work = root.join("work");
    let mark = root.join("marker");
    let _ = std::fs::remove_file(&mark);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir(&work).unwrap();
    let status = Command::new("/usr/bin/timeout")
        .args([
            "-s",
            "KILL",
            "5",
            BASH,
            "--norc",
            "--noprofile",
            "-c",
            script,
        ])
        .env_clear()
        .env("PATH", root.join("bin"))
        .env("HOME", &work)
        .env("MARK", &mark)
        .current_dir(&work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    status.is_ok() && mark.exists()
}

fn sees_touch(analysis: &BashAnalysis) -> bool {
    analysis.commands.iter().any(|c| {
        c.argv
            .first()
            .is_some_and(|name| name.rsplit('/').next() == Some("touch"))
    })
}

#[test]
fn bash_runs_no_marker_the_analyser_missed() {
    if !Path::new(BASH).is_file() {
        return crate::support::skip::skip(&format!("{BASH} is absent"));
    }
    let cases = env_number("TOLLGATE_ORACLE_CASES", 300);
    let seed = env_number("TOLLGATE_ORACLE_SEED", 1);
    let seeds = seeds();
    let rules = rules();
    let root = sandbox();
    let mut rng = Rng(seed);
    let mut ran = 0;
    let mut missed = Vec::new();
    for case in 0..cases {
        let script = generate(&mut rng, &seeds);
        if !bash_runs_marker(root.path(), &script) {
            continue;
        }
        ran += 1;
        let analysis = analyse(&script, &rules);
        if !sees_touch(&analysis) {
            missed.push(format!("case {case}: {script:?} -> {:?}", analysis.verdict));
        }
    }
    println!(
        "bash oracle: {cases} commands tried (seed {seed}, {} corpus seeds), bash ran the marker in {ran}, the analyser missed {}",
        seeds.len(),
        missed.len()
    );
    assert!(
        ran * 2 > usize::try_from(cases).unwrap(),
        "bash ran the marker in only {ran} of {cases} cases: the generator is broken"
    );
    assert!(
        missed.is_empty(),
        "Bash ran the marker but the analyser found no `touch` (TOLLGATE_ORACLE_SEED={seed}):\n{}",
        missed.join("\n")
    );
}

#[test]
fn the_oracle_sees_a_miss() {
    // The oracle itself must be able to fail: a marker Bash runs from a variable's value is
    // invisible to any static reading.
    let root = sandbox();
    let script = "c=touch; $c \"$MARK\"";
    assert!(bash_runs_marker(root.path(), script));
    assert!(!sees_touch(&analyse(script, &rules())));
}

//! Reading what the operator names: the task file, policy and settings files, `--vars-file`,
//! `--output-schema`, `--prompt-file` (a file, or `-` for standard input), a batch's
//! manifest, `auto eval`'s cases. Each is read whole, so each has a size cap, and only a
//! regular file is read where a file belongs: a FIFO with no writer would hold the run before
//! its first model call forever, and `/dev/zero` would grow it until memory runs out. The
//! type is checked with `stat` before the open, the open is made with `O_NONBLOCK` (a FIFO
//! swapped in after the check still cannot block it) and what was opened is checked again
//! with `fstat`. Standard input, where a stream is meant, has the prompt's cap and a clock.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most a configuration file (task, policy, settings, vars, output schema, manifest,
/// cases) may hold. The YAML loader's own limits (values, depth) apply within it.
pub const CONFIG_CAP: u64 = 4 << 20;

/// The most a prompt (`--prompt-file`, or `-`) may hold: more than any model's context
/// window takes (1M tokens is about 4 MB of text).
pub const PROMPT_CAP: u64 = 8 << 20;

/// The most of the event payload `GITHUB_EVENT_PATH` names (for `{{ event.… }}`): GitHub's
/// own cap on a webhook payload.
pub const EVENT_CAP: u64 = 25 << 20;

/// How long `--prompt-file -` waits for standard input to end: a pipe whose writer never
/// writes or never closes (`sleep 1d | tollgate …`, a terminal) is an error, not a run that
/// never starts.
pub const STDIN_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error(
        "the {what} {} is a {kind}, not a regular file; only a regular file is read{}",
        path.display(),
        if *stdin_flag { " (give - to read standard input)" } else { "" }
    )]
    NotRegular {
        what: &'static str,
        path: PathBuf,
        kind: &'static str,
        /// The flag also takes `-` for standard input, which is said.
        stdin_flag: bool,
    },
    #[error("the {what} {} is larger than the {} cap for it", path.display(), size(*cap))]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        cap: u64,
    },
    #[error("the {what} {} is not UTF-8 text", path.display())]
    NotText { what: &'static str, path: PathBuf },
    #[error("cannot read {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the {what} from standard input is larger than the {} cap for it; the rest was not read",
        size(*cap)
    )]
    StdinTooLarge { what: &'static str, cap: u64 },
    #[error(
        "the {what} from standard input did not end within {}s; pipe it in or give a file",
        timeout.as_secs_f64()
    )]
    StdinTimeout {
        what: &'static str,
        timeout: Duration,
    },
    #[error("cannot read the {what} from standard input: {source}")]
    StdinIo {
        what: &'static str,
        source: std::io::Error,
    },
}

/// `4 MiB`, `8 MiB`, `512 KiB`: a cap as the docs state it.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// What a file the operator named is to tollgate: its name in messages and its cap.
#[derive(Debug, Clone, Copy)]
pub struct Input {
    pub what: &'static str,
    pub cap: u64,
    /// The flag that names it also takes `-` (standard input).
    pub stdin_flag: bool,
}

impl Input {
    /// A configuration file of this name, under [`CONFIG_CAP`].
    pub const fn config(what: &'static str) -> Input {
        Input {
            what,
            cap: CONFIG_CAP,
            stdin_flag: false,
        }
    }
}

/// The regular file at `path`, read whole as text if it is within the cap.
pub fn read_text(path: &Path, input: Input) -> Result<String, InputError> {
    let bytes = read_bytes(path, input)?;
    String::from_utf8(bytes).map_err(|_| InputError::NotText {
        what: input.what,
        path: path.to_path_buf(),
    })
}

/// The regular file at `path`, read whole if it is within the cap.
pub fn read_bytes(path: &Path, input: Input) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io {
        what: input.what,
        path: path.to_path_buf(),
        source,
    };
    // Before the open: opening a FIFO for reading waits for a writer (without O_NONBLOCK),
    // and a device's open may have effects of its own.
    regular(path, input, &std::fs::metadata(path).map_err(io)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(io)?;
    let metadata = file.metadata().map_err(io)?;
    regular(path, input, &metadata)?;
    if metadata.len() > input.cap {
        return Err(too_large(path, input));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    // One byte past the cap tells a file that grew since the fstat.
    file.take(input.cap + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > input.cap {
        return Err(too_large(path, input));
    }
    Ok(bytes)
}

fn too_large(path: &Path, input: Input) -> InputError {
    InputError::TooLarge {
        what: input.what,
        path: path.to_path_buf(),
        cap: input.cap,
    }
}

fn regular(path: &Path, input: Input, metadata: &std::fs::Metadata) -> Result<(), InputError> {
    let kind = metadata.file_type();
    let name = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "folder"
    } else {
        special_kind(kind)
    };
    Err(InputError::NotRegular {
        what: input.what,
        path: path.to_path_buf(),
        kind: name,
        stdin_flag: input.stdin_flag,
    })
}

/// What a file that is neither a regular file nor a folder is, in messages.
pub fn special_kind(kind: std::fs::FileType) -> &'static str {
    if kind.is_fifo() {
        "FIFO"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else if kind.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// All of `reader` (standard input) as text, if it ends within `timeout` and the cap. The
/// read runs on a thread of its own: a blocked read cannot be cancelled, and it must not
/// hold the process past the error (the thread is left behind, and ends with the process).
pub fn read_stream(
    reader: impl Read + Send + 'static,
    what: &'static str,
    cap: u64,
    timeout: Duration,
) -> Result<String, InputError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = reader.take(cap + 1).read_to_end(&mut bytes).map(|_| bytes);
        let _ = sender.send(read);
    });
    let bytes = match receiver.recv_timeout(timeout) {
        Ok(read) => read.map_err(|source| InputError::StdinIo { what, source })?,
        Err(_) => return Err(InputError::StdinTimeout { what, timeout }),
    };
    if bytes.len() as u64 > cap {
        return Err(InputError::StdinTooLarge { what, cap });
    }
    String::from_utf8(bytes).map_err(|_| InputError::StdinIo {
        what,
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixListener;

    use super::*;

    const TASK: Input = Input::config("task file");

    #[test]
    fn a_regular_file_within_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.yaml");
        std::fs::write(&path, "version: 1\n").unwrap();
        assert_eq!(read_text(&path, TASK).unwrap(), "version: 1\n");
        let small = Input { cap: 4, ..TASK };
        let err = read_text(&path, small).unwrap_err().to_string();
        assert!(
            err.contains("t.yaml is larger than the 4 bytes cap"),
            "{err}"
        );
    }

    #[test]
    fn a_fifo_a_device_a_socket_and_a_folder_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let socket = dir.path().join("sock");
        let _listener = UnixListener::bind(&socket).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "FIFO"),
            (Path::new("/dev/zero"), "character device"),
            (socket.as_path(), "socket"),
            (dir.path(), "folder"),
        ] {
            let err = read_text(path, TASK).unwrap_err().to_string();
            assert!(
                err.contains(&format!(
                    "{} is a {kind}, not a regular file",
                    path.display()
                )),
                "{err}"
            );
        }
    }

    #[test]
    fn a_stream_has_a_cap_and_a_clock() {
        let text = read_stream(&b"hello"[..], "prompt", 8, Duration::from_secs(5)).unwrap();
        assert_eq!(text, "hello");
        let endless = std::io::repeat(b'y');
        let err = read_stream(endless, "prompt", 1 << 10, Duration::from_secs(5))
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than the 1 KiB cap"), "{err}");
        // A pipe whose writer stays open and silent.
        let (reader, _writer) = std::io::pipe().unwrap();
        let err = read_stream(reader, "prompt", 8, Duration::from_millis(100))
            .unwrap_err()
            .to_string();
        assert!(err.contains("did not end within 0.1s"), "{err}");
    }
}

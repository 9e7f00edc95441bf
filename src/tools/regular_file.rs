//! Opening the files the file tools read and write: regular files only. A FIFO, a device or
//! a socket would hold a tool until its timeout (or stream forever, as /dev/zero does), so
//! each is refused with a sentence. The open itself never waits: it is made with O_NONBLOCK
//! and what was opened is then checked with fstat, so a FIFO swapped in after any earlier
//! check cannot block either.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum RegularFileError {
    #[error("{} is a {kind}, not a regular file; only regular files can be {}", path.display(), purpose.done())]
    NotRegular {
        path: PathBuf,
        kind: &'static str,
        purpose: Purpose,
    },
    #[error("{} is a directory", path.display())]
    Directory { path: PathBuf },
    // Not a `source`: the OS's reason is printed here, once, as a tool result shows it.
    #[error("cannot {} {}: {error}", purpose.verb(), path.display())]
    Io {
        path: PathBuf,
        purpose: Purpose,
        error: std::io::Error,
    },
}

/// What a file was opened for, for the messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Read,
    Write,
}

impl Purpose {
    fn verb(self) -> &'static str {
        match self {
            Purpose::Read => "read",
            Purpose::Write => "write",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Purpose::Read => "read",
            Purpose::Write => "written",
        }
    }
}

/// Opens `path` for reading, with its metadata, if it is a regular file.
pub fn open_for_reading(path: &Path) -> Result<(File, Metadata), RegularFileError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| refusal(path, Purpose::Read, source))?;
    let metadata = checked(path, &file, Purpose::Read)?;
    Ok((file, metadata))
}

/// Reads the whole of `path`, a regular file.
pub fn read(path: &Path) -> Result<Vec<u8>, RegularFileError> {
    let (mut file, metadata) = open_for_reading(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|source| RegularFileError::Io {
            path: path.to_path_buf(),
            purpose: Purpose::Read,
            error: source,
        })?;
    Ok(bytes)
}

/// Replaces the content of `path` (created if missing) with `bytes`, if it is a regular file.
/// The file is truncated only once it is known to be one.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), RegularFileError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| refusal(path, Purpose::Write, source))?;
    checked(path, &file, Purpose::Write)?;
    file.set_len(0)
        .and_then(|()| file.write_all(bytes))
        .map_err(|source| RegularFileError::Io {
            path: path.to_path_buf(),
            purpose: Purpose::Write,
            error: source,
        })
}

/// [`read`] on the blocking pool, for a tool's async run.
pub async fn read_in_background(path: &Path) -> Result<Vec<u8>, RegularFileError> {
    let target = path.to_path_buf();
    tokio::task::spawn_blocking(move || read(&target))
        .await
        .unwrap_or_else(|err| Err(lost(path, Purpose::Read, err)))
}

/// [`write`] on the blocking pool, for a tool's async run.
pub async fn write_in_background(path: &Path, bytes: Vec<u8>) -> Result<(), RegularFileError> {
    let target = path.to_path_buf();
    tokio::task::spawn_blocking(move || write(&target, &bytes))
        .await
        .unwrap_or_else(|err| Err(lost(path, Purpose::Write, err)))
}

/// A blocking task that panicked or was cancelled, as the I/O error it stands for.
fn lost(path: &Path, purpose: Purpose, err: tokio::task::JoinError) -> RegularFileError {
    RegularFileError::Io {
        path: path.to_path_buf(),
        purpose,
        error: std::io::Error::other(err.to_string()),
    }
}

/// The metadata of the opened `file`, if it is a regular file.
fn checked(path: &Path, file: &File, purpose: Purpose) -> Result<Metadata, RegularFileError> {
    let metadata = file.metadata().map_err(|source| RegularFileError::Io {
        path: path.to_path_buf(),
        purpose,
        error: source,
    })?;
    if metadata.is_file() {
        return Ok(metadata);
    }
    if metadata.is_dir() {
        return Err(RegularFileError::Directory {
            path: path.to_path_buf(),
        });
    }
    Err(RegularFileError::NotRegular {
        path: path.to_path_buf(),
        kind: kind(&metadata),
        purpose,
    })
}

/// An open that failed: a FIFO without a reader or a socket refuses a non-blocking open
/// (ENXIO), and a sentence saying what the path is beats "No such device or address".
fn refusal(path: &Path, purpose: Purpose, source: std::io::Error) -> RegularFileError {
    if source.raw_os_error() == Some(libc::ENXIO)
        && let Ok(metadata) = std::fs::metadata(path)
        && !metadata.is_file()
    {
        return RegularFileError::NotRegular {
            path: path.to_path_buf(),
            kind: kind(&metadata),
            purpose,
        };
    }
    RegularFileError::Io {
        path: path.to_path_buf(),
        purpose,
        error: source,
    }
}

fn kind(metadata: &Metadata) -> &'static str {
    let kind = metadata.file_type();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo(dir: &Path) -> PathBuf {
        let path = dir.join("pipe");
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        path
    }

    #[test]
    fn a_fifo_is_refused_at_once_for_reading_and_writing() {
        let dir = tempfile::tempdir().unwrap();
        let pipe = fifo(dir.path());
        let read = open_for_reading(&pipe).unwrap_err().to_string();
        assert_eq!(
            read,
            format!(
                "{} is a FIFO, not a regular file; only regular files can be read",
                pipe.display()
            )
        );
        let written = write(&pipe, b"x").unwrap_err().to_string();
        assert!(
            written.contains("is a FIFO, not a regular file"),
            "{written}"
        );
    }

    #[test]
    fn devices_are_refused_and_regular_files_pass() {
        let dev_null = Path::new("/dev/null");
        if dev_null.exists() {
            let err = read(dev_null).unwrap_err().to_string();
            assert!(err.contains("is a character device"), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        write(&file, b"long first text").unwrap();
        write(&file, b"short").unwrap();
        assert_eq!(read(&file).unwrap(), b"short");
        assert!(matches!(
            read(dir.path()),
            Err(RegularFileError::Directory { .. })
        ));
    }
}

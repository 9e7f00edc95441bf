//! How a child starts without copying tollgate: `posix_spawn` (a `vfork`-style clone, no copy
//! of the runner's memory) of tollgate's own binary as a small launcher, which receives what
//! the child needs over its stdin — a Unix socket — and then does, as a fresh single-threaded
//! process, what must happen before the command's `exec`: tie itself to
//! tollgate's life, split off the command under its keeper, apply the sandbox setup, `exec`.
//!
//! The launcher is entered from `.init_array`, before `main`, in every binary that links
//! tollgate (the CLI, the test and bench binaries alike), when `argv[0]` is [`ARG0`]. It
//! reports a failure to start as one packet on the socket; the socket closes without one
//! when the command's program is running (its end is close-on-exec).

use std::ffi::{CStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Stdio;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use super::env::ChildEnv;
use super::{guardian, keeper};
use crate::sandbox::ChildSetup;

/// The launcher's `argv[0]`; the command's argv follows it.
const ARG0: &[u8] = b"tollgate-launcher";

/// What the message's first bytes must be.
const MAGIC: [u8; 4] = *b"TGL1";
/// Flags: the command's stdin is a pipe handed over (otherwise `/dev/null`), the guardian's
/// pipe is handed over, a sandbox setup follows.
const STDIN_PIPE: u32 = 1;
const GUARDIAN: u32 = 2;
const SETUP: u32 = 4;

/// The most descriptors a message carries: control, guardian, stdin and the setup's three.
const MAX_FDS: usize = 8;
/// The most bytes a message may hold (a socket filter is a few hundred instructions).
const MAX_MESSAGE: usize = 256 * 1024;

/// Failures that are not an errno, as reported on the socket (negative, so never an errno).
const PARENT_GONE: i32 = -1;
const KEEPER_GONE: i32 = -2;
const BAD_MESSAGE: i32 = -3;

/// A started launcher: the process tollgate waits for (the call's keeper), the call's control
/// pipe, the write end of the command's stdin when it is a pipe, and the socket the launcher
/// reports on.
pub(super) struct Spawned {
    pub child: tokio::process::Child,
    pub control: keeper::Control,
    pub stdin: Option<tokio::process::ChildStdin>,
    pub report: OwnedFd,
}

/// Starts the launcher for `argv`. The returned child is the call's keeper; whether the
/// command's program started is known only from [`started`].
pub(super) fn spawn(
    argv: &[OsString],
    cwd: &Path,
    env: &ChildEnv,
    stdin_pipe: bool,
    setup: Option<&ChildSetup>,
) -> io::Result<Spawned> {
    keep_entry();
    if argv.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    }
    let (ours, theirs) = socket_pair()?;
    let control = keeper::Control::new()?;
    let guardian = guardian::pipe();
    let stdin = if stdin_pipe { Some(pipe()?) } else { None };
    let mut flags = 0;
    let mut fds = vec![control.read_fd()];
    if let Some(pipe) = guardian {
        flags |= GUARDIAN;
        fds.push(pipe);
    }
    if let Some((read, _)) = &stdin {
        flags |= STDIN_PIPE;
        fds.push(read.as_raw_fd());
    }
    let mut setup_bytes = Vec::new();
    if let Some(setup) = setup {
        flags |= SETUP;
        setup.encode(&mut setup_bytes, &mut fds);
    }
    let mut message = Vec::with_capacity(12 + setup_bytes.len());
    message.extend_from_slice(&MAGIC);
    message.extend_from_slice(&std::process::id().to_le_bytes());
    message.extend_from_slice(&flags.to_le_bytes());
    message.extend_from_slice(&setup_bytes);
    // Sent before the launcher exists: the socket buffers it, and no descriptor of this call
    // has to be inherited (every descriptor tollgate opens is close-on-exec).
    send(&ours, &message, &fds)?;
    let mut cmd = tokio::process::Command::new("/proc/self/exe");
    cmd.arg0(OsString::from(std::ffi::OsStr::from_bytes(ARG0)))
        .args(argv)
        .current_dir(cwd)
        .env_clear()
        .envs(env.vars().iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        // Never: a killed keeper could not end what the command left running. Closing the
        // control pipe (the `GroupKiller`) is how a dropped call ends its command.
        .kill_on_drop(false);
    let child = cmd.spawn()?;
    // The launcher's end must be closed here, or the socket never reports the exec.
    drop(cmd);
    let stdin = match stdin {
        Some((_, write)) => Some(tokio::process::ChildStdin::from_std(
            std::process::ChildStdin::from(write),
        )?),
        None => None,
    };
    Ok(Spawned {
        child,
        control,
        stdin,
        report: ours,
    })
}

/// Waits until the command's program runs (`Ok`) or could not be started (the error the
/// launcher reported). The caller ends and reaps the keeper on `Err`.
pub(super) async fn started(report: OwnedFd) -> io::Result<()> {
    set_nonblocking(&report)?;
    // SAFETY: the `AsyncFd` owns the descriptor (an `OwnedFd`) and deregisters it before it
    // is closed; nothing else holds it.
    let report = unsafe { AsyncFd::register_with_interest(report, Interest::READABLE) }
        .map_err(io::Error::from)?;
    loop {
        let mut ready = report.readable().await?;
        if let Ok(result) = ready.try_io(|fd| read_report(fd.get_ref())) {
            return result;
        }
    }
}

/// [`started`] for a caller outside async code; blocks until the launcher reports (the
/// time of two `exec`s).
pub(super) fn started_blocking(report: &OwnedFd) -> io::Result<()> {
    read_report(report)
}

/// `Ok(())` on end of stream (the program runs), the reported failure otherwise.
fn read_report(fd: &OwnedFd) -> io::Result<()> {
    let mut code = [0u8; 4];
    // SAFETY: recv(2) into a stack buffer we own.
    let read = unsafe { libc::recv(fd.as_raw_fd(), code.as_mut_ptr().cast(), code.len(), 0) };
    match read {
        0 => Ok(()),
        4 => Err(match i32::from_le_bytes(code) {
            PARENT_GONE => io::Error::other("tollgate exited while the command was starting"),
            KEEPER_GONE => io::Error::other("the command's keeper exited while it started"),
            BAD_MESSAGE => io::Error::other("the command's launcher got no valid request"),
            errno => io::Error::from_raw_os_error(errno),
        }),
        n if n < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::Error::other("the command's launcher reported nonsense")),
    }
}

fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair(2) writes two descriptors into the array we own.
    let made = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if made != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just opened and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl(2) on a descriptor we own, integer arguments.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Room for `MAX_FDS` descriptors in a control message (`CMSG_SPACE`), over-aligned.
#[repr(C, align(8))]
struct ControlBuffer([u8; 64]);

fn send(socket: &OwnedFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_FDS || bytes.len() > MAX_MESSAGE {
        return Err(io::Error::other(
            "the command's launch request is too large",
        ));
    }
    let mut control = ControlBuffer([0; 64]);
    let fd_bytes = std::mem::size_of_val(fds);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: the message header points at our iovec and control buffer, which outlive the
    // call; CMSG_* compute offsets inside that buffer, sized for MAX_FDS descriptors.
    unsafe {
        let mut header: libc::msghdr = std::mem::zeroed();
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.0.as_mut_ptr().cast();
        header.msg_controllen = libc::CMSG_SPACE(fd_bytes as u32) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&header);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as usize;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(cmsg), fd_bytes);
        if libc::sendmsg(socket.as_raw_fd(), &header, libc::MSG_NOSIGNAL) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

type InitFn = extern "C" fn(libc::c_int, *const *const libc::c_char, *const *const libc::c_char);

/// Run by the C runtime before `main` in every binary linking this crate; returns at once
/// unless this process is a launcher. Referenced from [`spawn`]'s module so the linker keeps
/// it wherever commands can be started.
#[used]
#[unsafe(link_section = ".init_array")]
static ENTRY: InitFn = entry;

/// Makes sure the entry is linked into a binary that starts commands.
fn keep_entry() {
    std::hint::black_box(&ENTRY);
}

extern "C" fn entry(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _envp: *const *const libc::c_char,
) {
    // SAFETY: the C runtime passes `argc` and a NULL-terminated `argv` of `argc` C strings.
    unsafe {
        if argc < 2 || argv.is_null() || (*argv).is_null() {
            return;
        }
        if CStr::from_ptr(*argv).to_bytes() != ARG0 {
            return;
        }
        launch(argv.add(1))
    }
}

/// The launcher's life: it becomes the keeper, its child the command. Never returns.
///
/// # Safety
/// `argv` is a NULL-terminated array of C strings, the command's argv.
unsafe fn launch(argv: *const *const libc::c_char) -> ! {
    // SAFETY: system calls on integers and on buffers we own; `argv` as documented.
    unsafe {
        let report = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3);
        if report < 0 {
            libc::_exit(127);
        }
        let failed = |code: i32| -> ! {
            let bytes = code.to_le_bytes();
            libc::send(report, bytes.as_ptr().cast(), 4, libc::MSG_NOSIGNAL);
            libc::_exit(127)
        };
        let Some(request) = receive(report) else {
            failed(BAD_MESSAGE)
        };
        let stdin = match request.stdin {
            Some(fd) => fd,
            None => {
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if null < 0 {
                    failed(errno());
                }
                OwnedFd::from_raw_fd(null)
            }
        };
        // dup2 clears close-on-exec on 0: the command's stdin, in place of the socket.
        if libc::dup2(stdin.as_raw_fd(), 0) < 0 {
            failed(errno());
        }
        drop(stdin);
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
            failed(errno());
        }
        // Tied only from now on: a tollgate that died before, left this to init.
        if u32::try_from(libc::getppid()).ok() != Some(request.parent) {
            failed(PARENT_GONE);
        }
        // An ignored signal stays ignored across exec (tollgate ignores SIGXFSZ, see
        // `ignore_file_size_signal`): the command gets the default back.
        libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
        let guardian = request.guardian.as_ref().map(AsRawFd::as_raw_fd);
        if let Err(err) = keeper::split(request.control.as_raw_fd(), guardian) {
            failed(match err.raw_os_error() {
                Some(code) => code,
                None => KEEPER_GONE,
            });
        }
        // The command's process, from here on.
        if let Some(setup) = &request.setup
            && let Err(err) = setup.apply()
        {
            failed(err.raw_os_error().unwrap_or(libc::EPERM));
        }
        libc::execvp(*argv, argv);
        failed(errno())
    }
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// What one launch request holds.
struct Request {
    parent: u32,
    control: OwnedFd,
    guardian: Option<OwnedFd>,
    stdin: Option<OwnedFd>,
    setup: Option<ChildSetup>,
}

/// Reads the one request packet from `socket`; descriptors arrive close-on-exec.
fn receive(socket: RawFd) -> Option<Request> {
    let mut bytes = vec![0u8; MAX_MESSAGE];
    let mut control = ControlBuffer([0; 64]);
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut fds = Vec::new();
    // SAFETY: recvmsg(2) into our iovec and control buffer; the CMSG_* walk stays inside the
    // control buffer the kernel filled, and each descriptor it names is ours from now on.
    let read = unsafe {
        let mut header: libc::msghdr = std::mem::zeroed();
        header.msg_iov = &mut iov;
        header.msg_iovlen = 1;
        header.msg_control = control.0.as_mut_ptr().cast();
        header.msg_controllen = control.0.len();
        let read = libc::recvmsg(socket, &mut header, libc::MSG_CMSG_CLOEXEC);
        let mut cmsg = libc::CMSG_FIRSTHDR(&header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&header, cmsg);
        }
        read
    };
    let bytes = bytes.get(..usize::try_from(read).ok()?)?;
    let (magic, rest) = bytes.split_first_chunk::<4>()?;
    if *magic != MAGIC {
        return None;
    }
    let (parent, rest) = rest.split_first_chunk::<4>()?;
    let (flags, rest) = rest.split_first_chunk::<4>()?;
    let flags = u32::from_le_bytes(*flags);
    let mut fds = fds.into_iter();
    let control = fds.next()?;
    let guardian = if flags & GUARDIAN != 0 {
        Some(fds.next()?)
    } else {
        None
    };
    let stdin = if flags & STDIN_PIPE != 0 {
        Some(fds.next()?)
    } else {
        None
    };
    let setup = if flags & SETUP != 0 {
        Some(ChildSetup::decode(rest, &mut fds)?)
    } else {
        None
    };
    Some(Request {
        parent: u32::from_le_bytes(*parent),
        control,
        guardian,
        stdin,
        setup,
    })
}

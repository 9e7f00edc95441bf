//! The Landlock ruleset of one sandboxed command, built in the parent (paths opened, rules
//! added) so the child only has to call `landlock_restrict_self` on an inherited descriptor.

use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use super::SandboxError;
use super::fs_rules::{Access, Grant};

/// The Landlock ABI this kernel offers (0: none), asked of the kernel directly because the
/// crate keeps its own probe private.
pub fn kernel_abi() -> u32 {
    // SAFETY: LANDLOCK_CREATE_RULESET_VERSION with a null attribute and size 0 only returns
    // the ABI version (or -1 with errno); it creates no descriptor.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    u32::try_from(version).unwrap_or(0)
}

/// The crate's name for an ABI number; ABIs past the newest one we build for use that one.
fn abi(version: u32) -> Option<ABI> {
    Some(match version {
        0 => return None,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        _ => ABI::V6,
    })
}

/// What the command may reach on the network; `None` leaves TCP unrestricted.
#[derive(Debug, Clone, Default)]
pub struct TcpAllow {
    /// Connect and bind.
    pub ports: Vec<u16>,
    /// Connect only (tollgate's proxy).
    pub connect_only: Vec<u16>,
}

/// The read rights on a folder at the kernel's ABI, as the raw bits the child passes to
/// `landlock_add_rule` for its own `/proc/<pid>`.
pub fn read_rights_bits(version: u32) -> u64 {
    abi(version).map_or(0, |abi| AccessFs::from_read(abi).bits())
}

/// Builds the ruleset for `grants` (and `tcp` when the kernel can restrict TCP). `None` when
/// the kernel has no Landlock at all. Every requested right is a hard requirement: a ruleset
/// the kernel cannot enforce as asked is an error, never a silently weaker sandbox.
pub fn build(
    version: u32,
    grants: &[Grant],
    tcp: Option<&TcpAllow>,
) -> Result<Option<OwnedFd>, SandboxError> {
    let Some(abi) = abi(version) else {
        return Ok(None);
    };
    let err = |what: &str, source: landlock::RulesetError| SandboxError::Ruleset {
        what: what.to_string(),
        message: source.to_string(),
    };
    let restrict_tcp = tcp.filter(|_| version >= 4);
    let mut created = create(
        AccessFs::from_all(abi),
        restrict_tcp.is_some(),
        version,
        &err,
    )?;
    for grant in grants {
        let Some((fd, rights)) = open(&grant.path, grant.access, abi) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| err(&grant.path.display().to_string(), e))?;
    }
    if let Some(tcp) = restrict_tcp {
        for port in &tcp.ports {
            created = created
                .add_rule(NetPort::new(
                    *port,
                    AccessNet::BindTcp | AccessNet::ConnectTcp,
                ))
                .map_err(|e| err(&format!("port {port}"), e))?;
        }
        for port in &tcp.connect_only {
            created = created
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(|e| err(&format!("port {port}"), e))?;
        }
    }
    Ok(created.into())
}

/// The read-only domain's ruleset: every filesystem right that changes something is handled,
/// and granted only beneath `writable` (devices like `/dev/null`, the run's TMPDIR); TCP
/// bind and connect are handled with no port allowed (ABI 4); signals and abstract Unix
/// sockets stay inside the domain (ABI 6). Reading is not this domain's business: it is
/// stacked on whatever else confines the command. `None` below ABI 3, where truncation is
/// not a right and a "read-only" domain could still empty a file.
pub fn build_read_only(version: u32, writable: &[&Path]) -> Result<Option<OwnedFd>, SandboxError> {
    let Some(abi) = abi(version).filter(|_| version >= 3) else {
        return Ok(None);
    };
    let err = |what: &str, source: landlock::RulesetError| SandboxError::Ruleset {
        what: format!("read-only domain: {what}"),
        message: source.to_string(),
    };
    let handled = AccessFs::from_write(abi);
    let mut created = create(handled, version >= 4, version, &err)?;
    for path in writable {
        let Ok(metadata) = std::fs::metadata(path) else {
            continue;
        };
        let Ok(fd) = PathFd::new(path) else {
            continue;
        };
        let mut rights = handled;
        if !metadata.is_dir() {
            rights &= AccessFs::from_file(abi);
        }
        created = created
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|e| err(&path.display().to_string(), e))?;
    }
    Ok(created.into())
}

/// A ruleset that handles `handled`, TCP bind and connect when `tcp` (ABI 4), and keeps
/// signals and abstract Unix sockets inside the domain from ABI 6.
fn create(
    handled: BitFlags<AccessFs>,
    tcp: bool,
    version: u32,
    err: &dyn Fn(&str, landlock::RulesetError) -> SandboxError,
) -> Result<RulesetCreated, SandboxError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(|e| err("filesystem rights", e))?;
    if tcp {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| err("TCP rights", e))?;
    }
    if version >= 6 {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| err("scoping", e))?;
    }
    ruleset.create().map_err(|e| err("the ruleset", e))
}

/// The path opened (`O_PATH`) with the rights its kind can carry; `None` when it does not
/// exist (a grant on nothing is nothing).
fn open(path: &Path, access: Access, abi: ABI) -> Option<(PathFd, BitFlags<AccessFs>)> {
    let metadata = std::fs::metadata(path).ok()?;
    let fd = PathFd::new(path).ok()?;
    let mut rights = match access {
        Access::ListOnly => AccessFs::ReadDir.into(),
        Access::Read => AccessFs::from_read(abi),
        Access::Write => AccessFs::from_all(abi),
    };
    if !metadata.is_dir() {
        rights &= AccessFs::from_file(abi);
    }
    (!rights.is_empty()).then_some((fd, rights))
}

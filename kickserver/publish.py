"""Publishing a complete file (or folder) under its final name without ever replacing what is there: the last step
of every write the daemon makes for others (kickserver.writer's kicks, kickserver.kitfiles' kit folders)."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from pathlib import Path

_RENAME_NOREPLACE = 1  # linux/fs.h
_AT_FDCWD = -100
_NOT_SUPPORTED = (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EPERM)
_renameat2: object = None  # None: not looked up yet; False: not available


def _libc_renameat2() -> object:
    global _renameat2
    if _renameat2 is None:
        _renameat2 = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
                fn = libc.renameat2  # glibc >= 2.28, musl >= 1.2.4
                fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
                fn.restype = ctypes.c_int
                _renameat2 = fn
            except (OSError, AttributeError):
                pass
    return _renameat2


def _rename_noreplace(src: Path, dst: Path, dir_fd: int | None = None) -> bool | None:
    """rename(2) that fails if dst exists: True done, False dst exists, None not supported here. dir_fd: src and dst
    are names in that folder."""
    fn = _libc_renameat2()
    if not fn:
        return None
    at = _AT_FDCWD if dir_fd is None else dir_fd
    if fn(at, os.fsencode(src), at, os.fsencode(dst), _RENAME_NOREPLACE) == 0:
        return True
    err = ctypes.get_errno()
    if err == errno.EEXIST:
        return False
    if err in _NOT_SUPPORTED:  # an old kernel or a filesystem without the flag (some network/FUSE ones)
        return None
    raise OSError(err, os.strerror(err), str(dst))


def _link_noreplace(src: Path, dst: Path, dir_fd: int | None = None) -> bool | None:
    """Hard-link src to dst (fails if dst exists), then drop src: True, False dst exists, None unsupported.

    A watcher sees `created` for dst (not a move), but the inode is complete and fsynced before."""
    try:
        os.link(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno in _NOT_SUPPORTED + (errno.EMLINK,):  # e.g. FAT/exFAT: no hard links
            return None
        raise
    try:
        os.unlink(src, dir_fd=dir_fd)
    except OSError:
        pass
    return True


def lexists(name: Path, dir_fd: int | None = None) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # something is there (or cannot be told): not a free name
    return True


def publish(src: Path, dst: Path, dir_fd: int | None = None) -> bool:
    """Move the complete file src to the name dst unless dst exists (True), else leave src (False).

    Atomic where the system allows: renameat2(RENAME_NOREPLACE) (Linux on ext4, xfs, btrfs, tmpfs,
    overlayfs...), else a hard link, else (no hard links either) a check then os.replace, which a
    second writer racing on the same name could still beat. dir_fd: src and dst are names in that folder."""
    for way in (_rename_noreplace, _link_noreplace):
        done = way(src, dst, dir_fd)
        if done is not None:
            return done
    if lexists(dst, dir_fd):
        return False
    os.replace(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    return True

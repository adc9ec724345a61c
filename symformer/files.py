"""Output files: ordinary modes, never a special file, visible all at once.

* Every file is created with mode ``0o666`` filtered by the umask (0644 under the
  usual umask 022), as any other program's output.
* An output path must be a directory (for :func:`write_files`) or a regular file
  (for :func:`write_file`), or not exist yet; a device node, FIFO, socket or a
  symbolic link to one is refused with a message naming the path given.  A symbolic
  link to a directory or a regular file is followed (the link stays): the path given
  is the user's own.
* Below that path nothing is written through a symbolic link the command did not
  create: a written file, or a folder on its way, that is a link there is refused
  (:func:`check_below`) before anything is written, and files and folders are then
  created relative to open folder descriptors with ``O_NOFOLLOW``, so a link put
  there during the run makes the write fail rather than land elsewhere.  The
  user's own links that no written path goes through stay as they are.
* :func:`write_file` writes a temporary file beside the target and renames it into
  place.  :func:`write_files` writes a complete new folder (``.NAME.symformer-tmp-PID``,
  in the user's cache when that is on the same file system, else beside the target:
  :func:`staging_folder`), carries over (hard-links, or copies) the files
  already in the target folder that it does not write, and swaps the two folders in
  one atomic step (``renameat2(RENAME_EXCHANGE)`` on Linux; two renames elsewhere).
  A process killed at any moment, even by SIGKILL, leaves the target wholly old or
  wholly new; what it left beside it is recognised by its name and process id and
  removed (or, between the two renames of the fallback, put back) by the next write
  to the same target.
* When the target folder cannot be swapped (it is the current folder or holds it, it
  is a mount point, or its parent is not writable), the files are staged in
  ``DIR/.symformer-tmp-PID/`` and renamed into place one by one: each file is
  replaced atomically, the set is not.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from symformer.errors import InputError

#: Marks a temporary file or folder; followed by the writing process's id.
TMP_TAG = ".symformer-tmp-"
#: Marks the old folder between the two renames of the fallback swap.
OLD_TAG = ".symformer-old-"
#: Longest part of a target's name kept in its temporary name (NAME_MAX is 255).
_NAME_KEEP = 200

_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}


def write_files(directory: str | Path, files: Mapping[str, str | bytes]) -> list[Path]:
    """Write several files into ``directory``, all of them visible at once.

    ``files`` maps relative paths (``fragments/x.tex``) to their contents.  The
    directory (and its parents) is created if needed and never cleared: files already
    there and not named in ``files`` stay.  Returns the written paths, under the
    path given.
    """
    given = str(directory)
    target = output_directory(directory)
    _check_names(files, given)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{given}: cannot create the output directory ({exc.strerror})"
                         ) from None
    _clean_leftovers(target.parent, target.name, restore=target)
    if os.path.isdir(target):
        _clean_leftovers(target, "")
        check_below(target, files, given)
    if os.path.isdir(target) and not _swappable(target):
        _write_in_place(target, files, given)
    else:
        _write_swapped(target, files, given)
    return [Path(directory) / name for name in files]


def write_file(path: str | Path, content: str | bytes, option: str = "--out") -> Path:
    """Write one file atomically: a temporary file beside it, renamed into place.

    Errors name the path given (and ``option``, the one that gave it).  Returns that
    path.
    """
    given = str(path)
    target = output_file(path, option)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _clean_leftovers(target.parent, target.name)
        tmp = target.parent / _tmp_name(target.name)
        try:
            _create(tmp, content)
            os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    except OSError as exc:
        raise InputError(f"{given}: cannot write the file ({exc.strerror})") from None
    return Path(path)


def output_directory(path: str | Path, option: str = "--out") -> Path:
    """The folder that ``path`` names (symbolic links followed), checked for writing.

    Refuses an empty path, a regular file, a device node, a FIFO, a socket, a symbolic
    link to one of them and a dangling link, naming ``path``.  It need not exist yet.
    """
    _given(path, option, "a directory")
    real = _resolved(path)
    mode = _mode(real, path)
    if mode is not None and not stat.S_ISDIR(mode):
        what = "a regular file" if stat.S_ISREG(mode) else _kind(mode)
        raise InputError(f"{path}: is {what}{_via_link(path, real)}; {option} needs a "
                         "directory (or a path to create)")
    return real


def output_file(path: str | Path, option: str = "--out") -> Path:
    """The regular file that ``path`` names (symbolic links followed), checked for writing.

    Refuses an empty path, a path ending in a slash (a folder's name), a directory, a
    device node, a FIFO, a socket, a symbolic link to one of them and a dangling link,
    naming ``path`` and the ``option`` that gave it.  It need not exist yet.
    """
    _given(path, option, "a file")
    if str(path).endswith(("/", os.sep)):
        raise InputError(f"{path}: ends in '/', so it names a folder; {option} needs a "
                         f"file name")
    real = _resolved(path)
    mode = _mode(real, path)
    if mode is not None and not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else _kind(mode)
        raise InputError(f"{path}: is {what}{_via_link(path, real)}; {option} needs a "
                         "regular file (or a path to create)")
    return real


def _given(path: str | Path, option: str, what: str) -> None:
    """Refuse an empty path: ``''`` would name the current folder."""
    if not str(path).strip():
        blank = "empty" if not str(path) else "blank"
        raise InputError(f"{option} {str(path)!r}: the path is {blank}; give {what} to "
                         f"write")


def _resolved(path: str | Path) -> Path:
    """``path`` with every symbolic link resolved; a dangling link is refused."""
    if os.path.islink(path) and not os.path.exists(path):
        raise InputError(f"{path}: is a symbolic link to nothing "
                         f"({os.readlink(path)}); give a directory or a new path")
    return Path(os.path.realpath(path))


def _mode(real: Path, given: str | Path) -> int | None:
    try:
        return os.stat(real).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{given}: cannot write there ({exc.strerror})") from None


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _via_link(path: str | Path, real: Path) -> str:
    return f" (a symbolic link to {real})" if os.path.islink(path) else ""


def _check_names(files: Mapping[str, str | bytes], given: str) -> None:
    """Relative paths only, none leaving the folder (a programming error otherwise)."""
    for name in files:
        parts = Path(name).parts
        if not parts or Path(name).is_absolute() or ".." in parts:
            raise ValueError(f"{given}: output name {name!r} is not a relative path inside it")


def _tmp_name(name: str) -> str:
    return f".{name[:_NAME_KEEP]}{TMP_TAG}{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    """Whether another process with this id runs (ours is not writing a leftover)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _clean_leftovers(folder: Path, name: str, restore: Path | None = None) -> None:
    """Remove what killed writers left in ``folder`` for the target ``name``.

    ``.NAME.symformer-tmp-PID`` (a half-written file or folder, or the old folder
    after the swap) is removed once its process is gone.  ``.NAME.symformer-old-PID``
    is the complete old folder of an interrupted fallback swap: it goes back to
    ``restore`` when that is missing, and is removed otherwise.
    """
    prefix = f".{name[:_NAME_KEEP]}" if name else ""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        for tag in (TMP_TAG, OLD_TAG):
            head, sep, pid = entry.rpartition(tag)
            if sep and head == prefix and pid.isdigit() and not _pid_alive(int(pid)):
                leftover = folder / entry
                if (tag == OLD_TAG and restore is not None and not os.path.lexists(restore)
                        and stat.S_ISDIR(os.lstat(leftover).st_mode)):  # never a link
                    os.rename(leftover, restore)
                else:
                    _remove(leftover)


def _remove(path: Path) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _create(path: Path | str, content: str | bytes, dir_fd: int | None = None) -> None:
    """A new file (never an existing one, never through a link) with mode ``0o666``
    less the umask; ``path`` is relative to the open folder ``dir_fd`` when given."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with os.fdopen(os.open(path, _NEW_FILE, 0o666, dir_fd=dir_fd), "wb") as handle:
        handle.write(data)


#: Flags of a new output file: never an existing file, never through a link.
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0))
#: Flags of a folder opened on the way to an output file: never a link.
_DIR = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0))


def check_below(target: Path, files: Mapping[str, str | bytes], given: str) -> None:
    """Refuse, before anything is written, a path of ``files`` that passes through or
    ends on a symbolic link inside the existing folder ``target``, or that needs a
    folder where a file is (or a file where a folder is)."""
    seen: set[str] = set()
    for name in files:
        parts = Path(name).parts
        for k in range(len(parts)):
            rel = "/".join(parts[:k + 1])
            last = k == len(parts) - 1
            if rel in seen and not last:
                continue
            seen.add(rel)
            try:
                mode = os.lstat(target / rel).st_mode
            except FileNotFoundError:
                break
            except OSError as exc:
                raise InputError(f"{given}: cannot write {rel} ({exc.strerror})") from None
            if stat.S_ISLNK(mode):
                raise InputError(_link_refused(given, target, rel))
            if not last and not stat.S_ISDIR(mode):
                raise InputError(f"{given}: {rel} is a file there, but this command writes "
                                 "a folder of that name; move it away")
            if last and stat.S_ISDIR(mode):
                raise InputError(f"{given}: {rel} is a folder there, but this command "
                                 "writes a file of that name; move it away")


def _link_refused(given: str, target: Path, rel: str) -> str:
    try:
        to = f" (to {os.readlink(target / rel)})"
    except OSError:
        to = ""
    return (f"{given}: {rel} is a symbolic link{to}; nothing is written through a link "
            "the command did not create: remove it, or choose another --out")


class _Folders:
    """Open folder descriptors below ``root``, reached without following a link."""

    def __init__(self, root: Path, given: str) -> None:
        self.root, self.given = root, given
        self.fds: dict[tuple[str, ...], int] = {(): os.open(root, _DIR)}

    def open(self, parts: tuple[str, ...], create: bool) -> int:
        """The descriptor of the folder ``root/parts``, created when ``create``."""
        if parts in self.fds:
            return self.fds[parts]
        parent = self.open(parts[:-1], create)
        if create:
            try:
                os.mkdir(parts[-1], dir_fd=parent)
            except FileExistsError:
                pass
        try:
            fd = os.open(parts[-1], _DIR, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(
                    self.root.joinpath(*parts)):
                raise InputError(_link_refused(self.given, self.root, "/".join(parts))
                                 ) from None
            raise
        self.fds[parts] = fd
        return fd

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _swappable(target: Path) -> bool:
    """Whether the folder can be replaced by another: not the current folder (or one
    holding it), not a mount point, its parent writable."""
    try:
        cwd = Path(os.getcwd()).resolve()
    except OSError:
        cwd = None
    if cwd is not None and (cwd == target or target in cwd.parents):
        return False
    return not os.path.ismount(target) and os.access(target.parent, os.W_OK | os.X_OK)


def staging_folder(target: Path) -> Path:
    """Where a new output folder is built before it is swapped in.

    The user's cache (``$XDG_CACHE_HOME/symformer/staging``, else
    ``~/.cache/symformer/staging``) when it is on the target's file system, so a
    writer killed mid-way leaves nothing beside the target; else the target's parent.
    """
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                              ".cache")
    staging = Path(cache) / "symformer" / "staging"
    try:
        staging.mkdir(parents=True, exist_ok=True)
        if os.stat(staging).st_dev == os.stat(target.parent).st_dev:
            return staging
    except OSError:
        pass
    return target.parent


def _write_swapped(target: Path, files: Mapping[str, str | bytes], given: str) -> None:
    """Build the new folder in the staging folder, then swap it in."""
    staging = staging_folder(target)
    if staging != target.parent:
        _clean_leftovers(staging, target.name)
    tmp = staging / _tmp_name(target.name)
    try:
        os.mkdir(tmp)
        existed = os.path.isdir(target)
        if existed:
            shutil.copymode(target, tmp)
        _populate(tmp, files, given)
        if existed:
            _carry_over(target, tmp, set(files), given)
            _swap(tmp, target)
        else:
            os.rename(tmp, target)
    except OSError as exc:
        raise InputError(f"{given}: cannot write the output ({exc.strerror})") from None
    finally:
        _remove(tmp)  # the old folder after a swap, a half-built one after an error


def _write_in_place(target: Path, files: Mapping[str, str | bytes], given: str) -> None:
    """Stage the files in ``target/.symformer-tmp-PID/``, then rename each into place
    (the folders on the way opened without following a link, the name itself
    checked not to be one: a rename replaces a link rather than writing through it)."""
    stage = target / f"{TMP_TAG}{os.getpid()}"
    try:
        os.mkdir(stage)
        _populate(stage, files, given)
        src, dst = _Folders(stage, given), _Folders(target, given)
        try:
            for name in files:
                *folders, leaf = Path(name).parts
                here = dst.open(tuple(folders), create=True)
                if stat.S_ISLNK(_lmode(leaf, here)):
                    raise InputError(_link_refused(given, target, name))
                os.replace(leaf, leaf, src_dir_fd=src.open(tuple(folders), create=False),
                           dst_dir_fd=here)
        finally:
            src.close()
            dst.close()
    except OSError as exc:
        raise InputError(f"{given}: cannot write the output ({exc.strerror})") from None
    finally:
        _remove(stage)


def _lmode(name: str, folder: int) -> int:
    """The mode of ``name`` in the open folder (0 when it does not exist), links not
    followed."""
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return 0


def _populate(folder: Path, files: Mapping[str, str | bytes], given: str) -> None:
    """Create every file in the new ``folder`` (no link followed on the way)."""
    folders = _Folders(folder, given)
    try:
        for name, content in files.items():
            *parents, leaf = Path(name).parts
            _create(leaf, content, folders.open(tuple(parents), create=True))
    finally:
        folders.close()


def _carry_over(old: Path, new: Path, written: set[str], given: str) -> None:
    """Hard-link (or copy) into ``new`` every entry of ``old`` that was not written."""
    for root, dirs, names in os.walk(old):
        rel_root = Path(root).relative_to(old)
        for d in dirs:
            rel = rel_root / d
            dest = new / rel
            if os.path.islink(Path(root) / d):
                names.append(d)  # a link to a folder is carried as a link
                continue
            if not os.path.lexists(dest):
                os.mkdir(dest)
            elif not os.path.isdir(dest) or os.path.islink(dest):
                raise InputError(f"{given}: {rel} is a folder there, but this command "
                                 "writes a file of that name; move it away")
            shutil.copymode(Path(root) / d, dest)
        dirs[:] = [d for d in dirs if not os.path.islink(Path(root) / d)]
        for n in names:
            rel = rel_root / n
            if rel.as_posix() in written:
                continue
            dest = new / rel
            if os.path.lexists(dest) or not os.path.isdir(dest.parent):
                if os.path.islink(Path(root) / n):
                    raise InputError(_link_refused(given, old, rel.as_posix()))
                raise InputError(f"{given}: {rel} is a file there, but this command "
                                 "writes a folder of that name; move it away")
            _link_or_copy(Path(root) / n, dest, given)


def _link_or_copy(src: Path, dest: Path, given: str) -> None:
    try:
        os.link(src, dest, follow_symlinks=False)
        return
    except OSError:
        pass
    mode = os.lstat(src).st_mode
    if stat.S_ISLNK(mode):
        os.symlink(os.readlink(src), dest)
    elif stat.S_ISREG(mode):
        shutil.copy2(src, dest)
    else:
        raise InputError(f"{given}: cannot keep {src.name}, {_kind(mode)}, in the new "
                         "output folder; move it away")


def _swap(new: Path, target: Path) -> None:
    """Put ``new`` at ``target``; the old folder ends up at ``new`` (to be removed)."""
    if _exchange(new, target):
        return
    old = target.parent / f".{target.name[:_NAME_KEEP]}{OLD_TAG}{os.getpid()}"
    os.rename(target, old)
    try:
        os.rename(new, target)
    except OSError:
        os.rename(old, target)
        raise
    os.rename(old, new)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2``); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError, TypeError):  # no libc, or a libc without it
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


@contextlib.contextmanager
def private_links(links: Mapping[str, Path]) -> Iterator[Path]:
    """A private temporary folder (mode 0700) holding a symbolic link NAME -> PATH for
    each of ``links``, removed afterwards: what a library that opens a folder by itself
    (``transformers``) is given, so that it reads only files already checked."""
    with tempfile.TemporaryDirectory(prefix="symformer-") as folder:
        for name, target in links.items():
            os.symlink(target, os.path.join(folder, name))
        yield Path(folder)

"""var/ (JOBCONSOLE_VAR_DIR) holds the SQLite database, the DEBUG secret key, `make run`'s Redis and its URL:
owner-only from the start, with no moment where they exist readable by others.

The directory is made 0700 and the project's files 0600, created with those modes (never chmod-ed after a
write); SQLite's database file is made empty and 0600 before Django connects, and SQLite gives its -wal, -shm
and -journal files the database's mode. Everything else under var/ (static files, Redis's data, benchmarks) is
out of others' reach through the directory. A var/ left looser by an older version, or by hand, is tightened at
start-up: group and other bits removed from the directory and the files directly in it (owner bits kept), and
said once in the log (`report`, from project/apps.py, once logging is set up).

No Django here: the settings call it before Django is set up, and scripts/run_stack.py before any settings.
"""

import logging
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
OTHERS = 0o077  # group and other bits

log = logging.getLogger(__name__)

# What start-up changed or could not change, for `report` to log once logging is configured.
_tightened: list[str] = []
_problems: list[str] = []


def protect(directory: Path) -> None:
    """Make the directory (owner-only) if missing, else tighten it and the files directly in it."""
    directory.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if directory.stat().st_mode & stat.S_ISVTX:
        # A shared directory such as /tmp: closing it to others would break every other user of it.
        _problems.append(
            f"{directory} is shared (sticky bit), left as it is: set JOBCONSOLE_VAR_DIR to a directory of its own"
        )
        return
    _tighten(directory)
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                _tighten(Path(entry.path))


def private_dir(path: Path) -> Path:
    """A directory of var/ (say var/redis), made 0700 or tightened to owner-only."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    _tighten(path)
    return path


def private_file(path: Path) -> None:
    """An empty file made 0600 if there is none (for SQLite, which would make it 0644); an existing file is
    left as it is here (`protect` tightens those in var/)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        pass
    except OSError:
        pass  # no such directory, or not writable: SQLite says so when it connects


def write_private(path: Path, text: str) -> None:
    """Replace path with text, owner-only: written to a private file beside it, then renamed into place."""
    temporary = _write_new(path, text)
    os.replace(temporary, path)


def read_or_create(path: Path, make: Callable[[], str]) -> str:
    """The file's text, or, when there is no file, `make()`'s written owner-only. Processes starting together
    agree on one text: the first link into place wins, the others read it."""
    try:
        return path.read_text()
    except FileNotFoundError:
        pass
    temporary = _write_new(path, make())
    try:
        os.link(temporary, path)
    except FileExistsError:
        pass  # another process made it first: use its text
    except OSError:  # a file system without hard links
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as file:
                file.write(temporary.read_text())
    finally:
        temporary.unlink()
    return path.read_text()


def report() -> None:
    """Log, once per process, what start-up tightened or could not protect."""
    if _tightened:
        log.warning("var/ was readable by others; now owner-only: %s", ", ".join(_tightened))
    for problem in _problems:
        log.warning("var/ not protected: %s", problem)
    _tightened.clear()
    _problems.clear()


def _write_new(beside: Path, text: str) -> Path:
    """A new file next to `beside`, created 0600 (whatever the umask) and holding text."""
    path = beside.with_name(f".{beside.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    return path


def _tighten(path: Path) -> None:
    mode = stat.S_IMODE(path.lstat().st_mode)
    if not mode & OTHERS:
        return
    try:
        path.chmod(mode & ~OTHERS)
    except OSError as exc:  # not ours: say so rather than stop the process
        _problems.append(f"{path} is {mode:04o} and could not be tightened: {exc.strerror}")
    else:
        _tightened.append(f"{path} ({mode:04o} -> {mode & ~OTHERS:04o})")

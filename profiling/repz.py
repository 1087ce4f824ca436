"""``.ncu-repz``: a zstd-compressed Nsight Compute report, the file newer Nsight Compute versions write.

:func:`unwrap` turns one into the ``.ncu-rep`` bytes the report reader takes, with the ``zstandard`` module
when it is installed, else the ``zstd`` command, else a clear error saying how to decompress it by hand.
Output is capped at ``max_bytes`` either way, so a zstd bomb stops at the upload limit.

    >>> unwrap(b"ID,Kernel Name", "x.csv")
    (b'ID,Kernel Name', 'x.csv')
"""

from __future__ import annotations

import io
import shutil
import subprocess
import threading

from kwiki.errors import BadInput

from .ncu_csv import MAX_BYTES

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_TIMEOUT_S = 60  # a 20 MB report decompresses in well under a second; a stuck decoder is killed
HINT = "decompress it first (`zstd -d R.ncu-repz -o R.ncu-rep`) or export CSV: `ncu --import R.ncu-repz --page raw --csv > R.csv`"


def is_repz(data: bytes, filename: str = "") -> bool:
    return data[:4] == ZSTD_MAGIC or filename.lower().endswith(".ncu-repz")


def unwrap(data: bytes, filename: str = "", max_bytes: int = MAX_BYTES) -> tuple[bytes, str]:
    """``(report bytes, name ending .ncu-rep)`` for a ``.ncu-repz``; anything else comes back unchanged."""
    if not is_repz(data, filename):
        return data, filename
    if data[:4] != ZSTD_MAGIC:
        raise BadInput(f"{filename} is named .ncu-repz but is not zstd-compressed", hint=HINT)
    out = _decompress(data, max_bytes)
    if len(out) > max_bytes:
        raise BadInput(f"the decompressed report is over the {max_bytes}-byte limit", hint="profile fewer launches (-c 1)")
    name = filename[: -len(".ncu-repz")] + ".ncu-rep" if filename.lower().endswith(".ncu-repz") else (filename or "upload") + ".ncu-rep"
    return out, name


def _decompress(data: bytes, max_bytes: int) -> bytes:
    try:
        import zstandard
    except ImportError:
        zstandard = None
    if zstandard is not None:
        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
                return reader.read(max_bytes + 1)
        except zstandard.ZstdError as exc:
            raise BadInput(f"corrupt .ncu-repz (zstd): {exc}", hint=HINT) from None
    exe = shutil.which("zstd")
    if exe is None:
        raise BadInput("this is a zstd-compressed report (.ncu-repz) and neither the zstandard module nor the zstd command is installed here",
                       hint=HINT)
    return _zstd_cli(exe, data, max_bytes)


def _zstd_cli(exe: str, data: bytes, max_bytes: int) -> bytes:
    """``zstd -dc`` fed from a thread, its output read up to ``max_bytes + 1`` and the process killed past that."""
    proc = subprocess.Popen([exe, "-dc", "--no-progress"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def feed() -> None:
        try:
            proc.stdin.write(data)  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    timer = threading.Timer(ZSTD_TIMEOUT_S, proc.kill)
    timer.start()
    try:
        chunks, size = [], 0
        while size <= max_bytes and (chunk := proc.stdout.read(1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            proc.kill()
        rc = proc.wait()
        err = proc.stderr.read().decode(errors="replace").strip()
    finally:
        timer.cancel()
        writer.join(timeout=5)
    out = b"".join(chunks)
    if size <= max_bytes and rc != 0:
        raise BadInput(f"corrupt .ncu-repz (zstd): {err[:200] or f'exit {rc}'}", hint=HINT)
    return out[: max_bytes + 1]

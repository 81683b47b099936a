"""Hostile files for the tests of what refusing a file costs: model files, member files and
member-store manifests damaged or forged the way an attacker (or bad luck) would, and a child
process that reads one and reports the outcome, the seconds it took and its peak memory.

Every builder takes a file the library wrote and edits it in place; the large bombs are built
without ever holding their unpacked size in memory (a zstd frame and a deflate block repeated).
"""

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib

import numpy as np

from ppa_dask.store import encoding

ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# -------------------------------------------------------------------------------------------
# a child process that reads one file: outcome, seconds, peak memory above its baseline
# -------------------------------------------------------------------------------------------

_CHILD = r"""
import json, os, resource, sys, time

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024

op, target, intact, cap_mb = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
from ppa_dask.store import load_model, model_info
from ppa_dask.store.encoding import ModelFileError
from ppa_dask.store import members

def run(path):
    if op == "load_model":
        return load_model(path)
    if op == "model_info":
        return model_info(path)
    if op == "member":
        return members.read_member_file(path, 0, {"features": [0, 1, 2]})
    if op == "manifest":
        return members.MemberStore(path, {"fit": "hostile"})
    raise SystemExit(f"unknown op {op}")

run(intact)  # warm: every module and code path the read needs is loaded before measuring
base = peak_mb()
# an address-space cap, so that a reader without bounds fails here instead of taking the machine
limit = vm_bytes() + int(cap_mb * 2**20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
start = time.perf_counter()
try:
    run(target)
    outcome, message = "loaded", ""
except ModelFileError as exc:
    outcome, message = f"ModelFileError:{exc.reason}", str(exc)
except BaseException as exc:
    outcome, message = type(exc).__name__, str(exc)[:500]
seconds = time.perf_counter() - start
print(json.dumps({"outcome": outcome, "message": message, "seconds": seconds,
                  "extra_mb": peak_mb() - base}))
"""


def read_in_child(op, target, intact, cap_mb=3000, timeout=120):
    """Read ``target`` in a fresh Python (``op``: load_model, model_info, member, manifest)
    after reading the intact file ``intact`` once; returns the child's report: ``outcome``
    (``"loaded"``, ``"ModelFileError:<reason>"`` or an exception's name), ``message``,
    ``seconds`` and ``extra_mb``, its peak resident memory above the peak after the warm read.
    The child may grow its address space by ``cap_mb`` at most (a MemoryError beyond)."""
    env = dict(os.environ, **ONE_THREAD)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, op, str(target), str(intact), str(cap_mb)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "message": "", "seconds": timeout, "extra_mb": float("nan")}
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1])


# -------------------------------------------------------------------------------------------
# model files (Zarr v3 groups)
# -------------------------------------------------------------------------------------------


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


def edit_array_metadata(path, name, change):
    """Edit the ``zarr.json`` of array ``name`` only (the sealed record untouched)."""
    meta_path = os.path.join(path, name, "zarr.json")
    meta = read_json(meta_path)
    change(meta)
    write_json(meta_path, meta)


def metadata_shape_bomb(path, name="coefficients_", n=1_500_000_000):
    """The array's zarr.json claims ``n`` values in one chunk (12 GB of float64)."""

    def change(meta):
        meta["shape"] = [n]
        meta["chunk_grid"]["configuration"]["chunk_shape"] = [n]

    edit_array_metadata(path, name, change)


def chunk_shape_bomb(path, name="coefficients_", n=1_000_000_000):
    """The array's zarr.json claims ``n`` values in chunks of one (a billion chunk reads)."""

    def change(meta):
        meta["shape"] = [n]
        meta["chunk_grid"]["configuration"]["chunk_shape"] = [1]

    edit_array_metadata(path, name, change)


def zstd_bomb(path, name="coefficients_", unpacked=2 * 2**30):
    """Replace the array's one chunk by zstd frames that unpack to ``unpacked`` bytes of zeros
    (about 60 KB on disk; each frame declares its size, so a reader allocates it up front)."""
    from numcodecs import zstd

    piece = 64 * 2**20
    frame = zstd.compress(bytes(piece), 3)
    folder = os.path.join(path, name)
    ndim = len(read_json(os.path.join(folder, "zarr.json"))["shape"])
    chunk = os.path.join(folder, "c", *(["0"] * ndim))
    with open(chunk, "wb") as f:
        f.write(frame * (unpacked // piece))


def edit_record(path, change, reseal=True):
    """Edit the model file's record (in the group's zarr.json); ``reseal`` recomputes its
    checksum, as a forger would."""
    meta_path = os.path.join(path, "zarr.json")
    meta = read_json(meta_path)
    record = meta["attributes"]["ppa_dask"]
    change(record)
    if reseal:
        record["sha256"] = encoding.seal(record)["sha256"]
    write_json(meta_path, meta)


def nested(depth, leaf=1):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def nested_record(path, depth, reseal=True):
    """The PPA's ``degree`` parameter becomes a list nested ``depth`` deep."""

    def change(record):
        record["estimator"]["params"]["degree"] = nested(depth)

    if reseal:
        edit_record(path, change)
        return
    # unsealed and too deep for json.dump's own recursion: written as text
    meta_path = os.path.join(path, "zarr.json")
    with open(meta_path) as f:
        text = f.read()
    key = '"degree": '
    start = text.index(key) + len(key)
    end = text.index(",", start)
    with open(meta_path, "w") as f:
        f.write(text[:start] + "[" * depth + "1" + "]" * depth + text[end:])


def range_record(path, stop=10**15):
    """The PPA's ``degree`` parameter becomes ``range(1, stop)`` (``stop`` may be a float)."""

    def change(record):
        record["estimator"]["params"]["degree"] = {"__range__": [1, stop]}

    edit_record(path, change)


# -------------------------------------------------------------------------------------------
# member files (zip archives of record.json and .npy entries) and member stores
# -------------------------------------------------------------------------------------------


def _dos_time():
    return 0, (1 << 5) | 1  # 1980-01-01 00:00


def write_zip(path, entries):
    """Write a zip archive by hand from ``(name, method, crc, data_size, raw_bytes_or_pieces)``:
    ``raw`` is the entry's bytes as stored (already deflated for method 8), possibly a list of
    pieces written one after the other. Sizes below 4 GiB (no zip64)."""
    t, d = _dos_time()
    central = []
    with open(path, "wb") as f:
        for name, method, crc, size, raw in entries:
            pieces = raw if isinstance(raw, list) else [raw]
            csize = sum(len(p) for p in pieces)
            offset = f.tell()
            encoded = name.encode()
            f.write(
                struct.pack(
                    "<IHHHHHIIIHH",
                    0x04034B50,
                    20,
                    0,
                    method,
                    t,
                    d,
                    crc,
                    csize,
                    size,
                    len(encoded),
                    0,
                )
            )
            f.write(encoded)
            for p in pieces:
                f.write(p)
            central.append(
                struct.pack(
                    "<IHHHHHHIIIHHHHHII",
                    0x02014B50,
                    20,
                    20,
                    0,
                    method,
                    t,
                    d,
                    crc,
                    csize,
                    size,
                    len(encoded),
                    0,
                    0,
                    0,
                    0,
                    0,
                    offset,
                )
                + encoded
            )
        start = f.tell()
        for c in central:
            f.write(c)
        end = f.tell()
        f.write(
            struct.pack(
                "<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central), end - start, start, 0
            )
        )


def _entries(path):
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info.filename) for info in archive.infolist()}


def _stored(name, data):
    return (name, 0, zlib.crc32(data), len(data), data)


def deflate_bombed_record(path, spaces=2**30):
    """``record.json`` becomes ``spaces`` leading spaces then the record, deflated (about a
    thousandth of its size on disk, with a true CRC and size: the JSON is still the record)."""
    entries = _entries(path)
    record = entries.pop("record.json")
    piece = b" " * (64 * 2**20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    # after a full flush the compressor starts afresh, byte-aligned: the same bytes each time
    block = compressor.compress(piece) + compressor.flush(zlib.Z_FULL_FLUSH)
    count = spaces // len(piece)
    tail = compressor.compress(record) + compressor.flush()
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(piece, crc)
    crc = zlib.crc32(record, crc)
    rows = [("record.json", 8, crc, count * len(piece) + len(record), [block] * count + [tail])]
    rows += [_stored(name, data) for name, data in entries.items()]
    write_zip(path, rows)


def npy_header_bomb(path, name="coef_", n=400_000_000):
    """The array's ``.npy`` entry gets a header claiming ``n`` float64 values (3.2 GB), its
    data left as it was; the record untouched."""
    entries = _entries(path)
    old = io.BytesIO(entries[f"{name}.npy"])
    np.lib.format.read_magic(old)
    np.lib.format.read_array_header_1_0(old)
    values = old.read()
    new = io.BytesIO()
    header = {"descr": "<f8", "fortran_order": False, "shape": (n,)}
    np.lib.format.write_array_header_1_0(new, header)
    entries[f"{name}.npy"] = new.getvalue() + values
    write_zip(path, [_stored(k, v) for k, v in entries.items()])


def write_manifest(folder, text):
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        f.write(text)

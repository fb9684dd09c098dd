#!/usr/bin/env python3
"""Independent writer of the record-file fixtures in tests/data/.

Written from the documented TFRecord format only, with its own bitwise
CRC-32C and Python's zlib/gzip modules, so that tests/io/test_tfrecord.c checks
qflow's reader, iterator and writer against files qflow did not make.
Deterministic (gzip mtime 0): re-running it reproduces the same bytes.

Python has no zstd module (before 3.14), so the ZSTD fixtures are made from
this script's output by zstd(1) (1.5.4), the independent compressor:

    zstd -19 --check -q -c py_plain.tfrecord > py_zstd.tfrecord
    zcat py_fixed.bin.gz | zstd -19 -q -c > py_fixed.bin.zst

    python3 tests/data/make_record_fixtures.py tests/data
"""
import gzip
import os
import struct
import sys
import zlib


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", masked(crc32c(n))) + data + struct.pack("<I", masked(crc32c(data)))


def records():
    """Record i: "rec-<i>:" then i*37 bytes (i*31 + j) & 0xff; then an
    empty record and one of 70000 bytes (larger than small test buffers).
    tests/io/test_tfrecord.c makes the same list."""
    out = []
    for i in range(10):
        out.append(b"rec-%d:" % i + bytes((i * 31 + j) & 0xFF for j in range(i * 37)))
    out.append(b"")
    out.append(bytes((j * 7 + j // 251) & 0xFF for j in range(70000)))
    return out




def main(outdir):
    plain = b"".join(record(r) for r in records())
    with open(os.path.join(outdir, "py_plain.tfrecord"), "wb") as f:
        f.write(plain)
    with open(os.path.join(outdir, "py_zlib.tfrecord"), "wb") as f:
        f.write(zlib.compress(plain, 6))
    with open(os.path.join(outdir, "py_gzip.tfrecord"), "wb") as f:
        f.write(gzip.compress(plain, compresslevel=9, mtime=0))
    # spec 198's file 0 (header "HHHHH", 7 records "000".."666", footer "FF")
    fixed = b"HHHHH" + b"".join(bytes([48 + r]) * 3 for r in range(7)) + b"FF"
    with open(os.path.join(outdir, "py_fixed.bin.zz"), "wb") as f:
        f.write(zlib.compress(fixed, 9))
    with open(os.path.join(outdir, "py_fixed.bin.gz"), "wb") as f:
        f.write(gzip.compress(fixed, mtime=0))
    # spec 200: header 5, record 3, hop 2, footer 2, body "0123456"
    with open(os.path.join(outdir, "py_hop.bin.gz"), "wb") as f:
        f.write(gzip.compress(b"HHHHH0123456FF", mtime=0))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))

#!/usr/bin/env python3
"""Seeds for the libFuzzer targets (tests/fuzz/corpus/<target>/), made from
the formats' definitions with Python's stdlib only. Deterministic.

    python3 tests/fuzz/make_corpus.py tests/fuzz/corpus
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


def compress(kind, raw):
    if kind == "zlib":
        return zlib.compress(raw, 6)
    if kind == "gzip":
        return gzip.compress(raw, mtime=0)
    return raw


def state(kind, active, produced, completed, params, pos=0, index=0, skip=0, work=b"", key=b""):
    """qf_reader_serialize_state's layout (runtime/io/qf_reader.h)."""
    fp_bytes = b"".join(struct.pack("<Q", v) for v in params + [kind])
    fp = (crc32c(fp_bytes + fp_bytes) << 32) | crc32c(fp_bytes)
    body = b"QFRS" + struct.pack("<HHIqqQQQQ", 1, kind, 1 if active else 0, produced, completed,
                                 fp, pos, index, skip)
    body += struct.pack("<I", len(work)) + work + struct.pack("<I", len(key)) + key
    return body + struct.pack("<I", masked(crc32c(body)))


def main(out):
    seeds = {}
    p0 = bytes([0, 7, 7, 0, 0, 0])
    seeds["text"] = [p0 + b"a\nb\r\n\nc\rd\n" + b"x" * 90 + b"\nlast",
                     bytes([3, 1, 1, 1, 0, 0]) + b"head\r\n\r"]
    fixed_p = bytes([0, 7, 7, 2, 5, 2])  # record 3, header 5, footer 2, hop 2
    body = b"HHHHH0123456FF"
    recs = record(b"alpha") + record(b"") + record(b"b" * 40)
    for kind in ("plain", "zlib", "gzip"):
        seeds["fixed_" + kind] = [fixed_p + compress(kind, body),
                                  bytes([1, 3, 2, 0, 0, 0]) + compress(kind, b"0123456789")]
        seeds["tfrecord_" + kind] = [p0 + compress(kind, recs),
                                     bytes([5, 2, 3, 1, 0, 0]) + compress(kind, recs[:30])]
    seeds["whole_file"] = [p0 + b"hello", bytes([1, 1, 1, 1, 0, 0]) + b"0123456789abcdef"]
    seeds["iterator"] = [bytes([k]) + compress(c, recs) for k, c in
                         ((0, "plain"), (1, "zlib"), (2, "gzip"), (0x55, "zlib"))]
    seeds["random"] = [bytes([0]) + recs, bytes([0]) + recs[:30], bytes([9]) + recs]
    seeds["writer"] = [bytes([0, 0, 10, 10]) + b"\x05hello\x00\x03abc",
                       bytes([1, 0x92, 0x85, 3]) + b"\x10" + b"z" * 16 + b"\x01q",
                       bytes([2, 3, 200, 7]) + bytes(range(64))]
    tf_max = 256 * 1024 * 1024
    seeds["state"] = [
        bytes([0]) + state(0, False, 0, 0, [0, 0, 0, 0, 0, 0, 0]),
        bytes([0]) + state(0, True, 7, 2, [0, 0, 0, 0, 0, 0, 0], pos=42, index=7,
                           work=b"/nonexistent/qf_fuzz_a"),
        bytes([3]) + state(3, True, 1, 0, [0, 0, 0, 0, 0, 0, tf_max], pos=16,
                           work=b"/nonexistent/qf_fuzz_b"),
        bytes([2]) + state(2, False, 3, 3, [0, 0, 0, 0, 0, 0, 0]),
        bytes([1]) + state(1, True, 2, 0, [0, 3, 0, 0, 3, 0, 0], pos=6, index=2, skip=3,
                           work=b"/nonexistent/qf_fuzz_c"),
    ]
    # fuzz_queue.c: kind, extra components, capacity, floats per row (the
    # shuffle queue reads min_after_dequeue next), then calls: a call byte
    # (% 14) and its arguments. Each kind x extra: fill, take one by one, a
    # batch in and out, a bulk take, a poll on empty, a close, the drain.
    calls = bytes([0, 1, 0, 3, 4, 1, 2, 3, 4, 0, 4, 5, 6, 4, 7, 5, 10, 1, 6, 11, 1, 12, 0,
                   0, 13, 0, 1, 4, 5, 8, 1, 8, 0, 9, 0, 9, 1, 13, 0, 0])
    queue = []
    for kind in range(5):
        for extra in range(4):
            head = bytes([kind, extra, 3 + kind % 4, 4])
            if kind == 1:
                head += bytes([1])
            queue.append(head + calls)
    seeds["queue"] = queue
    # fuzz_nats_codec.c: version-1 payloads (qf_nats.h): "QFE" 1, flags,
    # 0, ncomp u16; per component [name u16 + bytes] dtype u8, rank u8,
    # dims i64, values (strings: u32 length + bytes each).
    def comp(dtype, dims, values, name=None):
        c = b""
        if name is not None:
            c += struct.pack("<H", len(name)) + name
        c += struct.pack("<BB", dtype, len(dims)) + b"".join(struct.pack("<q", d) for d in dims)
        return c + values

    def payload(comps, names=False):
        return b"QFE\x01" + bytes([1 if names else 0, 0]) + struct.pack("<H", len(comps)) + \
            b"".join(comps)

    f32, s, i64, boolean = 1, 7, 9, 10
    seeds["nats_codec"] = [
        payload([comp(i64, [], struct.pack("<q", 42))]),
        payload([comp(i64, [], struct.pack("<q", -7)),
                 comp(f32, [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6.5))]),
        payload([comp(s, [2], struct.pack("<I", 0) + struct.pack("<I", 3) + b"a\x00b"),
                 comp(boolean, [2], b"\x01\x00"), comp(f32, [0], b"")]),
        payload([comp(i64, [], struct.pack("<q", 1), b"label"),
                 comp(s, [], struct.pack("<I", 5) + b"hello", b"text")], names=True),
    ]
    # fuzz_tensor.c: rounds of a call byte (% 3: stack, raw shape, sparse)
    # and its arguments; stack: dtype, rank, dims, parts, odd part, unknown
    # dims mask, contents.
    seeds["tensor"] = [
        bytes([0, 0, 2, 2, 3, 3, 9, 3]) + bytes(range(120)),
        bytes([0, 6, 1, 3, 2, 9, 1]) + b"\x02ab\x00\x03xyz\x01q" * 6,
        bytes([0, 8, 3, 1, 2, 3, 4, 1, 7]) + bytes([1, 0, 3]) * 40,
        bytes([1, 2]) + struct.pack(">q", 1 << 40) + struct.pack(">q", 1 << 40) + bytes(48),
        bytes([1, 1]) + struct.pack(">q", 3) + bytes(56),
        bytes([2, 1, 2, 3, 4, 0, 0, 9, 1, 2, 8, 1, 0, 7, 0, 1, 6]),
        bytes([2, 0, 3, 2, 5, 1, 1, 2]),
    ]
    for target, items in seeds.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for i, s in enumerate(items):
            with open(os.path.join(d, "seed%d" % i), "wb") as f:
                f.write(s)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else
         os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))

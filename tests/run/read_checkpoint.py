#!/usr/bin/env python3
"""Opens a megatron-run checkpoint file set without megatron-run (tests/run/checkpoint_test.cpp runs it).

    read_checkpoint.py DIR/iter_0000010 RANK

Reads DIR/iter_.../rank_NNNNN.safetensors with a plain json + struct reader (and numpy / torch where they are
installed, and the `safetensors` package where it is importable, checking that they agree), and
rank_NNNNN.json with json. Prints one line per tensor: "name dtype shape sum" (sum of the values as float64,
repr), then "readers: ..." naming the readers that agreed.
"""
import json
import struct
import sys


def plain_read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[base + b:base + end])
    return header.get("__metadata__", {}), out


def to_floats(dtype, raw):
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    if dtype in ("BF16", "F16"):
        halves = struct.unpack("<%dH" % (len(raw) // 2), raw)
        if dtype == "BF16":
            return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in halves]
        return [struct.unpack("<e", struct.pack("<H", h))[0] for h in halves]
    raise SystemExit("unexpected dtype " + dtype)


def main():
    ckpt, rank = sys.argv[1], int(sys.argv[2])
    stem = "%s/rank_%05d" % (ckpt, rank)
    meta = json.load(open(stem + ".json"))
    assert meta["format"] == "megatron-run checkpoint", meta["format"]
    _, tensors = plain_read(stem + ".safetensors")
    pieces = {p["tensor"]: p for p in meta["pieces"]}
    assert set(pieces) == set(tensors), (sorted(pieces), sorted(tensors))
    readers = ["json+struct"]
    sums = {}
    for name, (dtype, shape, raw) in tensors.items():
        vals = to_floats(dtype, raw)
        n = 1
        for d in shape:
            n *= d
        assert len(vals) == n, (name, shape, len(vals))
        p = pieces[name]
        assert p["dtype"] == dtype and p["flattened_range"][1] - p["flattened_range"][0] == n, (name, p)
        sums[name] = sum(vals)
        print(name, dtype, "x".join(str(d) for d in shape), repr(sums[name]))
    try:
        import numpy as np

        for name, (dtype, shape, raw) in tensors.items():
            if dtype == "F32":
                a = np.frombuffer(raw, dtype="<f4").reshape(shape)
                assert list(a.shape) == shape and float(a.astype(np.float64).sum()) == sums[name] or \
                    abs(float(a.astype(np.float64).sum()) - sums[name]) <= 1e-9 * max(1.0, abs(sums[name])), name
        readers.append("numpy")
    except ImportError:
        pass
    try:
        import torch

        dt = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
        for name, (dtype, shape, raw) in tensors.items():
            t = torch.frombuffer(bytearray(raw), dtype=dt[dtype]).reshape(shape) if raw else torch.zeros(shape)
            assert list(t.shape) == shape, name
            s = float(t.double().sum())
            assert abs(s - sums[name]) <= 1e-9 * max(1.0, abs(sums[name])), (name, s, sums[name])
        readers.append("torch")
    except ImportError:
        pass
    try:
        from safetensors import safe_open

        with safe_open(stem + ".safetensors", framework="np") as f:
            assert set(f.keys()) == set(tensors), "safetensors keys"
            for name, (dtype, shape, raw) in tensors.items():
                if dtype == "BF16":
                    continue  # numpy has no bfloat16
                a = f.get_tensor(name)
                assert list(a.shape) == shape and a.tobytes() == raw, name
        readers.append("safetensors")
    except ImportError:
        pass
    print("readers:", " ".join(readers))


main()

"""Seeded mutations of file bytes for the fuzz tests: flipped bits, truncation, appended junk,
shuffled JSON, deep nesting (tests/store/test_fuzz_files.py, tests/app/test_fuzz_run_folders.py)."""

import json


def _shuffle_json(rng, data):
    try:
        obj = json.loads(data)
    except ValueError:
        return data + b"}"

    def walk(node):
        if isinstance(node, dict):
            items = list(node.items())
            rng.shuffle(items)
            return {k: walk(v) for k, v in items}
        if isinstance(node, list):
            node = [walk(v) for v in node]
            if len(node) > 1 and rng.random() < 0.3:
                rng.shuffle(node)
            return node
        return node

    return json.dumps(walk(obj), indent=rng.choice([None, 1, 4])).encode()


def _deep(rng, data):
    depth = rng.choice([150, 900, 3000, 20000])
    i = data.find(b":")
    if i < 0:
        return b"[" * depth + data + b"]" * depth
    return data[: i + 1] + b"[" * depth + b"0" + b"]" * depth + b"," + data[i + 1 :]


def mutate(rng, data):
    """One random mutation of ``data`` (bytes) and its name."""
    kind = rng.choice(["flip", "truncate", "append", "shuffle", "deep"])
    if kind == "flip" and data:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return kind, bytes(out)
    if kind == "truncate":
        return kind, data[: rng.randrange(len(data) + 1)]
    if kind == "append":
        return kind, data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if kind == "shuffle":
        return kind, _shuffle_json(rng, data)
    return "deep", _deep(rng, data)

#!/usr/bin/python3
"""A vLLM-style KV events publisher for `kvscope watch` tests, and the
reference for what the watcher must reconstruct.

It publishes fixture batches the way vllm/distributed/kv_events.py does
(ZMQ PUB multipart [topic, seq as 8 big-endian bytes, msgpack payload]; a
ROUTER replay socket answering [identity, b"", start seq] with
[identity, b"", seq, payload] per buffered batch and [identity, b"", -1, b""]
at the end), in every encoding the publishers used (positional arrays,
type-tagged maps, both mixed; integer, signed and bytes hashes; the oldest
per-block token counts). Some batches are withheld from the live socket
(gaps; the replay buffer has all but some of them), one stream restarts at
seq 0. An independent model (a dict of held hashes, below) computes what a
watcher that replays its gaps must end with: written as expected.json.

Usage: watch_publisher.py DIR [full|restart|late|bad]   (DIR/ports.json, DIR/expected.json)
"""
import json
import os
import sys
import time

import msgpack
import zmq

DIR = sys.argv[1]
SCENARIO = sys.argv[2] if len(sys.argv) > 2 else "full"


def stored(hashes, parent, tokens, block_size, medium="GPU"):
    return ["BlockStored", hashes, parent, tokens, block_size, None, medium]


def stored_map(hashes, parent, tokens, block_size, **extra):
    m = {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": tokens,
         "block_size": block_size, "lora_id": None, "medium": "GPU", "lora_name": None,
         "extra_keys": [None] * len(hashes), "group_idx": 0, "kv_cache_spec_kind": "full_attention"}
    m.update(extra)
    return m


def removed(hashes, medium="GPU"):
    return ["BlockRemoved", hashes, medium]


def removed_map(hashes):
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU", "group_idx": 0}


B1 = bytes(range(32))            # SHA-256-sized bytes hashes (newer vLLM)
B2 = bytes(range(100, 132))
REAL = 15760518052499183552      # the hash of a batch quoted from a vLLM 0.26 log
REAL_TOKENS = [151644, 872, 198, 9064, 374, 279, 6722, 315, 5616, 30, 151645, 198, 151644, 77091, 198, 151667]

# (seq, batch as Python data, how the batch layer is encoded: "array" | "map")
FIXTURE = [
    (0, [1.0, [stored([11, 12], None, list(range(8)), 4)]], "array"),
    (1, {"ts": 1.1, "events": [stored_map([13], 12, [8, 9, 10, 11], 4, future_field=[1, 2])],
         "data_parallel_rank": 0}, "map"),
    (2, [1789095808.8378847, [stored_map([REAL], None, REAL_TOKENS, 16)], 0], "array"),
    (3, [1.3, [stored([B1], 13, [1, 2, 3, 4], 4)]], "array"),                   # withheld: replayed
    (4, [1.4, [stored([B2], B1, [5, 6, 7, 8], 4), removed([11])]], "array"),
    (5, {"ts": 1.5, "events": [stored_map([21, 22], 999, list(range(8)), 4)]}, "map"),   # 999: from before
    (6, [1.6, [removed([777, 22]), ["BlockStored", [31, 32], None, list(range(8)), [4, 4], None]]], "array"),
    (7, [1.7, [stored([-5, 33], 32, list(range(8)), 4)]], "array"),            # withheld, not in the buffer
    (8, [1.8, [removed_map([999])]], "map"),                                    # withheld: replayed
    (9, [1.9, [stored([34], 33, [1, 2, 3, 4], 4)]], "array"),
    (10, [2.0, [["AllBlocksCleared"], stored([41, 42, 43], None, list(range(12)), 4)]], "array"),
    (11, {"ts": 2.1, "events": [removed_map([43]), stored_map([44], 42, [1, 2, 3, 4], 4)]}, "map"),
    (12, [2.2, [stored([51], None, [1, 2, 3, 4], 4, medium="CPU"), stored([51], None, [1, 2, 3, 4], 4),
                stored([B2], 44, [1, 2, 3, 4], 4), stored_map([52, -9], 888, list(range(6)), 4)]], "array"),
]
if SCENARIO == "restart":  # the server restarts: the sequence begins again, its cache is new
    FIXTURE += [(0, [3.0, [stored([61, 62], None, list(range(8)), 4)]], "array"),
                (1, [3.1, [stored([63], 62, [1, 2, 3, 4], 4), removed([61])]], "array"),
                (2, [3.2, [stored([64], 63, [1, 2, 3, 4], 4)]], "array")]
WITHHELD = {3, 7, 8}      # indices into FIXTURE not sent live
NOT_BUFFERED = {7}        # nor kept for replay (an old batch the buffer dropped)
if SCENARIO == "restart":  # and the new run's first batch is missed: seen going back from 12 to 1
    WITHHELD |= {13}
if SCENARIO == "late":    # attached after the server published its first two batches: the replay has them
    WITHHELD |= {0, 1}
if SCENARIO == "bad":
    FIXTURE = [(0, [1.0, [stored([11], None, [1, 2, 3, 4], 4)]], "array"),
               (1, [1.1, [["BlockStored", ["not-a-hash"], None, [1, 2, 3, 4], 4]]], "array")]
    WITHHELD, NOT_BUFFERED = set(), set()


def hash_text(h):
    if isinstance(h, bytes):
        return h.hex()
    return str(h % (1 << 64))


def reference():
    """The watcher's end state from the batches it gets (live + replayed), by a plain dict."""
    held = {}  # (medium, hash text) -> {"parent", "known", "tokens"}
    t = dict(batches=0, stored=0, removed=0, removed_unseen=0, clears=0, missed=0, recovered=0, restarts=0,
             replayed_before_attach=0)
    last = -1
    pending = []  # withheld batches the replay can return, since the last live one
    for i, (seq, batch, _) in enumerate(FIXTURE):
        if i in WITHHELD:
            if seq == 0:
                pending = []  # a restarted server's replay buffer starts empty
            if i not in NOT_BUFFERED:
                pending.append(batch)
            continue
        if last < 0 and seq > 0:  # the first live batch: what came before is asked for from 0
            t["replayed_before_attach"] += len(pending)
            todo = pending + [batch]
        elif last >= 0 and seq > last + 1:
            t["missed"] += seq - last - 1
            t["recovered"] += len(pending)
            todo = pending + [batch]
        elif last >= 0 and seq <= last:  # back: a restarted server; its first `seq` batches were missed
            t["restarts"] += 1
            t["missed"] += seq
            t["recovered"] += len(pending)
            held.clear()
            todo = pending + [batch]
        else:
            todo = [batch]
        pending = []
        last = seq
        for b in todo:
            apply(held, t, b)
    return held, t, last


def apply(held, t, batch):
    t["batches"] += 1
    events = batch["events"] if isinstance(batch, dict) else batch[1]
    for e in events:
        if isinstance(e, dict):
            kind, hashes = e["type"], e.get("block_hashes", [])
            parent, tokens, size, medium = e.get("parent_block_hash"), e.get("token_ids", []), e.get("block_size", 0), e.get("medium") or "GPU"
        else:
            kind, hashes = e[0], (e[1] if len(e) > 1 else [])
            medium = "GPU"
            if kind == "BlockStored":
                parent, tokens, size = e[2], e[3], (e[4][0] if isinstance(e[4], list) else e[4])
                medium = (e[6] if len(e) > 6 else None) or "GPU"
            elif len(e) > 2:
                medium = e[2] or "GPU"
        if kind == "AllBlocksCleared":
            held.clear()
            t["clears"] += 1
        elif kind == "BlockRemoved":
            for h in hashes:
                if held.pop((medium, hash_text(h)), None) is None:
                    t["removed_unseen"] += 1
                else:
                    t["removed"] += 1
        else:
            prev = parent
            for k, h in enumerate(hashes):
                if prev is not None and (medium, hash_text(prev)) not in held:
                    held[(medium, hash_text(prev))] = {"parent": None, "known": False, "tokens": 0}
                n = max(0, min(size, len(tokens) - k * size))
                held[(medium, hash_text(h))] = {"parent": None if prev is None else hash_text(prev), "known": True,
                                                "tokens": n}
                t["stored"] += 1
                prev = h


def shape(held):
    """Roots, leaves and the longest chain of held blocks."""
    def parent_key(k):
        p = held[k]["parent"]
        return (k[0], p) if p is not None and (k[0], p) in held else None
    parents = {parent_key(k) for k in held} - {None}
    def depth(k):
        d = 0
        while k is not None:
            d, k = d + 1, parent_key(k)
        return d
    return (sum(1 for k in held if parent_key(k) is None), len(held) - len(parents),
            max((depth(k) for k in held), default=0))


def expected():
    held, t, last = reference()
    roots, leaves, depth = shape(held)
    tree = sorted(({"hash": h, "medium": m, "group": 0, **v} for (m, h), v in held.items()),
                  key=lambda b: (b["medium"], b["hash"]))
    known = sum(1 for v in held.values() if v["known"])
    return dict(t, blocks=known, unknown=len(held) - known, roots=roots, leaves=leaves, depth=depth,
                lost=t["missed"] - t["recovered"], last_seq=last, tree=tree)


def encode(batch):
    return msgpack.packb(batch, use_bin_type=True)


def write_atomic(name, obj):
    tmp = os.path.join(DIR, name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, os.path.join(DIR, name))


def serve_replay(router, buffer):
    while router.poll(0):
        ident, _, start = router.recv_multipart()
        first = int.from_bytes(start, "big")
        for seq, payload in buffer:
            if seq >= first:
                router.send_multipart([ident, b"", seq.to_bytes(8, "big"), payload])
        router.send_multipart([ident, b"", (-1).to_bytes(8, "big", signed=True), b""])


def main():
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)  # a PUB that hears its subscriber join (no slow-joiner losses)
    router = ctx.socket(zmq.ROUTER)
    for s in (pub, router):
        s.setsockopt(zmq.LINGER, 0)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    replay_port = router.bind_to_random_port("tcp://127.0.0.1")
    write_atomic("expected.json", expected() if SCENARIO != "bad" else {})
    write_atomic("ports.json", {"pub": pub_port, "replay": replay_port})
    if not pub.poll(20000):  # no subscriber within 20 s: the test failed elsewhere
        sys.exit("no subscriber")
    pub.recv()
    buffer = []
    for i, (seq, batch, _) in enumerate(FIXTURE):
        if seq == 0:
            buffer = []  # a restarted server's buffer starts empty
        payload = encode(batch)
        if i not in NOT_BUFFERED:
            buffer.append((seq, payload))
        if i not in WITHHELD:
            pub.send_multipart([b"kv-events", seq.to_bytes(8, "big"), payload])
        serve_replay(router, buffer)
        time.sleep(0.02)
    end = time.time() + 20  # answer replays until the subscriber leaves (or 20 s)
    while time.time() < end:
        serve_replay(router, buffer)
        if pub.poll(20) and pub.recv()[:1] == b"\x00":
            break


if __name__ == "__main__":
    main()
